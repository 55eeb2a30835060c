"""The unknown page and the server error as a browser meets them under the console: an
HTML page in the console's theme, for every path outside the API and the probes (`/admin/...`, `/`,
any other path the table of paths gives the console's stack, gateway/web/paths.py) when the client
does not ask for JSON. The API keeps its answers exactly (spec 7.1, rule 2 for `/v1`): those paths,
and a client sending `Accept: application/json`, get gateway/web/fallback.py's, as before. So does an
outage (the database or Redis away): its 503 with Retry-After.

The page reads nothing from the database (a 500 may be the database's doing): the theme's colours
come from the settings (unfold's COLORS), and no user, session or sidebar is looked at."""

from __future__ import annotations

import sys

from django.http import HttpResponse
from django.template.loader import render_to_string
from unfold.settings import get_config
from unfold.utils import convert_color

from gateway.web import fallback
from gateway.web.errors import accepts_json, outage_of
from gateway.web.paths import PROBE_PATHS, is_api_path

PAGES = {
    404: ("Page not found", "Nothing is at this address in the console."),
    500: ("Server error", "The gateway failed to answer this page. The error is in its log, with this page's "
                          "request id; try again, or go back to the console's home."),
}


def wants_page(request) -> bool:
    """A browser under the console: not an API path or a probe, and not asking for JSON."""
    path = request.path
    return not (is_api_path(path) or path in PROBE_PATHS or accepts_json(request))


def not_found(request, exception=None) -> HttpResponse:
    if wants_page(request):
        return page(request, 404)
    return fallback.not_found(request, exception)


def server_error(request) -> HttpResponse:
    exception = sys.exc_info()[1]
    if wants_page(request) and (exception is None or outage_of(exception) is None):
        return page(request, 500)
    return fallback.server_error(request)


def page(request, status: int) -> HttpResponse:
    title, message = PAGES[status]
    config = get_config()
    colors = {name: {weight: convert_color(value) for weight, value in weights.items()}
              for name, weights in config["COLORS"].items() if isinstance(weights, dict)}
    html = render_to_string("errors/console.html", {
        "status": status, "title": title, "message": message, "path": request.path,
        "request_id": getattr(request, "request_id", "") if status >= 500 else "",
        "site_title": config["SITE_TITLE"], "site_header": config["SITE_HEADER"], "colors": colors,
        "site_favicons": [{**icon, "href": icon["href"](request) if callable(icon["href"]) else icon["href"]}
                          for icon in config["SITE_FAVICONS"]],
    })
    return HttpResponse(html, status=status, content_type="text/html; charset=utf-8")
