"""Reading a request's JSON body for the console's forms, and their refusals in the API's 422 shape.

A field the resource does not take is refused by name. Each value must have the JSON type of its model
field (true or false for a boolean, a number for an integer, a list of ids for a many-to-many, ...): the
console's forms read text from a page and would take "yes" for true or "5" for 5, which a JSON client
means as something else. The type is read from the model field itself, so no rule is written twice:
what a value may be beyond its type is the form's, and the model's `clean()` through it.
"""

from __future__ import annotations

from typing import Any

from django.db import models
from django.forms import BaseForm

from admin_api.filters import MAX_ID
from gateway.web.body import read_json_object
from gateway.web.errors import ValidationFailed

UNKNOWN = "Unknown field."
# the JSON types a value of each kind of model field may have; None (null) wherever the form decides
INTEGERS = (models.IntegerField, models.BigIntegerField, models.PositiveIntegerField,
            models.PositiveSmallIntegerField, models.SmallIntegerField)


def read_fields(request, allowed: tuple[str, ...] | frozenset[str]) -> dict[str, Any]:
    """The body as an object holding only fields of `allowed` (a 422 naming each other one)."""
    data = read_json_object(request)
    unknown = {name: [UNKNOWN] for name in data if name not in allowed}
    if unknown:
        raise ValidationFailed(unknown)
    return data


def type_problem(field: models.Field, value: Any) -> str | None:
    """Why `value` cannot be a JSON value of the model `field`, or None."""
    if value is None:
        return "This field may not be null." if isinstance(field, models.BooleanField) else None
    if isinstance(field, models.BooleanField):
        return None if isinstance(value, bool) else "Must be true or false."
    if isinstance(field, models.ManyToManyField):
        ok = isinstance(value, list) and all(is_id(item) for item in value)
        return None if ok else "Must be a list of ids."
    if isinstance(field, models.ForeignKey):
        return None if is_id(value) else "Must be an id."
    if isinstance(field, INTEGERS):
        return None if _is_number(value) and float(value).is_integer() else "Must be a whole number."
    if isinstance(field, (models.FloatField, models.DecimalField)):
        ok = _is_number(value) or (isinstance(field, models.DecimalField) and isinstance(value, str))
        return None if ok else "Must be a number."
    if isinstance(field, models.JSONField):
        return None
    return None if isinstance(value, str) else "Must be a string."


def check_types(model: type[models.Model], data: dict[str, Any]) -> None:
    """A 422 naming every value of `data` whose type is not its model field's (fields the model does not
    have are the caller's: a password, a key)."""
    errors = {}
    for name, value in data.items():
        try:
            field = model._meta.get_field(name)
        except Exception:  # noqa: BLE001 — FieldDoesNotExist: not a model field, checked by its caller
            continue
        if (problem := type_problem(field, value)) is not None:
            errors[name] = [problem]
    if errors:
        raise ValidationFailed(errors)


def form_failed(form: BaseForm, names: dict[str, str] | None = None) -> ValidationFailed:
    """The form's errors as the 422 `{message, errors: {field: [message]}}`, under the API's field names
    (`names` maps a form field to its API name; errors of the whole form are under `non_field_errors`)."""
    names = {"__all__": "non_field_errors", **(names or {})}
    errors: dict[str, list[str]] = {}
    for field, messages in form.errors.items():
        errors.setdefault(names.get(field, field), []).extend(str(message) for message in messages)
    total = sum(len(messages) for messages in errors.values())
    first = next(iter(errors.values()))[0]
    message = first if total == 1 else f"{first} (and {total - 1} more error{'s' if total > 2 else ''})"
    return ValidationFailed(errors, message)


def is_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_ID


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
