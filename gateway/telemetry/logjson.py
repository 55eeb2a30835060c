"""What a request leaves behind: its metrics, its log line, and its request id on every log line
written on its behalf (LOG_FORMAT=json: one JSON object per line; docs/operations.md).

An `Exchange` is one request's record. The project's ASGI application (gateway/web/hotpath.py) starts
one when a request arrives and puts it in the context (`current`), so that everything the request
runs sees it: its task, the threads it hops to, the metering after its answer was sent. The
request-id middleware fills in the request id, route, status and caller; metering fills in the
model and tokens (gateway/calls/metering.py). `finish`, when the last byte has gone out (or the client
left), counts the request (gateway/telemetry/metrics.py), hands the record to the steps of `ended` (the
calls log, whose facts of a model call, `call`, were noted on the way: gateway/telemetry/call_facts.py)
and writes its line on the `gateway.requests` logger, formatted only when that logger is on (JSON
logs). The record holds plain values only, so it makes no reference cycle with the request.

A Celery task queued by a request carries the request id in its headers (gateway/celery.py), and
its log lines carry it too (`current` holds an `Exchange` with that id while it runs).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable
from contextvars import ContextVar
from datetime import datetime, timezone

from gateway.telemetry import metrics, tracing
from gateway.telemetry.redact import configured_secrets, redact
from gateway.telemetry.tracing import span_ids

current: ContextVar[Exchange | None] = ContextVar("gateway_exchange", default=None)
request_log = logging.getLogger("gateway.requests")
CLIENT_CLOSED = 499  # the client went away before the answer began (nginx's convention)
METRICS_ROUTE = "metrics"  # scrapes are logged at DEBUG, not at INFO
QUIET_ROUTES = frozenset({METRICS_ROUTE, "livez", "readyz"})  # and so are probes (gateway/ops/health.py)
_OWN_REQUEST_ID = re.compile(r"[0-9a-f]{32}")  # one the gateway made (uuid4().hex)


class Exchange:
    __slots__ = ("request_id", "started", "method", "route", "status", "account_id", "model", "input_tokens",
                 "output_tokens", "group_id", "cost_units", "cached", "prompt", "call", "last_byte", "span", "answers",
                 "batch")

    def __init__(self, method: str = "", request_id: str | None = None) -> None:
        self.started = time.perf_counter()
        self.method = method
        self.request_id = request_id
        self.route = None
        self.status = 0
        self.account_id = self.group_id = None
        self.model = None
        self.input_tokens = self.output_tokens = None
        self.cost_units = 0
        self.cached = False
        self.prompt = None  # the request's body, when the caller's group keeps its calls' text (the calls log)
        self.call = None  # what the calls log keeps of a model call (gateway/telemetry/call_facts.py)
        self.last_byte = None  # time.perf_counter() when the answer's last byte went out (gateway/web/hotpath.py)
        self.span = None  # the request's server span, when traces are on (gateway/telemetry/tracing.py)
        self.answers = None  # its answering models' spans, ended with it (gateway/telemetry/genai.py)
        self.batch = None  # a batch line's call: gateway/calls/metering.py `BatchUse`

    def answered(self, request, status: int) -> None:
        """What the middleware knows once the view answered (or the client left meanwhile)."""
        self.status = status
        match = getattr(request, "resolver_match", None)
        if match is not None:
            self.route = match.route
        principal = getattr(request, "principal", None)
        if principal is not None:
            account = principal.account
            self.account_id = account.pk
            self.group_id = account.group_id
            if getattr(account.group, "capture_calls", False):
                self.prompt = _body_of(request)

    def metered(self, model: str, input_tokens: int, output_tokens: int, cost_units: int = 0,
                cached: bool = False) -> None:
        """A call's usage (an agent turn meters several rounds: they add up)."""
        self.model = model
        self.input_tokens = (self.input_tokens or 0) + input_tokens
        self.output_tokens = (self.output_tokens or 0) + output_tokens
        self.cost_units += cost_units
        self.cached = self.cached or cached

    def finish(self) -> None:
        seconds = time.perf_counter() - self.started
        status = self.status or CLIENT_CLOSED
        metrics.request_done(self.route, self.method, status, seconds)
        for step in ended:  # the calls log (gateway/usage/call_log.py, wired by gateway/apps.py); never raises
            step(self, seconds, status)
        level = logging.DEBUG if self.route in QUIET_ROUTES else logging.INFO
        if request_log.isEnabledFor(level):
            self._log(level, status, seconds)

    def _log(self, level: int, status: int, seconds: float) -> None:
        """The request's line, cleaned here rather than by RedactSecrets (whose dozen patterns
        per field cost 60 µs a line): route, method, model and numbers come from the URLconf and
        the registry; only a request id the client chose can hold what looks like a credential."""
        request_id, redacted = self.request_id, True
        if request_id is not None and not _OWN_REQUEST_ID.fullmatch(request_id):
            try:
                request_id = redact(request_id, configured_secrets(), loose=False)
            except Exception:  # the secrets are unknown: RedactSecrets tries, and withholds the line if it fails too
                redacted = False
        method = self.method if self.method in metrics.METHODS else "other"
        route = self.route or metrics.UNMATCHED
        fields = {"request_id": request_id, "account_id": self.account_id, "route": route, "method": method,
                  "status": status, "duration_ms": round(seconds * 1000, 2)}
        if self.model is not None:
            fields.update(model=self.model, input_tokens=self.input_tokens, output_tokens=self.output_tokens)
        extra = {"fields": fields, "request_id": request_id, "redacted": redacted}
        if self.span is not None:  # written after the span left the context: its ids given here
            extra["trace_id"], extra["span_id"] = span_ids(self.span) or (None, None)
        request_log.log(level, "%s %s %s", method, route, status, extra=extra)


def _body_of(request) -> bytes:
    """The request's body as it came; a multipart upload (audio), whose parts were read as files, is named."""
    try:
        return request.body
    except Exception:  # RawPostDataException: the body was read as the form's parts
        return f"({request.content_type or 'a body'} of {request.META.get('CONTENT_LENGTH') or '?'} bytes)".encode()


# What runs when a request ends, after its metrics (each takes the record, its seconds and its status).
ended: list[Callable[[Exchange, float, int], None]] = []


def current_request_id() -> str | None:
    exchange = current.get()
    return exchange.request_id if exchange is not None else None


class RequestContext(logging.Filter):
    """Puts the request id of the request being served (or that queued the task being run) on
    every record a handler writes; with traces on, the trace and span ids of the span it is
    written in (gateway/telemetry/tracing.py)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            exchange = current.get()
            record.request_id = exchange.request_id if exchange is not None else None
        if tracing.ENABLED and getattr(record, "trace_id", None) is None:
            record.trace_id, record.span_id = tracing.log_ids() or (None, None)
        return True


# LogRecord's own attributes: anything else on a record came in `extra`.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message", "asctime", "request_id", "fields", "redacted", "trace_id", "span_id"}


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, request_id when
    there is one, the fields the line was written with (`extra={"fields": {...}}`, which
    RedactSecrets cleans; of any other `extra` name only numbers: Django's request logger puts
    the request there, whose path may hold a webhook's token), and the exception as text."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = getattr(record, "request_id", None)
        if request_id:
            entry["request_id"] = request_id
        trace_id = getattr(record, "trace_id", None)
        if trace_id:
            entry["trace_id"], entry["span_id"] = trace_id, getattr(record, "span_id", None)
        for name, value in record.__dict__.items():  # numbers given in `extra` (text is redacted only in `fields`)
            if name not in _STANDARD and name not in entry and isinstance(value, (int, float)):
                entry[name] = value
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            for name, value in fields.items():
                entry.setdefault(name, value)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


QUIET_PATHS = frozenset({"/metrics", "/livez", "/readyz"})


class QuietScrapes(logging.Filter):
    """Drops the server's access-log lines of scrapes and probes (GET /metrics, /livez, /readyz:
    one every few seconds is not worth a line at INFO)."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3:  # uvicorn: client, method, path, version, status
            path = args[2]
        elif isinstance(args, dict):  # gunicorn's access log
            path = args.get("U")
        else:
            return True
        return not (isinstance(path, str) and path.partition("?")[0] in QUIET_PATHS)


def install() -> None:
    """`QuietScrapes` on the loggers the servers write access lines to."""
    from gateway.telemetry.logfilters import ACCESS_LOGGERS

    for name in ACCESS_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, QuietScrapes) for f in logger.filters):
            logger.addFilter(QuietScrapes())
