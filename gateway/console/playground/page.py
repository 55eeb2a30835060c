"""GET /admin/playground/: the page (templates/admin/playground.html, its script
gateway/console/theme/static/console/playground.js). Every chat model and alias of the registry is
offered, not only those the staff account's group may use: one it may not use is marked, and sending
it shows the refusal an API call of that account gets."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib import admin
from django.template.response import TemplateResponse
from django.urls import reverse
from unfold.widgets import SELECT_CLASSES, TEXTAREA_CLASSES

from gateway.console.fields.money import currency
from gateway.console.styles import look
from gateway.registry.routing import alias_allowed, group_may_use
from gateway.registry.snapshot import registry

CHAT = "chat"
DEFAULT_MAX_TOKENS = 512


@dataclass(frozen=True)
class Choice:
    value: str
    allowed: bool  # the staff account's group may use it


def playground_page(request):
    """Staff only (wrapped by `admin.site.admin_view` in gateway/urls.py)."""
    models, aliases, default = choices(request.user.group)
    context = {
        **admin.site.each_context(request),
        "title": "Playground",
        "models": models,
        "aliases": aliases,
        "default_model": default,
        "max_tokens": DEFAULT_MAX_TOKENS,
        "currency": currency(),
        "group": request.user.group,
        "reply_url": reverse("admin-playground-reply"),
        "look": look(),
        "select_classes": " ".join(SELECT_CLASSES),  # unfold's own, as its select and textarea widgets draw them
        "textarea_classes": " ".join(TEXTAREA_CLASSES),
    }
    return TemplateResponse(request, "admin/playground.html", context)


def choices(group) -> tuple[list[Choice], list[Choice], str]:
    """The registry's chat models and its aliases with a chat deployment, each by name, and the model
    to show picked first (the default model, else the first the group may use)."""
    reg = registry()
    models = [Choice(t.public_id, group_may_use(group, t, reg))
              for t in sorted(reg.by_id.values(), key=lambda t: t.public_id) if CHAT in t.capabilities]
    aliases = [Choice(p.name, alias_allowed(group, p, reg)) for p in reg.aliases
               if any(CHAT in d.target.capabilities for d in p.deployments)]
    default = reg.default.public_id if reg.default is not None and CHAT in reg.default.capabilities else ""
    if not default:
        default = next((c.value for c in models + aliases if c.allowed), "")
    return models, aliases, default
