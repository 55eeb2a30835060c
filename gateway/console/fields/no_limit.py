"""A ceiling or budget of the console's forms and lists that may be "no limit": stored as -1 (the
database, the API and the config file keep that value), shown and typed as the words "no limit".

`no_limit_field` turns a form's integer or decimal field into a text field that shows -1 as "no limit"
and takes "no limit" (or -1) back as -1; where `empty_is_no_limit`, an empty field is no limit too (a
group's ceilings and budgets, which are never empty), otherwise empty stays empty (an account's own
budget, empty: its group's)."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from django import forms
from unfold.widgets import UnfoldAdminTextInputWidget

NO_LIMIT = -1
WORDS = "no limit"


def is_no_limit(value) -> bool:
    try:
        return value is not None and value != "" and Decimal(str(value)) == NO_LIMIT
    except InvalidOperation:
        return False


def shown(value, as_text=str) -> str:
    """A stored ceiling or budget as the console writes it: "no limit" for -1, else `as_text(value)`."""
    return WORDS if is_no_limit(value) else as_text(value)


class NoLimitInput(UnfoldAdminTextInputWidget):
    """A text input (a number input cannot hold the words) showing -1 as "no limit"; its placeholder
    says what empty means."""

    def __init__(self, attrs=None):
        super().__init__({"inputmode": "decimal", **(attrs or {})})

    def format_value(self, value):
        return WORDS if is_no_limit(value) else super().format_value(value)


class NoLimitMixin:
    def __init__(self, *args, empty_is_no_limit: bool, **kwargs):
        self.empty_is_no_limit = empty_is_no_limit
        super().__init__(*args, **kwargs)

    def to_python(self, value):
        if isinstance(value, str) and " ".join(value.lower().split()) == WORDS:
            value = str(NO_LIMIT)
        elif self.empty_is_no_limit and value in self.empty_values:
            value = str(NO_LIMIT)
        return super().to_python(value)


class NoLimitIntegerField(NoLimitMixin, forms.IntegerField):
    default_error_messages = {"invalid": f"A whole number, or “{WORDS}”."}


class NoLimitDecimalField(NoLimitMixin, forms.DecimalField):
    default_error_messages = {"invalid": f"An amount, or “{WORDS}”."}


def no_limit_field(field: forms.Field, *, empty_is_no_limit: bool, help_text: str | None = None,
                   when_empty: str = WORDS) -> forms.Field:
    """`field` (a ModelForm's IntegerField or DecimalField) as one that reads and writes "no limit";
    `when_empty` is the placeholder, what an empty field means."""
    common = {"label": field.label, "help_text": field.help_text if help_text is None else help_text,
              "initial": field.initial, "required": field.required and not empty_is_no_limit,
              "widget": NoLimitInput(attrs={"placeholder": when_empty}), "empty_is_no_limit": empty_is_no_limit}
    if isinstance(field, forms.DecimalField):  # its own DecimalValidator comes with the new field
        return NoLimitDecimalField(max_digits=field.max_digits, decimal_places=field.decimal_places, **common)
    return NoLimitIntegerField(validators=field.validators, **common)  # the column's range
