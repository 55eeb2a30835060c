"""The server span of each HTTP request (HTTP semantic conventions): started at the
request's arrival by the project's ASGI application (gateway/web/hotpath.py), the child of a client's
`traceparent` when it sent one, and the context of everything the request runs; ended when its last
byte has gone (or the client left), with route, status and request id (`request_ended`, a step of
gateway/telemetry/logjson.py's `ended`, registered by `start` only when traces are on).
"""

from __future__ import annotations

import logging

from gateway.telemetry import genai, logjson, tracing

logger = logging.getLogger(__name__)
TRACE_HEADERS = (b"traceparent", b"tracestate")


def start(processor=None) -> bool:
    """Traces on in this web process if the variables ask for them (gateway/telemetry/tracing.py)."""
    if not tracing.start(processor):
        return False
    if request_ended not in logjson.ended:
        logjson.ended.insert(0, request_ended)  # before the calls log: the request's spans end first
    return True


def stop() -> None:
    if request_ended in logjson.ended:
        logjson.ended.remove(request_ended)
    tracing.stop()


def server_span(scope: dict, exchange) -> object:
    """Start the request's server span (its parent the client's `traceparent`, if it sent one), put it
    in the context, and return the token to detach it with."""
    from opentelemetry import context, propagate, trace

    carrier = {name.decode(): value.decode("latin-1") for name, value in scope.get("headers", ())
               if name in TRACE_HEADERS}
    parent = propagate.extract(carrier) if carrier else None
    method = scope.get("method", "")
    span = tracing.tracer.start_span(method, context=parent, kind=trace.SpanKind.SERVER, attributes={
        "http.request.method": method,
        "url.scheme": scope.get("scheme", "http"),
        "url.path": _path(scope.get("path", "")),
        "network.protocol.version": scope.get("http_version", "1.1"),
    })
    exchange.span = span
    return context.attach(trace.set_span_in_context(span, parent))


def _path(path: str) -> str:
    """The path without a webhook's token (a secret: spec 4.5) or another credential-shaped part."""
    from gateway.telemetry.logfilters import redact

    return redact(path)


def detach(token: object) -> None:
    from opentelemetry import context

    context.detach(token)


def request_ended(exchange, seconds: float, status: int) -> None:
    """The server span's end, when the request's last byte has gone (or the client left): route,
    status, request id; the model calls' spans still open end first (gateway/telemetry/genai.py)."""
    span = exchange.span
    if span is None:
        return
    try:
        genai.request_ended(exchange)
        route = "/" + exchange.route if exchange.route is not None else None
        if route is not None:
            span.update_name(f"{exchange.method} {route}")
            span.set_attribute("http.route", route)
        span.set_attribute("http.response.status_code", status)
        if exchange.request_id:
            span.set_attribute("gateway.request_id", exchange.request_id)
        if exchange.account_id is not None:
            span.set_attribute("gateway.account_id", exchange.account_id)
        code = exchange.call.error_code if exchange.call is not None else None
        if code:
            span.set_attribute("gateway.error.code", code)
        if status >= 500:
            from opentelemetry.trace import Status, StatusCode

            span.set_attribute("error.type", str(status))
            span.set_status(Status(StatusCode.ERROR))
        span.end()
    except Exception:  # a request's end is never failed by its trace
        logger.exception("the request's span could not be ended")
