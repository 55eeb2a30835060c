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
    # Routine runs left queued, or lost with a dead worker before their answer, are enqueued again,
    # and so are the deliveries of answered runs whose task was lost (routines/runs.py).
    "sweep-routine-runs": {"task": "routines.tasks.sweep_routine_runs", "schedule": settings.ROUTINE_SWEEP_SECONDS},
    # Schedule routines that are due get one queued run each (routines/schedules.py); every minute.
    "run-due-schedules": {"task": "routines.tasks.run_due_schedules", "schedule": crontab()},  # each minute, at :00
}


@signals.worker_process_init.connect
def _start_usage_drainer(**_kwargs) -> None:
    """Each pool process writes its usage spool, and what dead processes left, from its start."""
    from gateway.usage_writer import usage_writer

    if settings.USAGE_BATCHED:
        usage_writer.start()
