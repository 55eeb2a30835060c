"""The span of each Celery task run: a CONSUMER span named by the task, the child of the
trace context its message carried (`traceparent` in the task's headers, stamped when it was queued:
gateway/celery.py), else the root of a trace that starts at the worker (a schedule's tick, the
sweep). It is the context of what the task does: a routine run's model call (gateway/telemetry/genai.py),
the tasks it queues (its deliveries), its log lines. Called from Celery's signals only when traces
are on. A task run inline (eager tasks, a test's) nests: its span is the child of the one around it.
"""

from __future__ import annotations

from typing import Any

from gateway.telemetry import tracing

_running: list[tuple[Any, object]] = []  # (span, context token), innermost last


def started(task, carrier: dict[str, str]) -> None:
    from opentelemetry import context, propagate, trace

    parent = propagate.extract(carrier) if carrier else None
    request = getattr(task, "request", None)
    attributes = {"messaging.system": "celery", "messaging.operation.type": "process",
                  "messaging.message.id": str(getattr(request, "id", "") or ""),
                  "gateway.task.name": task.name, "gateway.task.retries": int(getattr(request, "retries", 0) or 0)}
    span = tracing.tracer.start_span(task.name, context=parent, kind=trace.SpanKind.CONSUMER, attributes=attributes)
    _running.append((span, context.attach(trace.set_span_in_context(span, parent))))


def failed(exception: BaseException) -> None:
    if _running:
        from opentelemetry.trace import Status, StatusCode

        span = _running[-1][0]
        span.record_exception(exception)
        span.set_attribute("error.type", type(exception).__qualname__)
        span.set_status(Status(StatusCode.ERROR, str(exception)[:500]))


def retried(reason: Any) -> None:
    if _running:
        _running[-1][0].add_event("gateway.task_retry", {"gateway.reason": str(reason)[:500]})


def ended(state: str | None) -> None:
    if not _running:
        return
    from opentelemetry import context

    span, token = _running.pop()
    if state:
        span.set_attribute("gateway.task.state", state)
    try:
        context.detach(token)
    finally:
        span.end()
