"""Creating and changing a row through the console's own form, so that the API stores only what the
console would: the form's fields and cleaning, and the model's `clean()` it runs.

A new row (POST) is the console's blank page with the fields sent put in (a field left out has the
default the page shows); a change (PATCH) is the form as the console shows it for the row, untouched,
with the fields sent put in: each field not sent keeps its stored value exactly as saving the console's
page unchanged would (a write-only secret left empty keeps the stored one, a group's guardrails keep
their webhook secrets). The row is saved, with its many-to-many fields, in the request's audited
transaction (admin_api/access.py). A row that others still need (a group with accounts) is not
deleted: 409.
"""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models import ProtectedError, RestrictedError
from django.forms import ModelForm

from admin_api.access import audited
from admin_api.bodies import form_failed
from admin_api.filters import MAX_ID
from gateway.web.errors import ApiError


def form_data(form_class: type[ModelForm], instance: models.Model | None, sent: dict[str, Any]) -> dict[str, Any]:
    """What the console's page would submit: its values untouched (a new row's defaults, as its blank page
    shows them), then those sent."""
    shown = form_class(instance=instance)
    data = {name: shown[name].value() for name in shown.fields}
    data.update(sent)
    return {name: value for name, value in data.items() if value is not None}


def saved(request, form_class: type[ModelForm], instance: models.Model | None, sent: dict[str, Any], *,
          names: dict[str, str] | None = None, after=None) -> models.Model:
    """The row written through `form_class`, or the 422 of its errors; `after(row)` runs in the same
    audited transaction."""
    form = form_class(data=form_data(form_class, instance, sent), instance=instance)
    if not form.is_valid():
        raise form_failed(form, names)
    with audited(request):
        row = form.save()
        if after is not None:
            after(row)
    return row


def deleted(request, row: models.Model, what: str) -> None:
    try:
        with audited(request):
            row.delete()
    except (ProtectedError, RestrictedError) as exc:
        needing = getattr(exc, "protected_objects", None) or getattr(exc, "restricted_objects", None) or []
        users = sorted({str(obj) for obj in needing})[:5]
        raise ApiError(409, f"The {what} is still in use and was not deleted"
                            + (f" (by {', '.join(users)})." if users else "."), code="in_use") from None


def found(model: type[models.Model], pk: int, what: str, queryset=None) -> models.Model:
    """The row of id `pk`, or the 404 `{detail}` (an id past the database's integers too)."""
    row = None if pk > MAX_ID else (queryset if queryset is not None else model.objects).filter(pk=pk).first()
    if row is None:
        raise ApiError(404, f"No {what} has the id {pk}.", code="not_found")
    return row
