"""CSRF for every console view, not only those that ask for it.

Django checks a form's CSRF token in CsrfViewMiddleware's `process_view`, which only its own handler
calls, for the middleware in MIDDLEWARE. The console's middleware runs in a chain of its own
(gateway/web/surfaces.py: the API's paths skip it), so that step never ran: a view was protected only
when it carried `csrf_protect` itself (the admin's views do; a plain view did not). This middleware,
in CsrfViewMiddleware's place in CONSOLE_MIDDLEWARE, resolves the view and runs that step before it:
a POST without the token is refused for every console view, `csrf_exempt` is honoured, and a view
that also carries `csrf_protect` is not checked twice (the request is marked done)."""

from __future__ import annotations

from django.middleware.csrf import CsrfViewMiddleware
from django.urls import Resolver404, get_resolver


class ConsoleCsrfMiddleware(CsrfViewMiddleware):
    def process_request(self, request):
        super().process_request(request)
        try:
            match = get_resolver(getattr(request, "urlconf", None)).resolve(request.path_info)
        except Resolver404:  # Django answers the 404 itself
            return None
        return self.process_view(request, match.func, match.args, match.kwargs)
