"""Budgets in money: what an account may spend per UTC day, week (from Wednesday 14:00) and
month, in the installation's currency. Each account group has one per window (-1: none); an account
may have its own in place of its group's (null: the group's; -1: none for that account).

They are counted and checked as the token quotas are (gateway/limits/quotas.py): a spend counter per
account and window, a cache of the usage records' cost, read in the request's one counter step and
rebuilt from the records when missing. Reaching one is refused exactly as a used-up token quota is:
403 `permission_denied` on /v1 (`permission_error` on /v1/messages), `detail` on the native surface, a
`limite_perfil` event in the native chat stream; the message names the budget."""

from __future__ import annotations

from django.conf import settings

from gateway.registry.prices import money, units_of
from gateway.telemetry import genai, metrics, tracing
from gateway.web.errors import ApiError

PERIODS = ("day", "week", "month")
ADJECTIVE = {"day": "daily", "week": "weekly", "month": "monthly"}
BUDGET_FIELDS = tuple(f"{ADJECTIVE[period]}_budget" for period in PERIODS)  # on a group, and an account's own


def budgets_of(account) -> dict[str, int]:
    """period → the account's budget in COST_UNITS (-1: none): its own where it has one, else its group's."""
    group = account.group
    return {period: units_of(own if (own := getattr(account, field)) is not None else getattr(group, field))
            for period, field in zip(PERIODS, BUDGET_FIELDS)}


def budget_text(units: int) -> str:
    """A budget or a spend for a message: the amount with at least two decimals, and the currency."""
    amount = money(units).normalize()
    places = max(2, -amount.as_tuple().exponent) if amount.as_tuple().exponent < 0 else 2
    return f"{amount:.{places}f} {settings.CURRENCY}"


def budget_refusal(period: str, budget: int, resets_at: str) -> ApiError:
    """The 403 of a budget spent (counted in the refusals' metric by window)."""
    metrics.budget_refused(period)
    message = f"Budget reached: the {ADJECTIVE[period]} budget of {budget_text(budget)} is spent until {resets_at}."
    if tracing.ENABLED:
        genai.refused("budget", message, **{"gateway.budget.period": period})
    return ApiError(403, message, code="permission_denied")
