"""Celery tasks of routines. Tasks are acknowledged only after they end (`acks_late`), so a
worker killed mid-task leaves the message to be delivered again. A run is claimed with a
conditional update, so a redelivered task does nothing, and the sweep takes up runs whose worker
died (see routines/runs.py). Each delivery of an answered run is a task of its own, retried by
Celery with exponential backoff; nothing sleeps between tries (routines/deliveries/). The modules
that enqueue a task find it by its name (routines/queue.py), so none of them imports this one."""

import uuid

from celery import shared_task
from django.conf import settings

from gateway.celery import request_id_headers
from gateway.web.errors import outage_of
from routines.deliveries import RetryableDeliveryError, send_delivery, task_seconds
from routines.queue import DELIVER, ENQUEUE_RUNS, EXECUTE_RUN
from routines.run_claims import held_since_of, held_token
from routines.runs import RunPostponed, execute_run, settle_run, sweep_runs
from routines.schedules import enqueue_due

POSTPONE_RETRIES = 30  # then the run waits, queued, for the sweep


@shared_task(bind=True, name=EXECUTE_RUN, acks_late=True, reject_on_worker_lost=True,
             time_limit=settings.ROUTINE_RUN_TIMEOUT_SECONDS)
def execute_routine_run(self, run_id: int, held_since: int | None = None, answer: dict | None = None) -> None:
    """A run that met an outage of the database or Redis (its claim, its quota check, its
    writes) is tried again by Celery with a growing countdown; it is not failed. A run the
    outage left marked running is taken up again by the retry, which carries its start time (and
    the model's answer, when only its saving failed)."""
    try:
        execute_run(run_id, held_since=held_since_of(held_since), answer=answer)
    except Exception as exc:
        if not isinstance(exc, RunPostponed) and outage_of(exc) is None:
            raise
        held = getattr(exc, "held_since", None)
        retry = {"countdown": min(2 ** self.request.retries, 30), "max_retries": POSTPONE_RETRIES}
        if held is not None:
            retry["kwargs"] = {"held_since": held_token(held), "answer": getattr(exc, "answer", None)}
        raise self.retry(**retry) from None


@shared_task(name=ENQUEUE_RUNS, acks_late=True, reject_on_worker_lost=True)
def enqueue_routine_runs(run_ids: list[int], request_ids: list[str | None] | None = None,
                         traces: list[dict[str, str]] | None = None) -> None:
    """A task per run of a batch (routines.run_start.enqueue), each with the id and the trace context
    of the request that queued its run. Done twice (a worker lost midway), a run is still carried out
    once: its task claims it first."""
    request_ids = request_ids if request_ids and len(request_ids) == len(run_ids) else [None] * len(run_ids)
    traces = traces if traces and len(traces) == len(run_ids) else [None] * len(run_ids)
    for run_id, request_id, trace in zip(run_ids, request_ids, traces):
        execute_routine_run.apply_async((run_id,), headers=request_id_headers(request_id, trace))


@shared_task(bind=True, name=DELIVER, acks_late=True, reject_on_worker_lost=True,
             autoretry_for=(RetryableDeliveryError,), retry_backoff=settings.DELIVERY_RETRY_BACKOFF_SECONDS,
             retry_backoff_max=settings.DELIVERY_RETRY_BACKOFF_MAX_SECONDS, retry_jitter=False,
             max_retries=max(settings.DELIVERY_RETRY_ATTEMPTS, 1) - 1, time_limit=task_seconds())
def deliver_run_target(self, delivery_id: int) -> None:
    """One try of one delivery; the run ends with the last of its deliveries to end."""
    task_id = self.request.id or uuid.uuid4().hex  # a retry keeps the task's id, and so its hold
    run_id = send_delivery(delivery_id, task_id=task_id, last_try=self.request.retries >= self.max_retries)
    if run_id is not None:
        settle_run(run_id)


@shared_task(name="routines.tasks.sweep_routine_runs")
def sweep_routine_runs() -> int:
    return sweep_runs()


@shared_task(name="routines.tasks.run_due_schedules")
def run_due_schedules() -> int:
    """The beat tick of schedules: one queued run per due routine (routines/schedules.py)."""
    return enqueue_due()
