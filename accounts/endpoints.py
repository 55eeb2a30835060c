"""The one wrapper every API view goes through: method, credential, request ceiling, errors.

    @endpoint("GET", limit=ratelimit.VERSION)
    def version(request): ...

Order: a method the route does not take (405), authentication (401/403; no rate-limit headers
on these), the ceiling (429 with its headers), the endpoint's own `prepare` step (if any), then
the view. Any `ApiError` is rendered in the surface's shape, and the X-RateLimit-* headers go on
every answer after the ceiling was passed.

For an async view these checks run in one hop to a worker thread of the shared executor (they
query the database and the counters), with `prepare` in the same hop so a proxied call pays
for one hand-off, not several. The hop returns its database connection when it ends.
"""

from __future__ import annotations

from functools import wraps
from typing import Callable

from asgiref.sync import iscoroutinefunction, sync_to_async
from django.conf import settings
from django.db import close_old_connections
from django.http import HttpRequest, HttpResponse

from accounts.authentication import Identity, authenticate, identify, remember
from gateway import ratelimit
from gateway.counters import window_hit
from gateway.quotas import quota_readings, quota_window_keys
from gateway.routing import note_stamps, stamp_keys
from gateway.errors import ApiError, FrameworkError, render_error

NONE = "none"  # no credential (login, webhooks)
CREDENTIAL = "credential"  # an API key or a session token
SESSION = "session"  # a session token; an API key is refused with 403


def endpoint(
    *methods: str,
    auth: str = CREDENTIAL,
    limit: ratelimit.Limit | None = ratelimit.DEFAULT,
    session_needs_api_access: bool = True,
    prepare: Callable[[HttpRequest], object] | None = None,
) -> Callable:
    """`prepare(request)`, when given, runs after the checks (in the same worker-thread hop for
    an async view); its result is `request.prepared`."""
    allowed = ", ".join(methods)

    def admit(request: HttpRequest) -> dict[str, str]:
        """Method, credential, ceiling: the checks before the view. Returns the rate headers."""
        if request.method not in methods:
            raise FrameworkError(405, "Method Not Allowed.", headers={"Allow": allowed})
        if auth == NONE:
            headers = ratelimit.limit_hit(limit, subject=f"ip:{ratelimit.client_address(request)}") if limit else {}
        else:
            headers = _admit_caller(request)
        if prepare is not None:
            try:
                request.prepared = prepare(request)
            except ApiError as exc:
                exc.headers = {**headers, **exc.headers}
                raise
        return headers

    def _admit_caller(request: HttpRequest) -> dict[str, str]:
        """Identify the caller (from the process's cache when it can), then check and count.
        When the cached identity is refused, or its versions have moved (nothing was counted
        then), the credential is read again from the database and checked once more."""
        identity = identify(request)
        outcome = _check_and_count(request, identity)
        if outcome is None:
            identity = identify(request, use_cache=False)
            outcome = _check_and_count(request, identity)
        principal, quota_keys, result = outcome
        request.principal = principal
        # a quota window whose counter is missing (Redis restarted) is rebuilt from the usage records
        request.quota_used = quota_readings(account_id=principal.account.pk, group=principal.account.group,
                                            keyed=quota_keys, amounts=result.amounts)
        headers = ratelimit.limit_headers(result)  # raises the 429 of a refusing counter
        remember(identity, result.versions)
        return headers

    def _check_and_count(request: HttpRequest, identity: Identity):
        """The refusal rules, then one atomic counter step: the ceilings, the identity's
        versions, and the token-quota windows read for the call that follows. None when a
        cached identity must be read again."""
        cached = identity.expected_versions is not None
        try:
            principal = authenticate(request, identity, key_allowed=auth != SESSION,
                                     session_needs_api_access=session_needs_api_access)
        except ApiError:
            if cached:
                return None
            raise
        account_id = principal.account.pk
        counters = ratelimit.limit_counters(limit, subject=f"acct:{account_id}") if limit else []
        quota_keys = quota_window_keys(account_id=account_id)
        expected = identity.expected_versions or (None, None)
        # the model registry's stamps ride along (any value expected): the request's registry()
        # calls use them instead of a round trip of their own (gateway/routing.py)
        guards = [*zip(identity.version_keys, expected), *((key, None) for key in stamp_keys())]
        result = window_hit(counters, settings.RATE_WINDOW_SECONDS, guards=guards,
                            reads=[key for key, _window in quota_keys])
        if len(result.versions) == len(guards):
            note_stamps(result.versions[-2:])
        return None if result.stale else (principal, quota_keys, result)

    def admit_in_worker(request: HttpRequest) -> dict[str, str]:
        try:
            return admit(request)
        finally:
            close_old_connections()  # give the connection back (to the pool) for the next hop

    def decorate(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        if iscoroutinefunction(view):
            admit_async = sync_to_async(admit_in_worker, thread_sensitive=False)

            @wraps(view)
            async def async_wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
                limit_headers: dict[str, str] = {}
                try:
                    limit_headers = await admit_async(request)
                    response = await view(request, *args, **kwargs)
                except ApiError as exc:
                    response = render_error(request, exc)
                for name, value in limit_headers.items():
                    response[name] = value
                return response

            async_wrapper.csrf_exempt = True
            return async_wrapper

        @wraps(view)
        def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            limit_headers: dict[str, str] = {}
            try:
                limit_headers = admit(request)
                response = view(request, *args, **kwargs)
            except ApiError as exc:
                response = render_error(request, exc)
            for name, value in limit_headers.items():
                response[name] = value
            return response

        wrapper.csrf_exempt = True
        return wrapper

    return decorate
