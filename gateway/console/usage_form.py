"""The usage console's filters drawn with the theme's widgets (django-unfold's inputs and selects, as every
other console form has them). Only the drawing: gateway/console/usage_reads.py `parse_filters` reads what
was sent, and says what is wrong with it."""

from __future__ import annotations

from django import forms
from unfold.widgets import DATETIME_CLASSES, UnfoldAdminSelectWidget, UnfoldAdminTextInputWidget

from gateway.console.usage_reads import Filters

DATE = {"type": "date", "class": " ".join(DATETIME_CLASSES)}


def filter_form(filters: Filters | None, params, *, groups: list, models: list[str]) -> forms.Form:
    """The form as the page shows it: the filters read (or, when they could not be read, what was sent). No
    field is required: an empty one is no filter (the browser must not refuse to send the form)."""
    day = forms.DateInput(attrs=DATE, format="%Y-%m-%d")
    fields = {
        "from": forms.CharField(label="From (UTC day)", widget=day),
        "to": forms.CharField(label="To (included)", widget=day),
        "group": forms.ChoiceField(label="Group", choices=[("", "All groups")] + [(g.pk, g.name) for g in groups],
                                   widget=UnfoldAdminSelectWidget),
        "account": forms.CharField(label="Account (e-mail or id)", widget=UnfoldAdminTextInputWidget),
        "model": forms.ChoiceField(label="Model", choices=[("", "All models")] + [(m, m) for m in models],
                                   widget=UnfoldAdminSelectWidget),
        "tag": forms.CharField(label="Tag (key=value)",
                               widget=UnfoldAdminTextInputWidget(attrs={"placeholder": "app=billing"})),
    }
    for field in fields.values():
        field.required = False
    if filters is None:
        initial = {name: params.get(name, "") for name in fields}
    else:
        initial = {"from": filters.start.isoformat(), "to": filters.end.isoformat(),
                   "group": filters.group.pk if filters.group else "",
                   "account": filters.account.email if filters.account else "", "model": filters.model,
                   "tag": "=".join(filters.tag) if filters.tag else ""}
    form = type("UsageFilterForm", (forms.Form,), dict(fields))(initial=initial)
    return form
