"""What a web process does once, when gateway/asgi.py has built the application: each step a
function of its own, called in order by `start`."""

from __future__ import annotations

import gc

from django.conf import settings
from django.core import signals
from django.db import close_old_connections

from gateway.telemetry import logfilters, logjson, metrics, request_spans
from gateway.usage.writer import usage_writer


def start() -> None:
    drop_start_of_request_connection_check()
    logfilters.install()  # a routine's webhook token is never written in an access log line
    logjson.install()  # no access-log line for a scrape of /metrics
    metrics.process_started("web")  # until gunicorn's master (or the lifespan's end) marks it dead
    start_usage_drainer()
    request_spans.start()  # traces, only when the OTEL_* variables ask for them (gateway/telemetry/tracing.py)
    tune_garbage_collector()  # last: what is loaded by now is frozen


def drop_start_of_request_connection_check() -> None:
    """Django closes stale connections when a request starts and when it ends. Under ASGI each
    request's synchronous work runs in a thread of its own, fresh at the start, so the first
    check finds nothing to close and only costs a thread hand-off per request. The check at
    the end stays: it gives back (to the pool) what the request's synchronous work opened."""
    signals.request_started.disconnect(close_old_connections)


def start_usage_drainer() -> None:
    """Write what dead processes left in the usage spool as soon as this process starts, not on
    its first metered call (gateway/usage/writer.py)."""
    usage_writer.start()


def tune_garbage_collector() -> None:
    """p99 under load was ten times p50 because of the cyclic garbage collector: with Python's
    default thresholds (700, 10, 10) a busy process ran a full collection every few hundred
    requests, each walking every object of Django and the app (bench/README.md). What is loaded at
    start is frozen (never walked again), and the young generation is collected less often."""
    if settings.GC_THRESHOLDS:
        gc.collect()
        gc.freeze()
        gc.set_threshold(*settings.GC_THRESHOLDS)
