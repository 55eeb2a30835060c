"""OpenTelemetry traces (docs/operations.md, "Traces"), set up only when the standard
variables ask for them: `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), with
`OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER` and `_ARG`, `OTEL_PROPAGATORS`,
`OTEL_BSP_*` and the exporter's own `OTEL_EXPORTER_OTLP_*` read by the SDK itself. The export is
OTLP over HTTP with protobuf (`http/protobuf`, the default protocol), in batches from a thread.

Without them nothing is imported from the SDK and nothing is built: `ENABLED` stays False, and the
call's way pays one test of it at each place a span would start (`start` is called by each process
at its start: gateway/ops/web_process.py, gateway/celery.py).

This module holds the tracer and what the other modules share:
- the context carried out of the process: `inject` puts `traceparent` on a request to a model server
  (gateway/upstream/http_client.py) and on a Celery task's headers (gateway/celery.py);
- `log_ids`: the trace and span ids a JSON log line carries.
The server spans of requests are gateway/telemetry/request_spans.py's; the spans of model calls
gateway/telemetry/genai.py's.
"""

from __future__ import annotations

import atexit
import logging
import os
from typing import Any

logger = logging.getLogger(__name__)

ENABLED = False  # read on the call's way: set once, by `start`
tracer: Any = None
_provider: Any = None
DEFAULT_SERVICE_NAME = "model-gateway"
PROTOCOL = "http/protobuf"
_at_exit: list = []


def wanted(environ=os.environ) -> bool:
    """Whether the standard variables ask for traces exported by OTLP."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporters = {e.strip().lower() for e in environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",") if e.strip()}
    if exporters and "otlp" not in exporters:  # "none", or only exporters this build does not ship
        return False
    return bool(environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))


def protocol_problem(environ=os.environ) -> str | None:
    """Why the configured protocol cannot be used (only OTLP over HTTP with protobuf is shipped)."""
    protocol = (environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
                or PROTOCOL).strip().lower()
    if protocol != PROTOCOL:
        return f"OTEL_EXPORTER_OTLP_PROTOCOL is {protocol!r}: only {PROTOCOL!r} is supported; no traces are exported"
    return None


def start(processor: Any = None) -> bool:
    """Set up tracing in this process if the variables ask for it (once; True when on). A test may
    give its own span processor instead of the OTLP exporter's batches."""
    global ENABLED, tracer, _provider
    if ENABLED:
        return True
    if processor is None:
        if not wanted():
            return False
        if problem := protocol_problem():
            logger.warning(problem)
            return False
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        processor = BatchSpanProcessor(OTLPSpanExporter())
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider

    resource = Resource.create()  # OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE_NAME}))
    _provider = TracerProvider(resource=resource)  # its sampler from OTEL_TRACES_SAMPLER
    _provider.add_span_processor(processor)
    tracer = _provider.get_tracer("gateway")
    ENABLED = True
    if not _at_exit:
        _at_exit.append(atexit.register(stop))  # what is still batched is exported at exit
    return True


def stop() -> None:
    """Export what is left and turn tracing off (at exit; a test's end)."""
    global ENABLED, tracer, _provider
    provider, ENABLED, tracer, _provider = _provider, False, None, None
    if provider is not None:
        provider.shutdown()


def flush(timeout_millis: int = 5000) -> bool:
    return _provider.force_flush(timeout_millis) if _provider is not None else True


def event(name: str, attributes: dict[str, Any] | None = None) -> None:
    """An event on the span in the context (the request's, a task's), if any."""
    from opentelemetry import trace

    trace.get_current_span().add_event(name, attributes or {})


def annotate(attributes: dict[str, Any]) -> None:
    """Attributes on the span in the context (a task's: which run, which delivery), if any."""
    from opentelemetry import trace

    trace.get_current_span().set_attributes(attributes)


# --- Carried out of the process ---------------------------------------------------------------

def inject(headers: dict) -> None:
    """`traceparent` (and `tracestate`) of the span in the context, into `headers`."""
    from opentelemetry import propagate

    propagate.inject(headers)


def carrier() -> dict[str, str]:
    """The context's trace headers, to hand to work that runs later (a batch's runs); empty when off."""
    headers: dict[str, str] = {}
    if ENABLED:
        inject(headers)
    return headers


def log_ids() -> tuple[str, str] | None:
    """The trace and span ids (hex) of the span in the context, for a log line; None outside one."""
    from opentelemetry import trace

    return span_ids(trace.get_current_span())


def span_ids(span) -> tuple[str, str] | None:
    span_context = span.get_span_context()
    if not span_context.is_valid:
        return None
    return format(span_context.trace_id, "032x"), format(span_context.span_id, "016x")
