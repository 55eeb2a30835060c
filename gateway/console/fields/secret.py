"""Admin forms with one write-only secret (a server's API key, an MCP server's auth header): the
stored value is never sent to the page, an empty entry keeps it, and a "clear" box removes it.

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
    """Subclasses name the field in `secret_field` and declare it with `secret_input` beside a
    `clear_box` named `clear_<secret_field>` (listed right after it in Meta.fields, so the two stay
    together on the page)."""

    secret_field = ""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.initial.pop(self.secret_field, None)  # the stored value is never sent to the page

    def clean(self):
        cleaned = super().clean()
        name = self.secret_field
        if cleaned.get(f"clear_{name}"):
            cleaned[name] = ""
        elif not cleaned.get(name) and self.instance.pk:
            stored = type(self.instance).objects.filter(pk=self.instance.pk).values_list(name, flat=True).first()
            cleaned[name] = stored or ""
        return cleaned
