"""Settings of the operator console: its theme, django-unfold
(docs/decisions/0116-console-theme-home-and-pages.md), branded as the gateway, with the home's
figures (gateway/console/home/) and a sidebar built from the admin's own list of models; and one way
to write a date and time everywhere in the console (gateway/settings/formats/).

Part of gateway/settings/__init__.py, which puts what `from_env` returns beside its own. Nothing here is
read from the environment: the console's look is the product's, not an installation's."""

from pathlib import Path

from django.templatetags.static import static

# The console's own stylesheet (gateway/console/theme/static/console/console.css), beside the apps' static
# files: the gateway package's root holds only the Django shell, so it cannot have a static/ of its own.
STATICFILES_DIRS = [Path(__file__).resolve().parents[1] / "console" / "theme" / "static"]

# Dates and times as the console writes them: the formats of gateway/settings/formats/en/formats.py
# (2026-11-27 14:02:05 UTC), ahead of the language's own (Nov. 27, 2026, 2:02 p.m.).
FORMAT_MODULE_PATH = ["gateway.settings.formats"]

UNFOLD = {
    "SITE_TITLE": "Model gateway",
    "SITE_HEADER": "Model gateway",
    "SITE_SUBHEADER": "Operator console",
    "SITE_SYMBOL": "hub",  # a Material Symbols name: the font ships with unfold
    # the tab's icon, the same hub in the theme's purple; the branded error pages link it too
    "SITE_FAVICONS": [{"rel": "icon", "type": "image/svg+xml", "href": lambda request: static("console/favicon.svg")}],
    # "/" leads to the console itself (gateway/urls.py): no "View site" or "Return to site" link.
    "SITE_URL": None,
    "SHOW_VIEW_ON_SITE": False,
    "SHOW_HISTORY": True,
    "DASHBOARD_CALLBACK": "gateway.console.home.page.dashboard",
    "STYLES": [lambda request: static("console/console.css")],
    "SIDEBAR": {
        "show_search": True,
        "show_all_applications": False,
        "navigation": "gateway.console.home.sidebar.navigation",
    },
}


def from_env(env=None) -> dict:
    """The settings above, the same whatever the environment."""
    return {name: value for name, value in globals().items() if name.isupper()}
