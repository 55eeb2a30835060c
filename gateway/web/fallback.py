"""Answers for requests no endpoint took: unknown routes, and errors below the views."""

import sys

from django.conf import settings
from django.http import HttpResponse

from gateway.web.errors import ApiError, FrameworkError, ServiceUnavailable, outage_of, render_error


def not_found(request, exception=None) -> HttpResponse:
    return render_error(request, FrameworkError(404, "Not Found.", code="not_found"))


def bad_request(request, exception=None) -> HttpResponse:
    return render_error(request, ApiError(400, "Bad Request.", code="bad_request"))


def server_error(request) -> HttpResponse:
    """A 500, unless what failed is the database or Redis being away (raised outside a view, in a
    middleware): then the outage's 503 with Retry-After."""
    exception = sys.exc_info()[1]
    what = outage_of(exception) if exception is not None else None
    if what is not None:
        return render_error(request, ServiceUnavailable(what, settings.OUTAGE_RETRY_AFTER_SECONDS))
    return render_error(request, ApiError(500, "Server Error.", code="server_error"))
