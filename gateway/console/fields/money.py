"""Prices and budgets in the operator's forms and lists. The labels and help texts name
the installation's currency (settings.CURRENCY, read when the form is made, not at import), an
amount is shown as it was written (0.15, not 0.1500), and a budget is "no limit" (stored as -1,
gateway/console/fields/no_limit.py) or an amount of at least 0. Used by the model and alias admin
(gateway/admin.py) and by the account and group admin (accounts/admin.py)."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings

from gateway.console.fields.no_limit import WORDS, is_no_limit, no_limit_field

PRICE_FIELDS = ("input_price", "cached_input_price", "cache_write_price", "output_price")
BUDGET_FIELDS = ("daily_budget", "weekly_budget", "monthly_budget")
PRICE_LABELS = {"input_price": "Input", "cached_input_price": "Cached input", "cache_write_price": "Cache write",
                "output_price": "Output"}
BUDGET_LABELS = {"daily_budget": "Daily budget", "weekly_budget": "Weekly budget", "monthly_budget": "Monthly budget"}
BUDGET_WINDOWS = {"daily_budget": "day", "weekly_budget": "week", "monthly_budget": "month"}
NOT_A_BUDGET = f"A budget is “{WORDS}” or an amount of at least 0."


def currency() -> str:
    return settings.CURRENCY


def prices_title() -> str:
    return f"Price per million tokens ({currency()})"


def plain(value: Decimal | int | None) -> str:
    """An amount as an operator wrote it: no trailing zeros, never an exponent (10, 0.15, -1)."""
    if value is None:
        return ""
    text = f"{Decimal(value):f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def price_summary(row) -> str:
    """A model's (or deployment's) prices on one line, for a list: "in 3 · cached 0.3 · write 3.75 · out 15 USD"
    (the kinds it has), or "no price"."""
    parts = [f"{short} {plain(getattr(row, name))}"
             for name, short in (("input_price", "in"), ("cached_input_price", "cached"),
                                 ("cache_write_price", "write"), ("output_price", "out"))
             if getattr(row, name) is not None]
    return f"{' · '.join(parts)} {currency()}" if parts else "no price"


def budgets_summary(row) -> str:
    """A group's (or an account's own) budgets on one line: "day 5 · month 100 USD", or "no limit". An
    account's budget left empty (its group's) is not shown."""
    parts = [f"{window} {plain(getattr(row, name))}" for name, window in BUDGET_WINDOWS.items()
             if getattr(row, name) is not None and getattr(row, name) >= 0]
    return f"{' · '.join(parts)} {currency()}" if parts else WORDS


PRICE_HELP = {
    "input_price": "Per million input tokens, in {currency}. Empty: input costs nothing (with no output "
                   "price either, the model has no price and the usage console says so).",
    "cached_input_price": "Per million input tokens the provider read from its prompt cache, in {currency}; "
                          "empty = the input price.",
    "cache_write_price": "Per million input tokens the provider wrote to its prompt cache (Anthropic and Bedrock "
                         "charge more for them, 1.25 times the input price for a 5-minute cache), in {currency}; "
                         "empty = the input price.",
    "output_price": "Per million output tokens, in {currency}; empty: output costs nothing.",
}
DEPLOYMENT_PRICE_HELP = "Per million tokens through this alias, in {currency}; empty = the model's own price."
GROUP_BUDGET_HELP = f"Spend per account in the window, in {{currency}}; empty or “{WORDS}”: no budget."
ACCOUNT_BUDGET_HELP = ("In {currency}: this account's own budget, in place of its group's; empty = the group's; "
                       f"“{WORDS}”: none, whatever the group's.")


class MoneyFormMixin:
    """For a ModelForm holding prices or budgets: the currency in their labels and help texts
    (`money_help`: a field's help, "{currency}" replaced), amounts shown as written, a budget read and
    written as "no limit" for -1 (empty too where `empty_budget_is_no_limit`: a group's), and a budget
    below 0 other than -1 refused."""

    money_help: dict[str, str] = {**PRICE_HELP, **dict.fromkeys(BUDGET_FIELDS, GROUP_BUDGET_HELP)}
    empty_budget_is_no_limit = True
    empty_budget_is = WORDS  # what an empty budget field says it means

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        code = currency()
        for name, field in list(self.fields.items()):
            label = PRICE_LABELS.get(name) or BUDGET_LABELS.get(name)
            if label is None:
                continue
            field.label = f"{label} ({code})"
            field.help_text = self.money_help[name].format(currency=code)
            if name in BUDGET_FIELDS:
                self.fields[name] = no_limit_field(field, empty_is_no_limit=self.empty_budget_is_no_limit,
                                                   when_empty=self.empty_budget_is)
            if isinstance(self.initial.get(name), Decimal):  # equal, so an untouched field is unchanged
                self.initial[name] = Decimal(plain(self.initial[name]))

    def clean(self):
        cleaned = super().clean()
        for name in BUDGET_FIELDS:
            value = cleaned.get(name)
            if name in self.fields and value is not None and value < 0 and not is_no_limit(value):
                self.add_error(name, NOT_A_BUDGET)
        return cleaned
