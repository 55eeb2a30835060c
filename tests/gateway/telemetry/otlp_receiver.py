"""An OTLP/HTTP trace receiver on loopback, as a collector would be: `POST /v1/traces` with an
`ExportTraceServiceRequest` in protobuf (gzip or not), decoded into plain `Span`s the tests read."""

from __future__ import annotations

import contextlib
import gzip
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

KINDS = {0: "UNSPECIFIED", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}
STATUSES = {0: "UNSET", 1: "OK", 2: "ERROR"}


@dataclass
class Span:
    name: str
    trace_id: str
    span_id: str
    parent_id: str  # "" for a root
    kind: str
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    status: str
    status_message: str
    resource: dict[str, Any]
    start: int
    end: int

    def event(self, name: str) -> dict[str, Any] | None:
        return next((attributes for found, attributes in self.events if found == name), None)


def _value(any_value) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in any_value.kvlist_value.values}
    return getattr(any_value, kind) if kind else None


def _attributes(pairs) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in pairs}


def decode(body: bytes) -> list[Span]:
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    spans = []
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for s in scope_spans.spans:
                spans.append(Span(
                    name=s.name, trace_id=s.trace_id.hex(), span_id=s.span_id.hex(), parent_id=s.parent_span_id.hex(),
                    kind=KINDS[s.kind], attributes=_attributes(s.attributes),
                    events=[(e.name, _attributes(e.attributes)) for e in s.events],
                    status=STATUSES[s.status.code], status_message=s.status.message, resource=resource,
                    start=s.start_time_unix_nano, end=s.end_time_unix_nano))
    return spans


@dataclass
class Receiver:
    url: str
    spans: list[Span] = field(default_factory=list)
    posts: int = 0
    lock: threading.Condition = field(default_factory=threading.Condition)  # notified at each export

    def clear(self) -> None:
        with self.lock:
            self.spans.clear()
            self.posts = 0

    def wait_for(self, check, timeout: float = 15.0, what: str = "the spans") -> list[Span]:
        """The spans received once `check(spans)` holds (a deadline, never a fixed sleep)."""
        deadline = time.monotonic() + timeout
        with self.lock:
            while not check(spans := list(self.spans)):
                if time.monotonic() > deadline:
                    names = [(s.name, s.trace_id[:8]) for s in spans]
                    raise AssertionError(f"timed out waiting for {what}; received {names}")
                self.lock.wait(max(deadline - time.monotonic(), 0.001))  # woken by the next export
            return spans

    def trace(self, trace_id: str) -> list[Span]:
        with self.lock:
            return [s for s in self.spans if s.trace_id == trace_id]


@contextlib.contextmanager
def otlp_receiver():
    received: Receiver

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 — the standard library's name
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path != "/v1/traces" or self.headers.get("Content-Type") != "application/x-protobuf":
                self.send_response(404)
                self.end_headers()
                return
            spans = decode(body)
            with received.lock:
                received.spans.extend(spans)
                received.posts += 1
                received.lock.notify_all()
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *_args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    received = Receiver(url=f"http://127.0.0.1:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield received
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def otel_env(receiver: Receiver, **extra: str) -> dict[str, str]:
    """The standard variables of a process that exports its traces to `receiver`, quickly."""
    return {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_SERVICE_NAME": "gateway-under-test",
            "OTEL_BSP_SCHEDULE_DELAY": "50", **extra}
