"""A routine's delivery targets in the console as a list: one row per target, up to
the API's five, instead of a JSON text box. The routine form checks them as the API does
(routines/targets.py `target_errors`, with the routine owner's linked channels)."""

from __future__ import annotations

from django import forms
from unfold.widgets import UnfoldAdminTextInputWidget

from routines.targets import FORMS, MAX_TARGETS


class DeliveryTargetsWidget(forms.MultiWidget):
    """MAX_TARGETS text rows, `delivery_targets_0` to `_4`; the empty ones are left out."""

    template_name = "routines/widgets/delivery_targets.html"

    def __init__(self, attrs=None):
        row = {"placeholder": FORMS, "autocomplete": "off", "spellcheck": "false", **(attrs or {})}
        super().__init__([UnfoldAdminTextInputWidget(attrs=row) for _ in range(MAX_TARGETS)])

    def decompress(self, value):
        targets = [t if isinstance(t, str) else str(t) for t in value] if isinstance(value, list) else []
        return (targets + [""] * MAX_TARGETS)[:max(MAX_TARGETS, len(targets))]


class DeliveryTargetsField(forms.Field):
    widget = DeliveryTargetsWidget

    def to_python(self, value):
        if isinstance(value, str):  # one value (a hand-made POST): one target
            value = [value]
        return [text.strip() for text in (value or []) if isinstance(text, str) and text.strip()]

    def prepare_value(self, value):
        return value if isinstance(value, list) else []

