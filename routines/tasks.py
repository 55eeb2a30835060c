"""Celery tasks of routines. A run's task is acknowledged only after it ends (`acks_late`), so a
worker killed mid-run leaves the message to be delivered again; the run itself is claimed with
a conditional update, so a redelivered task does nothing, and the sweep takes up runs whose
worker died (see routines/runs.py)."""

from celery import shared_task
from django.conf import settings

from routines.runs import execute_run, sweep_runs


@shared_task(name="routines.tasks.execute_routine_run", acks_late=True, reject_on_worker_lost=True,
             time_limit=settings.ROUTINE_RUN_TIMEOUT_SECONDS)
def execute_routine_run(run_id: int) -> None:
    execute_run(run_id)


@shared_task(name="routines.tasks.sweep_routine_runs")
def sweep_routine_runs() -> int:
    return sweep_runs()


@shared_task(name="routines.tasks.run_due_schedules")
def run_due_schedules() -> int:
    """The beat tick of schedules: one queued run per due routine (routines/schedules.py)."""
    from routines.schedules import enqueue_due

    return enqueue_due()
