import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway.settings")
# Collection search is one matrix-vector product per query: BLAS threads only contend with the
# other requests of the process (bench/README.md: 25 ms single-threaded against 34 ms at 100k chunks).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from gateway.hotpath import Application  # noqa: E402 — after the settings module is named

application = Application(get_asgi_application())


def _drop_start_of_request_connection_check() -> None:
    """Django closes stale connections when a request starts and when it ends. Under ASGI each
    request's synchronous work runs in a thread of its own, fresh at the start, so the first
    check finds nothing to close and only costs a thread hand-off per request. The check at
    the end stays: it gives back (to the pool) what the request's synchronous work opened."""
    from django.core import signals
    from django.db import close_old_connections

    signals.request_started.disconnect(close_old_connections)


_drop_start_of_request_connection_check()

from gateway.logfilters import install as _redact_secret_paths_in_access_logs  # noqa: E402

_redact_secret_paths_in_access_logs()

from gateway import logjson, metrics  # noqa: E402

logjson.install()  # no access-log line for a scrape of /metrics
metrics.process_started("web")  # until gunicorn's master (or the lifespan's end) marks it dead


def _start_usage_drainer() -> None:
    """Write what dead processes left in the usage spool as soon as this process starts, not on
    its first metered call (gateway/usage_writer.py)."""
    from django.conf import settings

    from gateway.usage_writer import usage_writer

    if settings.USAGE_BATCHED:
        usage_writer.start()


_start_usage_drainer()


def _tune_garbage_collector() -> None:
    """p99 under load was ten times p50 because of the cyclic garbage collector: with Python's
    default thresholds (700, 10, 10) a busy process ran a full collection every few hundred
    requests, each walking every object of Django and the app (bench/README.md). What is loaded at
    start is frozen (never walked again), and the young generation is collected less often."""
    import gc

    from django.conf import settings

    if settings.GC_THRESHOLDS:
        gc.collect()
        gc.freeze()
        gc.set_threshold(*settings.GC_THRESHOLDS)


_tune_garbage_collector()
