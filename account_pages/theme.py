"""The account pages' look: the console's theme (django-unfold's skeleton, its colours and the
console's stylesheet) without the admin's context, which would build the operators' sidebar."""

from __future__ import annotations

from django.templatetags.static import static
from django.utils.module_loading import import_string
from unfold.settings import get_config
from unfold.utils import convert_color


def theme_context(request) -> dict:
    """What unfold's skeleton template reads to look like the console: its colours, radius, title,
    favicons and stylesheets (the console's, then the account pages' own)."""
    config = get_config()
    colors = {name: {weight: convert_color(value) for weight, value in weights.items()}
              for name, weights in config["COLORS"].items() if isinstance(weights, dict)}
    return {"colors": colors, "border_radius": config.get("BORDER_RADIUS"), "site_title": config["SITE_TITLE"],
            "site_header": config["SITE_HEADER"], "site_symbol": config["SITE_SYMBOL"],
            "site_favicons": [{**icon, "href": _value(icon["href"], request)}
                              for icon in config.get("SITE_FAVICONS") or ()],
            "styles": [static("console/console.css"), static("account/account.css")]}


def _value(value, request):
    """A setting of unfold's that may be a callable or a dotted path to one, taking the request (as unfold's
    own site reads it)."""
    if callable(value):
        return value(request)
    if isinstance(value, str) and "." in value and "/" not in value:
        try:
            return import_string(value)(request)
        except ImportError:
            return value
    return value
