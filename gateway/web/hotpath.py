"""The hot routes' way through Django: the same middleware, URLconf, views and error handling,
without the two thread hand-offs Django's ASGI handler makes on every request.

Django's `ASGIHandler.handle` sends `request_started` through `sync_to_async` (a hop, for
receivers the API does not use: `close_old_connections` is disconnected in gateway/asgi.py, and
`reset_queries` only matters with DEBUG) and closes the response through `sync_to_async` (a
second hop, which also ran the usage metering in a thread). Here the request starts without the
signal, and the response's after-send step (the usage metering: gateway/calls/metering.py) runs in the
event loop; an async view's response is closed there too (`request_finished`: its receivers do no
I/O, since an async view's database work goes through worker threads that give their connection
back before they return). Everything else is Django's
own code: body reading, request creation, the disconnect watch, the middleware chain of
MIDDLEWARE, the response encoding.

`application` in gateway/asgi.py sends the paths of `is_hot` (the hot rows of the table of paths,
gateway/web/paths.py) here and every other request to Django's own handler.
"""

from __future__ import annotations

import asyncio
import time
from functools import cached_property

from asgiref.sync import ThreadSensitiveContext, iscoroutinefunction, sync_to_async
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.urls import Resolver404, URLPattern, URLResolver, get_resolver, set_script_prefix
from django.urls.resolvers import RegexPattern

from gateway.telemetry import request_spans, tracing
from gateway.telemetry.logjson import QUIET_PATHS, Exchange, current
from gateway.telemetry.metrics_files import lifespan
from gateway.web.paths import is_hot


async def close_response(request, response) -> None:
    """Run the response's after-send step in the loop, then close it: in the loop too when an async
    view answered. A synchronous view ran in the request's thread and may hold that thread's
    database connection, which only `close` in that thread gives back, as Django's handler does."""
    in_loop = getattr(response, "after_send_in_loop", None)
    if in_loop is not None:
        await in_loop()
    match = getattr(request, "resolver_match", None) if request is not None else None
    if match is not None and iscoroutinefunction(match.func):
        response.close()
    else:
        await sync_to_async(response.close)()


def _hot_patterns(resolver: URLResolver) -> list[URLPattern]:
    """The URLconf's patterns for hot paths, from the root and the includes without a prefix."""
    found = []
    for entry in resolver.url_patterns:
        if isinstance(entry, URLPattern) and is_hot("/" + str(entry.pattern)):
            found.append(entry)
        elif isinstance(entry, URLResolver) and not str(entry.pattern) and not entry.namespace:
            found.extend(_hot_patterns(entry))
    return found


class HotPathHandler(ASGIHandler):
    @cached_property
    def _hot_resolver(self) -> URLResolver:
        return URLResolver(RegexPattern(r"^/"), _hot_patterns(get_resolver()))

    def resolve_request(self, request):
        """The hot routes' own patterns first: Django's resolver would try every route of the
        URLconf before them (7 % of a webhook event's CPU). A path they do not match (a 404, a
        route under /api/v1/hooks/ that is not the hook) goes through the whole URLconf."""
        try:
            match = self._hot_resolver.resolve(request.path_info)
        except Resolver404:
            return super().resolve_request(request)
        request.resolver_match = match
        return match

    async def __call__(self, scope, receive, send):
        async with ThreadSensitiveContext():
            await self.handle(scope, receive, send)

    async def handle(self, scope, receive, send):
        """`ASGIHandler.handle` without `request_started` and with the response closed in the loop."""
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        set_script_prefix(get_script_prefix(scope))
        request, error_response = self.create_request(scope, body_file)
        if request is None:
            body_file.close()
            await self.send_response(error_response, send)
            await close_response(None, error_response)
            return

        async def process_request():
            response = await self.run_get_response(request)
            try:
                await self.send_response(response, send)
            except asyncio.CancelledError:
                pass  # the client went away while the answer was being sent
            else:
                sent_all()
            return response

        tasks = [asyncio.create_task(self.listen_for_disconnect(receive)), asyncio.create_task(process_request())]
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in tasks:
            if task.done():
                # Read, not re-raised: a re-raised exception would hold this frame in its traceback
                # while the task holds the exception, a reference cycle that keeps the whole request
                # alive until the cyclic garbage collector, whose pauses were the p99 at c=16.
                error = None if task.cancelled() else task.exception()
                if isinstance(error, AssertionError):
                    body_file.close()
                    raise error
                if error is not None and not isinstance(error, RequestAborted):
                    raise error
            else:
                task.cancel()  # the client went away: the view may clean up
                try:
                    await task
                except asyncio.CancelledError:
                    pass
        try:
            response = tasks[1].result()
        except asyncio.CancelledError:
            from django.core import signals

            signals.request_finished.send(sender=self.__class__)
        else:
            await close_response(request, response)
        body_file.close()


def sent_all() -> None:
    """The request's last byte has gone out: the calls log's latency ends here, before the after-send
    step (the usage metering) that the request's record also counts."""
    if (exchange := current.get()) is not None:
        exchange.last_byte = time.perf_counter()


def _noting_the_last_byte(send):
    async def noted(message):
        await send(message)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            sent_all()

    return noted


class Application:
    """The project's ASGI application: the hot API routes through `HotPathHandler`, everything
    else (the admin, the other API routes) through Django's own handler. Each HTTP request has
    its record in the context from its arrival to its last byte (gateway/telemetry/logjson.py): counted and
    logged when it ends, even when the client left midway; with traces on, its server span too
    (gateway/telemetry/request_spans.py). Lifespan: gateway/telemetry/metrics_files.py."""

    def __init__(self, django_application) -> None:
        self.django = django_application
        self.hot = HotPathHandler()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                await lifespan(receive, send)
            else:
                await self.django(scope, receive, send)
            return
        exchange = Exchange(scope["method"])
        token = current.set(exchange)
        traced = request_spans.server_span(scope, exchange) if tracing.ENABLED and scope["path"] not in \
            QUIET_PATHS else None  # scrapes and probes are not traced
        try:
            if is_hot(scope["path"]):
                await self.hot(scope, receive, send)  # notes its last byte itself, without a wrapper per message
            else:
                await self.django(scope, receive, _noting_the_last_byte(send))
        except Exception:
            exchange.status = exchange.status or 500
            raise
        finally:
            if traced is not None:
                request_spans.detach(traced)
            current.reset(token)
            exchange.finish()
