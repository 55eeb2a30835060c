"""The console's sidebar (unfold's SIDEBAR navigation, settings.UNFOLD): the console's own pages
first (the home, the usage console, the playground, the API contract), then each section of the admin with the
models the operator may see, read from the admin's own list (`get_app_list`), so that a model
registered later appears here without a change to this list."""

from __future__ import annotations

from django.contrib import admin
from django.urls import reverse
from django.utils.html import escape

# Material Symbols (the font ships with unfold) by model; any other model gets DEFAULT_ICON.
ICONS = {
    "ModelServer": "dns", "Model": "neurology", "Alias": "alt_route", "UsageRecord": "receipt_long",
    "AccountGroup": "groups", "Account": "person", "Profile": "tune", "Conversation": "forum",
    "Collection": "folder", "Document": "description", "McpServer": "extension", "Routine": "schedule",
    "Run": "play_circle", "InboxMessage": "inbox", "LinkedChannel": "link", "StoredFile": "draft", "Batch": "stacks",
}
DEFAULT_ICON = "table_rows"


def navigation(request) -> list[dict]:
    """The sidebar's groups for this request's user (unfold renders a title as markup: escaped here)."""
    console = [{"title": "Home", "icon": "monitoring", "link": reverse("admin:index")}]
    if request.user.has_perm("gateway.view_usagerecord"):
        console.append({"title": "Usage console", "icon": "bar_chart", "link": reverse("admin:gateway_usage_console")})
    console.append({"title": "Playground", "icon": "chat", "link": reverse("admin-playground")})
    console.append({"title": "API contract", "icon": "api", "link": reverse("admin-api-contract")})
    groups = [{"title": "Console", "items": console}]
    for app in admin.site.get_app_list(request):
        items = [{"title": escape(model["name"]), "icon": ICONS.get(model["object_name"], DEFAULT_ICON),
                  "link": model["admin_url"]} for model in app["models"] if model.get("admin_url")]
        if items:
            groups.append({"title": escape(app["name"]), "separator": True, "items": items})
    return groups
