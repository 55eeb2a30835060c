"""gunicorn's settings for the Procfile's `web` (`gunicorn -c python:gateway.gunicorn_conf`).

- The metrics folder (gateway/telemetry/metrics_files.py): the files of processes gone since the last run
  are removed when the master starts, and a worker's live gauges when it exits, however it died
  (the master sees every exit; a worker killed by the OS cannot clean up after itself).
- Logs: with LOG_FORMAT=json, gunicorn's own lines are JSON too, and its access log is off (the
  gateway writes one JSON line per request, with its request id: gateway/telemetry/logjson.py); with text
  logs, the access log goes to stdout as before.

Reading the settings here makes the master import gateway/settings.py (no app, no database); when it
starts, it makes the metrics folder and puts PROMETHEUS_MULTIPROC_DIR in the environment every worker
inherits (each worker also does, when Django is set up: gateway/ops/process_start.py).
"""

import os

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


def on_starting(server) -> None:
    process_start.open_metrics_folder()
    removed = metrics_files.prune()
    if removed:
        server.log.info("metrics: %d files of processes gone since the last run removed", removed)


def child_exit(server, worker) -> None:
    metrics_files.mark_dead(worker.pid)
