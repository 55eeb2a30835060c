"""X-Forwarded-* believed only from TRUSTED_PROXIES; X-Request-Id on every response (spec 7.4);
503 instead of 500 while a backing service is down."""

import asyncio
import ipaddress
import logging
import re
import uuid
from functools import lru_cache

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.conf import settings

from gateway.telemetry.logjson import Exchange, current
from gateway.web.errors import ServiceUnavailable, outage_of, render_error

logger = logging.getLogger(__name__)

CLIENT_REQUEST_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def request_id_for(request) -> str:
    """The client's own id when it is 1 to 64 letters, digits, '-' or '_'; a new one otherwise."""
    sent = request.headers.get("X-Request-Id", "")
    return sent if CLIENT_REQUEST_ID.match(sent) else uuid.uuid4().hex


class HybridMiddleware:
    """A middleware that runs sync or async, as the handler it wraps does."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)


# Headers a proxy writes about the client; removed from requests of any other peer.
FORWARDED_HEADERS = ("HTTP_X_FORWARDED_FOR", "HTTP_X_FORWARDED_PROTO", "HTTP_X_FORWARDED_HOST",
                     "HTTP_X_FORWARDED_PORT", "HTTP_FORWARDED")


@lru_cache(maxsize=8)
def _proxy_networks(entries: tuple[str, ...]) -> tuple[tuple, bool]:
    networks = tuple(ipaddress.ip_network(entry, strict=False) for entry in entries if entry != "unix")
    return networks, "unix" in entries


def forwarded_host(hop: str) -> str:
    """An X-Forwarded-For hop without the port some proxies add ("203.0.113.7:5123",
    "[2001:db8::1]:443"), so that a client's address does not change with its port."""
    hop = hop.strip()
    if hop.startswith("["):
        return hop[1:].partition("]")[0]
    if hop.count(":") == 1:
        return hop.partition(":")[0]
    return hop


def is_trusted_proxy(address: str) -> bool:
    """Whether `address` (a socket peer or an X-Forwarded-For hop) is one of TRUSTED_PROXIES.
    "unix" in the list stands for a peer without an address (a proxy on a Unix socket)."""
    networks, unix = _proxy_networks(tuple(settings.TRUSTED_PROXIES))
    if not address:
        return unix
    try:
        ip = ipaddress.ip_address(forwarded_host(address))
    except ValueError:
        return False
    if ip.version == 6 and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip in network for network in networks)


class TrustedProxyMiddleware(HybridMiddleware):
    """First in MIDDLEWARE: unless the socket peer is one of TRUSTED_PROXIES, the X-Forwarded-*
    headers are removed before anything reads them, so `request.is_secure()`
    (SECURE_PROXY_SSL_HEADER), the SSL redirect, HSTS and the client address of the per-address
    limits (gateway.limits.ratelimit.client_address) never take a client's word for them."""

    def __call__(self, request):
        meta = request.META
        if any(name in meta for name in FORWARDED_HEADERS) and not is_trusted_proxy(meta.get("REMOTE_ADDR", "")):
            for name in FORWARDED_HEADERS:
                meta.pop(name, None)
            request.__dict__.pop("headers", None)  # HttpHeaders cached from the old META, if read
        return self.get_response(request)  # under ASGI a coroutine, which the caller awaits


class RequestIdMiddleware(HybridMiddleware):
    """The request id (spec 7.4), and what the request's record (gateway/telemetry/logjson.py) learns
    from the view: route, status, caller. Under the project's ASGI application the record was
    started at the request's arrival and is finished there after the last byte; under any other
    handler (the test client) it is started here and finished when the response is closed."""

    def __call__(self, request):
        if iscoroutinefunction(self):
            return self.__acall__(request)
        exchange, token = _exchange_of(request)
        try:
            response = self.get_response(request)
        finally:
            if token is not None:
                current.reset(token)
        return _answered(request, response, exchange, token is not None)

    async def __acall__(self, request):
        exchange, token = _exchange_of(request)
        try:
            response = await self.get_response(request)
        except asyncio.CancelledError:  # the client went away: counted as 499 when the request ends
            exchange.answered(request, 0)
            raise
        finally:
            if token is not None:
                current.reset(token)
        return _answered(request, response, exchange, token is not None)


def _exchange_of(request):
    """The request's id, and its record: the one the ASGI application started, or a new one put
    in the context here (returned with the context token to reset)."""
    request.request_id = request_id_for(request)
    exchange, token = current.get(), None
    if exchange is None:
        exchange = Exchange(request.method)
        token = current.set(exchange)
    exchange.request_id = request.request_id
    return exchange, token


def _answered(request, response, exchange: Exchange, own: bool):
    response["X-Request-Id"] = request.request_id
    exchange.answered(request, response.status_code)
    if own:  # Django calls a response's closers when it has been sent (HttpResponseBase.close)
        response._resource_closers.append(exchange.finish)
    return response


class OutageMiddleware(HybridMiddleware):
    """A view (sync or async, the webhook ingest, the console's) that raises because PostgreSQL,
    Redis or the task queue cannot be reached is answered 503 with Retry-After in its surface's
    error shape, and the cause is logged in one line (no stack trace). Any other exception goes
    on to Django's 500. Sits inside RequestIdMiddleware, so the 503 carries the request id."""

    def __call__(self, request):
        return self.get_response(request)  # under ASGI a coroutine, which the caller awaits

    def process_exception(self, request, exception):
        what = outage_of(exception)
        if what is None:
            return None
        logger.warning("%s %s answered 503: %s cannot be reached (%s: %s)", request.method, request.path, what,
                       type(exception).__name__, str(exception).strip().splitlines()[0] if str(exception) else "")
        return render_error(request, ServiceUnavailable(what, settings.OUTAGE_RETRY_AFTER_SECONDS))
