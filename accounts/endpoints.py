"""The one wrapper every API view goes through: method, credential, request ceiling, errors.

    @endpoint("GET", limit=ratelimit.VERSION)
    def version(request): ...

Order: a method the route does not take (405), authentication (401/403; no rate-limit headers
on these), the ceiling (429 with its headers), on an `idempotent` endpoint the request's
`Idempotency-Key` when it sends one (accounts/idempotency.py: the first answer replayed, 409, 422),
the endpoint's own `prepare` step (if any), then the view. Any `ApiError` is rendered in the
surface's shape, and the X-RateLimit-* headers go on every answer after the ceiling was passed.
An endpoint takes one method; a route that takes several joins one endpoint per method with
`by_method` in its app's urls.py.

For an async view, with Redis, the checks run in the event loop: the caller from this process's
credential cache, then one counter step on Redis from the loop (gateway/state/redis/loop.py). Only
what needs the database hops to a worker thread: a credential not in the cache, a quota window to
rebuild, and `prepare`, unless the endpoint says its `prepare` reads only what the process holds
(`prepare_in_loop`) and the model registry is current. Without Redis (the embedded default), the
checks run in one hop to a worker thread, with `prepare` in the same hop. A hop returns its database
connection when it ends.
"""

from __future__ import annotations

from functools import partial, wraps
from typing import Callable

from asgiref.sync import iscoroutinefunction, sync_to_async
from django.conf import settings
from django.db import close_old_connections
from django.http import HttpRequest, HttpResponse

from accounts.authentication import Identity, authenticate, identify, identify_cached, remember
from accounts.idempotency import META_KEY, admitted_once, answered_once, answered_once_sync, claim_then
from accounts.key_use import note_key_use
from gateway.limits import ratelimit
from gateway.limits.quotas import quota_missing, quota_readings, quota_window_keys
from gateway.registry.snapshot import note_stamps, registry_current, stamp_keys
from gateway.state.counters import account_tag, window_hit
from gateway.state.redis import loop as loop_redis
from gateway.state.workers import in_worker
from gateway.web.errors import ApiError, FrameworkError, render_error

NONE = "none"  # no credential (login, webhooks)
CREDENTIAL = "credential"  # an API key or a session token
SESSION = "session"  # a session token; an API key is refused with 403
STAFF = "staff"  # a staff account's session token (the administration API); an API key is a 401, a non-staff 403


def endpoint(
    *methods: str,
    auth: str = CREDENTIAL,
    limit: ratelimit.Limit | None = ratelimit.DEFAULT,
    session_needs_api_access: bool = True,
    prepare: Callable[[HttpRequest], object] | None = None,
    prepare_in_loop: bool = False,
    idempotent: bool = False,
) -> Callable:
    """`prepare(request)`, when given, runs after the checks (in the same worker-thread hop for
    an async view, or in the loop with `prepare_in_loop`); its result is `request.prepared`.
    `idempotent`: a request with an `Idempotency-Key` is answered once per key (accounts/idempotency.py);
    its claim runs as part of `prepare`, in a worker hop for an async view."""
    allowed = ", ".join(methods)
    with_claim = claim_then(prepare) if idempotent else None  # `prepare` of a request with a key

    def check_method(request: HttpRequest) -> None:
        if request.method not in methods:
            raise FrameworkError(405, "Method Not Allowed.", headers={"Allow": allowed})

    def admit(request: HttpRequest) -> dict[str, str]:
        """Method, credential, ceiling: the checks before the view. Returns the rate headers."""
        check_method(request)
        if auth == NONE:
            headers = ratelimit.limit_hit(limit, subject=f"ip:{ratelimit.client_address(request)}") if limit else {}
        else:
            headers = _admit_caller(request)
        step = with_claim if idempotent and META_KEY in request.META else prepare
        if step is not None:
            _prepare(request, headers, step)
        return headers

    def _prepare(request: HttpRequest, headers: dict[str, str], step: Callable) -> None:
        try:
            request.prepared = step(request)
        except ApiError as exc:
            exc.headers = {**headers, **exc.headers}
            raise

    def _admit_caller(request: HttpRequest) -> dict[str, str]:
        """Identify the caller (from the process's cache when it can), then check and count.
        When the cached identity is refused, or its versions have moved (nothing was counted
        then), the credential is read again from the database and checked once more."""
        identity = identify(request)
        outcome = _counted(request, identity)
        if outcome is None:
            identity = identify(request, use_cache=False)
            outcome = _counted(request, identity)
        principal, quota_keys, result = outcome
        # a quota window whose counter is missing (Redis restarted) is rebuilt from the usage records
        request.quota_used = quota_readings(account=principal.account, keyed=quota_keys, amounts=result.amounts)
        return _admitted(request, principal, identity, result)

    async def admit_from_loop(request: HttpRequest) -> dict[str, str]:
        """`admit` for an async view with Redis: see the module's docstring."""
        check_method(request)
        if auth == NONE:
            headers = {}
            if limit:
                counters = ratelimit.limit_counters(limit, subject=f"ip:{ratelimit.client_address(request)}")
                headers = ratelimit.limit_headers(await loop_redis.window_hit(counters, settings.RATE_WINDOW_SECONDS))
        else:
            headers = await _admit_caller_from_loop(request)
        step = with_claim if idempotent and META_KEY in request.META else prepare
        if step is not None:
            if step is prepare and prepare_in_loop and registry_current():
                _prepare(request, headers, step)
            else:
                await in_worker(_prepare)(request, headers, step)
        return headers

    async def _admit_caller_from_loop(request: HttpRequest) -> dict[str, str]:
        identity = identify_cached(request) or await in_worker(identify)(request, use_cache=False)
        outcome = await _counted_from_loop(request, identity)
        if outcome is None:
            identity = await in_worker(identify)(request, use_cache=False)
            outcome = await _counted_from_loop(request, identity)
        principal, quota_keys, result = outcome
        readings = partial(quota_readings, account=principal.account, keyed=quota_keys, amounts=result.amounts)
        rebuild = quota_missing(account=principal.account, keyed=quota_keys, amounts=result.amounts)
        request.quota_used = await in_worker(readings)() if rebuild else readings()
        return _admitted(request, principal, identity, result)

    async def admit_batch_line(request: HttpRequest) -> dict[str, str]:
        """A line of a batch (batches/line_call.py), made by a worker for the batch's account: no credential
        (the account is the batch's, `batch_principal`, an attribute no client can set) and outside the
        per-minute ceilings; its quotas and budgets are read by the call's plan, which reads the windows
        itself when none were read with a ceiling (gateway/calls/plan.py)."""
        check_method(request)
        request.principal = request.batch_principal
        request.quota_used = None
        if prepare is not None:
            await in_worker(_prepare)(request, {}, prepare)
        return {}

    def _admitted(request: HttpRequest, principal, identity: Identity, result) -> dict[str, str]:
        request.principal = principal
        headers = ratelimit.limit_headers(result)  # raises the 429 of a refusing counter
        remember(identity, result.versions)
        if principal.via == "apikey":
            note_key_use(principal.account.pk, identity.token)  # a dictionary lookup (accounts/key_use.py)
        return headers

    def _counted(request: HttpRequest, identity: Identity):
        """The refusal rules, then one atomic counter step (the ceilings, the identity's
        versions, and the token-quota and budget windows read for the call that follows). None when a
        cached identity must be read again."""
        plan = _count_plan(request, identity)
        if plan is None:
            return None
        counters, window, guards, reads = plan[1]
        return _outcome(plan, window_hit(counters, window, guards=guards, reads=reads, beside=stamp_keys()))

    async def _counted_from_loop(request: HttpRequest, identity: Identity):
        plan = _count_plan(request, identity)
        if plan is None:
            return None
        counters, window, guards, reads = plan[1]
        return _outcome(plan, await loop_redis.window_hit(counters, window, guards=guards, reads=reads,
                                                          beside=stamp_keys()))

    def _count_plan(request: HttpRequest, identity: Identity):
        cached = identity.expected_version is not None
        try:
            principal = authenticate(request, identity, key_allowed=auth == CREDENTIAL,
                                     session_needs_api_access=session_needs_api_access, staff_only=auth == STAFF)
        except ApiError:
            if cached:
                return None
            raise
        account_id = principal.account.pk
        counters = ratelimit.limit_counters(limit, subject=f"acct:{account_tag(account_id)}") if limit else []
        quota_keys = quota_window_keys(account_id=account_id)
        guards = [(identity.version_key, identity.expected_version)]
        hit_args = (counters, settings.RATE_WINDOW_SECONDS, guards, [counted.key for counted in quota_keys])
        return principal, hit_args, quota_keys

    def _outcome(plan, result):
        # the model registry's stamps, read beside the step in its round trip: the request's registry()
        # calls use them instead of a round trip of their own (gateway/registry/routing.py)
        note_stamps(result.beside)
        return None if result.stale else (plan[0], plan[2], result)

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
                    if getattr(request, "batch_principal", None) is not None:
                        admission = admit_batch_line(request)
                    else:
                        admission = admit_from_loop(request) if loop_redis.available() else admit_async(request)
                    if idempotent and META_KEY in request.META:
                        limit_headers = await admitted_once(request, admission)
                        response = await answered_once(request, partial(view, request, *args, **kwargs))
                    else:
                        limit_headers = await admission
                        response = await view(request, *args, **kwargs)
                except ApiError as exc:
                    response = render_error(request, exc)
                return _with_headers(response, limit_headers)

            async_wrapper.csrf_exempt = True
            async_wrapper.idempotent = idempotent
            return async_wrapper

        @wraps(view)
        def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            limit_headers: dict[str, str] = {}
            try:
                limit_headers = admit(request)
                if idempotent and META_KEY in request.META:
                    response = answered_once_sync(request, partial(view, request, *args, **kwargs))
                else:
                    response = view(request, *args, **kwargs)
            except ApiError as exc:
                response = render_error(request, exc)
            return _with_headers(response, limit_headers)

        wrapper.csrf_exempt = True
        wrapper.idempotent = idempotent
        return wrapper

    return decorate


def _with_headers(response: HttpResponse, headers: dict[str, str]) -> HttpResponse:
    for name, value in headers.items():
        response[name] = value
    return response


def by_method(**views: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """One route that takes several methods: an endpoint view per method, joined in the app's
    urls.py, `by_method(GET=thing_detail, DELETE=thing_delete)`. Another method is the 405, before
    any credential is read, with `Allow` naming the methods in the order given."""
    allowed = ", ".join(views)

    async def route(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        view = views.get(request.method)
        if view is None:
            return render_error(request, FrameworkError(405, "Method Not Allowed.", headers={"Allow": allowed}))
        if iscoroutinefunction(view):
            return await view(request, *args, **kwargs)
        return await sync_to_async(view)(request, *args, **kwargs)

    route.csrf_exempt = True
    route.views = views  # which endpoint answers each method (the OpenAPI document's tests read it)
    return route
