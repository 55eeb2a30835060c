"""Splitting the middleware by surface.

The API surfaces (`/v1`, `/api`) need none of the operator console's middleware (sessions,
CSRF, authentication, messages, static files), and on an async view each of those costs two
thread hops per request. This middleware sends console requests through that stack and API
requests straight to the view, applying the security middleware's redirect and headers inline
(they are plain computations, so no thread hop is needed).

Every API answer is for one caller (a key, a session, a login, a routine's secret or token), so
none may be kept by a browser or a shared cache: `Cache-Control: no-store` unless the view set a
Cache-Control of its own (the streams' `no-cache`). The console's pages are the admin's, which
sends `no-store` itself (never_cache)."""

from __future__ import annotations

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings
from django.core.handlers.base import BaseHandler
from django.core.handlers.exception import convert_exception_to_response
from django.middleware.security import SecurityMiddleware
from django.utils.module_loading import import_string

# Which stack a path goes through is the table of paths' (gateway/web/paths.py): the probes
# (gateway/ops/health.py) and the scrape (gateway/ops/metrics_view.py) straight to their view (no
# https redirect, no Host check, no session), the API paths past the console's middleware.
from gateway.web.paths import PROBE_PATHS, is_api_path


class SurfaceMiddleware:
    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        self.security = SecurityMiddleware(get_response)
        self.is_async = iscoroutinefunction(get_response)
        self.console = console_chain(get_response, self.is_async)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request):
        if self.is_async:
            return self.__acall__(request)
        if request.path in PROBE_PATHS:
            return self.get_response(request)
        if not is_api_path(request.path):
            return self.console(request)
        redirect = self.security.process_request(request)
        response = redirect or self.get_response(request)
        return api_headers(self.security.process_response(request, response))

    async def __acall__(self, request):
        if request.path in PROBE_PATHS:
            return await self.get_response(request)
        if not is_api_path(request.path):
            return await self.console(request)
        redirect = self.security.process_request(request)
        response = redirect or await self.get_response(request)
        return api_headers(self.security.process_response(request, response))


def api_headers(response):
    response.setdefault("Cache-Control", "no-store")
    return response


def console_chain(get_response, is_async: bool):
    """CONSOLE_MIDDLEWARE around `get_response`, each one adapted to sync or async exactly as
    Django's own handler does it (BaseHandler.load_middleware)."""
    adapter = BaseHandler()
    handler, handler_is_async = get_response, is_async
    for dotted in reversed(settings.CONSOLE_MIDDLEWARE):
        middleware = import_string(dotted)
        can_sync = getattr(middleware, "sync_capable", True)
        can_async = getattr(middleware, "async_capable", False)
        middleware_is_async = False if (not handler_is_async and can_sync) else can_async
        adapted = adapter.adapt_method_mode(middleware_is_async, handler, handler_is_async, name=dotted)
        handler = convert_exception_to_response(middleware(adapted))
        handler_is_async = middleware_is_async
    return adapter.adapt_method_mode(is_async, handler, handler_is_async)
