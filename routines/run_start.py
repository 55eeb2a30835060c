"""Starting runs: the one way a run of a routine begins, whatever started it (a webhook event or
an e-mail through routines/ingest.py, a schedule's tick, run-now, the agent's `start_routine`,
the admin's retry). A run is a queued row first, written in the caller's transaction (with its
event, with the schedule's move to its next slot); its task is handed to the queue when that
transaction commits. A worker claims it once (routines/runs.py); if the broker cannot take it,
it stays queued and the sweep enqueues it later."""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import transaction

from routines import queue
from routines.models import Routine, Run

log = logging.getLogger("routines.runs")  # the run log's name, as before the move (routines/run_log.py)


def queue_run(routine: Routine, *, trigger: str, event=None, retry_of: Run | None = None) -> Run:
    """A queued run of `routine`; its task is enqueued when the surrounding transaction commits
    (at once outside one). If the broker cannot take it, the sweep enqueues it later."""
    return queue_runs([(routine, trigger, event)], retry_of=retry_of)[0]


def queue_runs(entries: list[tuple[Routine, str, object]], *, then: Callable[..., None] | None = None,
               retry_of: Run | None = None) -> list[Run]:
    """`queue_run` for several `(routine, trigger, event)` at once: one INSERT. `then(*run_ids)`
    instead of `enqueue` once the transaction commits (the webhook intake answers first)."""
    if not entries:
        return []
    runs = Run.objects.bulk_create([
        Run(routine=routine, trigger=trigger, source_event=event, event_id=event.event_id if event is not None else "",
            retry_of=retry_of)
        for routine, trigger, event in entries])
    transaction.on_commit(lambda: (then or enqueue)(*(run.pk for run in runs)))
    return runs


def start_manual_run(routine: Routine) -> Run:
    """Run-now (the API, the agent): a queued `manual` run, enqueued once it is committed. The
    caller has refused a paused routine, each in its own words."""
    with transaction.atomic():
        return queue_run(routine, trigger=Run.Trigger.MANUAL)


def retry_run(run: Run) -> Run:
    """A new queued run with the same event and trigger as a failed one, linked to it (the
    console's Retry). A run whose event was deleted since is tried again without it."""
    with transaction.atomic():
        return queue_run(run.routine, trigger=run.trigger, event=run.source_event, retry_of=run)


def enqueue(*run_ids: int, origins: list[tuple[str | None, dict[str, str]]] | None = None) -> None:
    """Hand runs to the task queue: a run is one message; several (a batch of webhook events)
    are one message that a worker splits into a task per run, so a web process publishes once
    per batch. If the broker cannot take them they stay queued, and the sweep enqueues them.
    `origins`: of the requests that queued each run (a batch's come from several requests), their
    id and trace context (gateway.celery.origin), for their log lines and traces; without them, the
    request being served, if any."""
    from gateway.celery import request_id_headers

    try:
        if len(run_ids) == 1:
            headers = request_id_headers(*origins[0]) if origins else None
            queue.task(queue.EXECUTE_RUN).apply_async((run_ids[0],), headers=headers)
        elif run_ids:
            kwargs = {"request_ids": [request_id for request_id, _ in origins],
                      "traces": [trace for _, trace in origins]} if origins else {}
            queue.task(queue.ENQUEUE_RUNS).apply_async((list(run_ids),), kwargs, headers=request_id_headers(None))
    except Exception:
        log.exception("could not enqueue runs %s; the sweep will", list(run_ids))
