"""The group page's guardrails (docs/guardrails.md): the list written in a textarea as YAML (or JSON,
which YAML reads too), one check per item, read as `applyconfig` reads a group's `guardrails`
(gateway/registry/config_file/guardrails.py) and checked by the guard's parser, every mistake shown
with its place (`guardrails[2].action: must be one of block, log`).

A webhook's secret is write-only, as a server's API key is: the page never shows it (the stored list is
written back without it, and so is a refused entry), an item that leaves it out keeps the secret stored
for the same url, `secret: ""` clears it, and the audit trail masks it (gateway/console/audit_trail.py)."""

from __future__ import annotations

import os
import re

import yaml
from django import forms
from unfold.widgets import UnfoldAdminTextareaWidget

from gateway.registry.config_file import ConfigError
from gateway.registry.config_file.checks import UniqueKeyLoader
from gateway.registry.config_file.guardrails import SECRET, GuardrailsError, read_guardrails

HELP = ("One check per item, in YAML or JSON, as in the configuration file: "
        "<code>- {check: secrets, on: both, action: block}</code>. Empty: no guardrails. A webhook's secret is "
        "never shown again: leave it out to keep the stored one (for the same url), "
        "<code>secret: \"\"</code> to clear it.")
EXAMPLE = ("- {check: pii, on: input, action: redact, restore: true}\n"
           "- {check: secrets, on: both, action: block}")
# a `secret` pair in text that did not parse, taken out before the text is shown again
SECRET_PAIR = re.compile(r"""[ \t]*["']?secret["']?[ \t]*:[ \t]*(?:"[^"\n]*"|'[^'\n]*'|[^,}\n]*),?""")


LEADING = ("check", "on", "action")  # shown first, as a check is written; PostgreSQL's jsonb keeps no key order


def without_secrets(items) -> list:
    return [_ordered({key: value for key, value in item.items() if key != SECRET}) if isinstance(item, dict)
            else item for item in items or []]


def _ordered(item: dict) -> dict:
    return {**{key: item[key] for key in LEADING if key in item}, **item}


def as_text(items) -> str:
    """The list as the page shows it: YAML, one line (a flow mapping) per check, without secrets."""
    return "".join("- " + yaml.safe_dump(item, default_flow_style=True, sort_keys=False, allow_unicode=True,
                                         width=10**6).strip() + "\n" for item in without_secrets(items))


class GuardrailsField(forms.CharField):
    """The list as text: read into a list by the form's `clean_guardrails`."""

    def __init__(self, **kwargs):
        super().__init__(required=False, strip=False, label="Guardrails", help_text=HELP,
                         widget=UnfoldAdminTextareaWidget(attrs={"rows": 8, "placeholder": EXAMPLE,
                                                                 "spellcheck": "false",
                                                                 "style": "font-family: monospace"}), **kwargs)

    def prepare_value(self, value):
        if isinstance(value, list):  # the stored list
            return as_text(value)
        if not value:
            return ""
        try:  # an entry shown again after a mistake: without the secrets it held
            parsed = yaml.load(value, Loader=UniqueKeyLoader)  # noqa: S506 — a SafeLoader subclass
        except yaml.YAMLError:
            return SECRET_PAIR.sub("", value)
        return as_text(parsed) if isinstance(parsed, list) else SECRET_PAIR.sub("", value)


class GuardrailsFormMixin(forms.ModelForm):
    """On a group's form: `guardrails` as text, read and checked on save."""

    guardrails = GuardrailsField()

    def clean_guardrails(self) -> list:
        text = self.cleaned_data.get("guardrails") or ""
        if not text.strip():
            return []
        try:
            value = yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 — a SafeLoader subclass
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
            raise forms.ValidationError(f"{where}not YAML or JSON: {getattr(exc, 'problem', None) or exc}") from None
        stored = []
        if self.instance.pk:
            stored = type(self.instance).objects.filter(pk=self.instance.pk).values_list("guardrails", flat=True)
            stored = next(iter(stored), []) or []
        try:
            return read_guardrails(value if value is not None else [], "", os.environ, stored)
        except GuardrailsError as exc:
            raise forms.ValidationError(exc.problems) from None
        except ConfigError as exc:
            raise forms.ValidationError(str(exc)) from None
