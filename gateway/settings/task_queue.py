"""Settings of Celery (gateway/celery.py reads every CELERY_ setting): the broker, Redis or the file broker of
the embedded default, and how the workers ride out its outages.

Part of gateway/settings/__init__.py, which puts what `from_env` returns beside its own.
"""

from __future__ import annotations

from pathlib import Path

from gateway.settings.environment import Environment, reader


def from_env(env: Environment = None, *, var_dir: Path, redis: dict) -> dict:
    """`redis`: the settings of gateway/settings/redis.py, whose broker URL is the default."""
    env = reader(env)
    broker_url = env.str("CELERY_BROKER_URL", default=redis["REDIS_BROKER_URL"] or "filesystem://")
    if broker_url.startswith("filesystem://"):
        # gateway/ops/process_start.py makes these folders when a process starts (kombu does not)
        transport_options = {
            "data_folder_in": str(var_dir / "broker"),
            "data_folder_out": str(var_dir / "broker"),
            "processed_folder": str(var_dir / "broker-processed"),
            "control_folder": str(var_dir / "broker-control"),  # else ./control, in the working folder
            "store_processed": False,
        }
    else:
        transport_options = redis["REDIS_BROKER_TRANSPORT_OPTIONS"] if broker_url.startswith("sentinel://") else {}
    return {
        "CELERY_BROKER_URL": broker_url,
        "CELERY_BROKER_TRANSPORT_OPTIONS": transport_options,
        "CELERY_TASK_IGNORE_RESULT": True,
        # No result backend (the "disabled" one), built once for every thread: Celery otherwise builds it again
        # in each new thread, reading the installed packages' entry points, and a web process enqueues from a
        # thread per request (a quarter of the webhook ingest's CPU, bench/README.md).
        "CELERY_RESULT_BACKEND_THREAD_SAFE": True,
        # Tasks run on a worker; a test that wants them inline sets the app's conf (tests/routines).
        "CELERY_TASK_ALWAYS_EAGER": False,
        "CELERY_BEAT_SCHEDULE_FILENAME": str(var_dir / "celerybeat-schedule"),
        "CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP": True,
        # A worker outlives any broker outage: it keeps reconnecting (Celery's default gives up, and exits,
        # after 100 tries). Celery is pinned to 5.6.3: 5.7.0 exits on a Redis restart
        # (docs/decisions/0068-celery-pinned-to-5-6-3.md).
        "CELERY_BROKER_CONNECTION_RETRY": True,
        "CELERY_BROKER_CONNECTION_MAX_RETRIES": None,
        # Runs in flight when the broker goes away finish their model call (a run never calls it twice).
        "CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS": False,
    }
