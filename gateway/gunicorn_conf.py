"""gunicorn's settings for the Procfile's `web` (`gunicorn -c python:gateway.gunicorn_conf`).

- The metrics folder (gateway/telemetry/metrics_files.py): the files of processes gone since the last run
  are removed when the master starts, and a worker's live gauges when it exits, however it died
  (the master sees every exit; a worker killed by the OS cannot clean up after itself).
- The host's drainer (gateway/usage/host_drain.py): gunicorn's dirty arbiter runs one dirty worker,
  `SpoolDrainer`, which writes the usage and calls spools the web workers let go, so that their event
  loops never hold the GIL for it; gunicorn restarts it when it dies and stops it with the workers. The
  master's process name takes its pid: gunicorn kills the dirty arbiter named in a pid file of that name
  under /tmp as an orphan of an earlier run, which would be another gunicorn's on the same host.
- Logs: with LOG_FORMAT=json, gunicorn's own lines are JSON too, and its access log is off (the
  gateway writes one JSON line per request, with its request id: gateway/telemetry/logjson.py); with text
  logs, the access log goes to stdout as before.

Reading the settings here makes the master import gateway/settings.py (no app, no database); when it
starts, it makes the metrics folder and puts PROMETHEUS_MULTIPROC_DIR in the environment every worker
inherits (each worker also does, when Django is set up: gateway/ops/process_start.py).
"""

import logging
import os
import signal
import sys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway.settings")

from django.conf import settings  # noqa: E402

from gateway.ops import process_start
from gateway.telemetry import metrics_files

if settings.LOG_FORMAT == "json":
    accesslog = None
    logconfig_dict = {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": "gateway.telemetry.logjson.JsonFormatter"}},
        "filters": {"redact_secrets": {"()": "gateway.telemetry.logfilters.RedactSecrets"}},
        "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "json", "filters": ["redact_secrets"],
                                 "stream": "ext://sys.stderr"}},
        "loggers": {"gunicorn.error": {"handlers": ["console"], "level": "INFO", "propagate": False},
                    "gunicorn.access": {"handlers": [], "level": "INFO", "propagate": False}},
        "root": {"handlers": ["console"], "level": "INFO"},
    }
else:
    accesslog = "-"


dirty_apps = ["gateway.gunicorn_conf:SpoolDrainer:1"]
dirty_workers = 1


def on_starting(server) -> None:
    server.proc_name = f"{server.proc_name}.{os.getpid()}"
    process_start.open_metrics_folder()
    removed = metrics_files.prune()
    if removed:
        server.log.info("metrics: %d files of processes gone since the last run removed", removed)


def child_exit(server, worker) -> None:
    metrics_files.mark_dead(worker.pid)


def post_worker_init(worker) -> None:
    """uvicorn raises again the SIGTERM or SIGINT it stopped on, once it has shut down, and gunicorn's
    uvicorn worker leaves both at the system's default: the worker died of it, without its exit handlers,
    so what its buffers held was written by no one (gateway/state/write_behind.py: the calls and usage
    of its last half second stayed in the spool until the next start). The signal raised again now ends
    the worker by SystemExit, and the handlers run."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _exit_now)


def _exit_now(signum, frame) -> None:
    sys.exit(0)


def dirty_worker_exit(arbiter, worker) -> None:
    metrics_files.mark_dead(worker.pid)


class SpoolDrainer:
    """The host's drainer as a gunicorn dirty app: Django set up in the dirty worker, and the usage
    writer's thread made the host's drainer; at the worker's stop, one last write of every file left.
    Its one thread needs one PostgreSQL connection: its pool keeps DRAINER_POOL, not a web worker's."""

    workers = 1

    def init(self) -> None:
        import django

        pool = settings.DATABASES["default"].get("OPTIONS", {}).get("pool")
        if isinstance(pool, dict):  # PostgreSQL: read when the first connection is made, after this
            pool.update(DRAINER_POOL)
        django.setup()
        from gateway.usage.writer import usage_writer

        usage_writer.drain_host()

    def __call__(self, action: str, *args, **kwargs):
        raise ValueError(f"the spool drainer takes no requests ({action!r} asked)")

    def close(self) -> None:
        from gateway.usage.writer import usage_writer

        usage_writer.stop()
        if not usage_writer.flush(timeout=STOP_FLUSH_SECONDS):
            logging.getLogger(__name__).error("spool drainer: files left in the spools at its stop, for the next start")


STOP_FLUSH_SECONDS = 20.0  # within gunicorn's dirty_graceful_timeout (30 s)
DRAINER_POOL = {"min_size": 1, "max_size": 2}
