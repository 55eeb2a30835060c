"""Answers for requests no endpoint took: unknown routes, and errors below the views."""

from django.http import HttpResponse

from gateway.errors import ApiError, FrameworkError, render_error


def not_found(request, exception=None) -> HttpResponse:
    return render_error(request, FrameworkError(404, "Not Found.", code="not_found"))


def bad_request(request, exception=None) -> HttpResponse:
    return render_error(request, ApiError(400, "Bad Request.", code="bad_request"))


def server_error(request) -> HttpResponse:
    return render_error(request, ApiError(500, "Server Error.", code="server_error"))
