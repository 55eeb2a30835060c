"""The Celery app. Periodic tasks are declared here, in one place."""

import os

from celery import Celery, signals
from celery.schedules import crontab
from django.conf import settings

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway.settings")

app = Celery("gateway")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

app.conf.beat_schedule = {
    "purge-expired-sessions": {"task": "accounts.tasks.purge_expired_sessions", "schedule": crontab(minute=17)},
    # Answers kept for an Idempotency-Key past IDEMPOTENCY_TTL_SECONDS (accounts/idempotency.py); hourly.
    "sweep-idempotent-requests": {"task": "accounts.tasks.sweep_idempotent_requests", "schedule": crontab(minute=43)},
    # Routine runs left queued, or lost with a dead worker before their answer, are enqueued again,
    # and so are the deliveries of answered runs whose task was lost (routines/runs.py).
    "sweep-routine-runs": {"task": "routines.tasks.sweep_routine_runs", "schedule": settings.ROUTINE_SWEEP_SECONDS},
    # Schedule routines that are due get one queued run each (routines/schedules.py); every minute.
    "run-due-schedules": {"task": "routines.tasks.run_due_schedules", "schedule": crontab()},  # each minute, at :00
    # The calls log's rows past CALL_LOG_RETENTION_DAYS, and kept text past CALL_CAPTURE_RETENTION_DAYS; hourly.
    "sweep-call-log": {"task": "gateway.sweep_call_log", "schedule": crontab(minute=29)},
    # Files past their `expires_at` (an upload's `expires_after`, a batch's output after FILES_OUTPUT_EXPIRE_SECONDS),
    # rows and bytes, 500 at a time (gateway/files/store.py); hourly. An expired file is not found before then.
    "sweep-expired-files": {"task": "gateway.sweep_expired_files", "schedule": crontab(minute=53)},
    # Batches no worker holds (their worker died, their message was lost) are queued to run again, and the
    # batch queue's depth is put in the metrics (batches/tasks.py).
    "sweep-batches": {"task": "batches.tasks.sweep_batches", "schedule": settings.BATCH_SWEEP_SECONDS,
                      "options": {"queue": "batches"}},
}


@app.task(name="gateway.sweep_call_log")
def sweep_call_log() -> int:
    """Thin: the sweep is gateway/usage/call_records.py's (the gateway has no tasks module of its own)."""
    from gateway.usage.call_records import call_log_sweep

    return call_log_sweep()


@app.task(name="gateway.sweep_expired_files")
def sweep_expired_files() -> int:
    """Thin: the sweep is gateway/files/store.py's, which removes a file's bytes with its row."""
    from gateway.files.store import sweep_expired

    return sweep_expired()


@signals.worker_process_init.connect
def _start_usage_drainer(**_kwargs) -> None:
    """Each pool process writes its usage spool, and what dead processes left, from its start."""
    from gateway.usage.writer import usage_writer

    usage_writer.start()


def _forks(worker) -> bool:
    return getattr(getattr(worker, "pool_cls", None), "__module__", "").endswith("prefork")


@signals.worker_init.connect
def _start_in_the_worker_itself(sender=None, **_kwargs) -> None:
    """A worker whose tasks run in its own process (the batch queue's, `--pool threads`) starts there what a
    forking pool's processes start each: the usage drainer, traces, its count in the metrics."""
    if sender is None or _forks(sender):
        return
    _start_usage_drainer()
    _start_tracing()
    _count_pool_process()


# --- Metrics and logs (docs/operations.md) ----------------------------------------------------
# A task queued while a request was served carries the request's id in this message header; its
# log lines carry it too (gateway/telemetry/logjson.py), and so do the tasks it queues in turn.
REQUEST_ID_HEADER = "gateway_request_id"


# With traces on, its trace context too: `traceparent` (W3C), so the task's span continues the trace
# of what queued it (gateway/telemetry/task_spans.py).


def request_id_headers(request_id: str | None, trace: dict[str, str] | None = None) -> dict[str, str | None]:
    """The headers of a task queued for `request_id` (None: for no request, whatever is being
    served when it is queued), and `trace`, the trace context it continues (None: the one of
    whatever is being served or run when it is queued)."""
    return {REQUEST_ID_HEADER: request_id, **(trace or {})}


def origin() -> tuple[str | None, dict[str, str]]:
    """What a task queued later for the request being served carries: its id and trace context."""
    from gateway.telemetry import tracing
    from gateway.telemetry.logjson import current_request_id

    return current_request_id(), tracing.carrier()


@signals.before_task_publish.connect
def _stamp_request_id(headers=None, **_kwargs) -> None:
    from gateway.telemetry import tracing
    from gateway.telemetry.logjson import current_request_id

    if headers is not None and REQUEST_ID_HEADER not in headers:
        headers[REQUEST_ID_HEADER] = current_request_id()
    if tracing.ENABLED and headers is not None and "traceparent" not in headers:
        tracing.inject(headers)


def _header(request, name: str):
    return getattr(request, name, None) or (getattr(request, "headers", None) or {}).get(name)


@signals.task_prerun.connect
def _enter_request_context(task=None, **_kwargs) -> None:
    from gateway.telemetry import task_spans, tracing
    from gateway.telemetry.logjson import Exchange, current

    request = getattr(task, "request", None)
    request_id = _header(request, REQUEST_ID_HEADER)
    current.set(Exchange(request_id=request_id) if request_id else None)
    if tracing.ENABLED:
        task_spans.started(task, {name: value for name in ("traceparent", "tracestate")
                                  if isinstance(value := _header(request, name), str)})


@signals.task_postrun.connect
def _leave_request_context(state=None, **_kwargs) -> None:
    from gateway.telemetry import task_spans, tracing
    from gateway.telemetry.logjson import current

    current.set(None)
    if tracing.ENABLED:
        task_spans.ended(state)


@signals.task_failure.connect
def _task_failed(exception=None, **_kwargs) -> None:
    from gateway.telemetry import task_spans, tracing

    if tracing.ENABLED and exception is not None:
        task_spans.failed(exception)


@signals.task_retry.connect
def _task_retried(reason=None, **_kwargs) -> None:
    from gateway.telemetry import task_spans, tracing

    if tracing.ENABLED:
        task_spans.retried(reason)


@signals.worker_process_init.connect
def _start_tracing(**_kwargs) -> None:
    """Traces, in each pool process (after the fork: the exporter's thread does not survive one),
    only when the OTEL_* variables ask for them (gateway/telemetry/tracing.py)."""
    from gateway.telemetry import tracing

    tracing.start()


def _logging_from_settings(**_kwargs) -> None:
    """With JSON logs, the worker logs as the web processes do (settings.LOGGING: the request id
    on each line, secrets redacted) instead of in Celery's own format."""
    import logging.config

    logging.config.dictConfig(settings.LOGGING)


if settings.LOG_FORMAT == "json":
    signals.setup_logging.connect(_logging_from_settings, weak=False)


@signals.worker_init.connect
def _prune_metrics_files(**_kwargs) -> None:
    """In the main process, before the pool forks: the files of processes gone since the last
    run (gateway/telemetry/metrics_files.py)."""
    from gateway.telemetry.metrics_files import prune

    prune()


@signals.worker_process_init.connect
def _count_pool_process(**_kwargs) -> None:
    from gateway.telemetry import metrics

    metrics.process_started("worker")


@signals.worker_process_shutdown.connect
@signals.worker_shutdown.connect
def _mark_metrics_dead(**_kwargs) -> None:
    from gateway.telemetry.metrics_files import mark_dead

    mark_dead(os.getpid())
