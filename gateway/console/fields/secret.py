"""Admin forms with write-only secrets (a server's API key and cloud credentials, an MCP server's auth
header): the stored value is never sent to the page, an empty entry keeps it, and a "clear" box removes it.
A form adding a server has nothing stored: it offers no "clear" box and does not speak of keeping a value.

A field declared on a form does not pass through the theme's choice of widgets (that happens only for
the model's own fields), so these name the theme's password and checkbox widgets themselves: Django's
bare password input has no style under the theme and cannot be seen."""

from django import forms
from django.utils.text import capfirst
from unfold.widgets import UnfoldAdminPasswordWidget, UnfoldBooleanWidget


def secret_input(what: str) -> forms.CharField:
    return forms.CharField(
        label=capfirst(what), required=False,
        widget=UnfoldAdminPasswordWidget(attrs={"autocomplete": "new-password"}, render_value=False),
        help_text=f"Leave empty to keep the stored {what}. Tick 'clear {what}' to remove it.",
    )


def clear_box(what: str) -> forms.BooleanField:
    return forms.BooleanField(required=False, label=f"Clear {what}", widget=UnfoldBooleanWidget)


class WriteOnlySecretForm(forms.ModelForm):
    """Subclasses name the fields in `secret_fields` and declare each with `secret_input` beside a
    `clear_box` named `clear_<field>` (listed right after it in Meta.fields, so the two stay
    together on the page)."""

    secret_fields: tuple[str, ...] = ()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for name in self.secret_fields:
            self.initial.pop(name, None)  # the stored value is never sent to the page
            if self.instance.pk is None and name in self.fields:
                self.fields[name].help_text = "Never shown again once saved: empty for none."

    def clean(self):
        cleaned = super().clean()
        kept = [name for name in self.secret_fields if not cleaned.get(name) and not cleaned.get(f"clear_{name}")]
        stored = {}
        if kept and self.instance.pk:
            stored = type(self.instance).objects.filter(pk=self.instance.pk).values(*kept).first() or {}
        for name in self.secret_fields:
            if cleaned.get(f"clear_{name}"):
                cleaned[name] = ""
            elif name in kept:
                cleaned[name] = stored.get(name) or ""
        return cleaned


def without_clear_boxes(fields, obj) -> list[str]:
    """An admin's fields for `obj`; for a new one (None), without the "clear" boxes: nothing is stored yet."""
    return [name for name in fields if obj is not None or not name.startswith("clear_")]
