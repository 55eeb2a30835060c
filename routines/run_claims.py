"""How a worker holds a run: the claim that moves it from queued to running once, and the
postponement of a run that met an outage of the database or Redis (routines/runs.py carries runs
out; docs/decisions/0070-run-postponed-by-outage.md says why a run the outage left running is its
own task's to take up again)."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from datetime import timezone as tz

from django.db.models import Q
from django.utils import timezone

from gateway.web.errors import outage_of
from routines.models import Run

log = logging.getLogger("routines.runs")

EPOCH = datetime(1970, 1, 1, tzinfo=tz.utc)


def claim(run_id: int, held_since: datetime | None = None) -> datetime | None:
    """Move a queued run to running: its start time for exactly one caller, None for the others
    (a redelivered task). With `held_since`, the start time a postponed try of the same task
    left on a run it could not put back in the queue, that run is taken up again too."""
    now = timezone.now()
    ours = Q(status=Run.Status.QUEUED)
    if held_since is not None:
        ours |= Q(status=Run.Status.RUNNING, started_at=held_since)
    taken = Run.objects.filter(ours, pk=run_id).update(status=Run.Status.RUNNING, started_at=now)
    return now if taken else None


class RunPostponed(Exception):
    """The database or Redis was away: the run went back to the queue untouched, for its task
    to retry later (it neither fails nor counts toward the routine's auto-disable). When even
    that write failed, `held_since` is the start time the run still carries as running: the
    task's retry passes it to `claim` to take the run up again, instead of leaving it to the
    sweep (which a deployment without beat never runs); `answer`, the model's answer, when it
    is the answer that could not be saved, so that the retry saves it without a second call."""

    def __init__(self, run_id: int, held_since: datetime | None = None, answer: dict | None = None):
        super().__init__(str(run_id))
        self.held_since = held_since
        self.answer = answer  # the model's answer, when only its saving failed: the retry saves it


def postpone(run: Run, started: datetime, exc: Exception) -> None:
    """Put an unanswered run back in the queue (raises RunPostponed). If even that write fails,
    the run stays running, held by this task's retry (or, should that be lost, by the sweep)."""
    log.warning("run %s postponed: %s cannot be reached (%s)", run.pk, outage_of(exc), exc.__class__.__name__)
    try:
        Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING, answered_at__isnull=True).update(
            status=Run.Status.QUEUED, started_at=None)
    except Exception as again:
        log.warning("run %s left running for its task's retry (%s)", run.pk, again.__class__.__name__)
        raise RunPostponed(run.pk, held_since=started) from exc
    raise RunPostponed(run.pk) from exc


def held_token(held_since: datetime) -> int:
    """A held run's start time as the task's retry carries it: whole microseconds since the epoch,
    exact (a float would lose the last one, and `claim` compares for equality)."""
    return (held_since - EPOCH) // timedelta(microseconds=1)


def held_since_of(token: int | None) -> datetime | None:
    return None if token is None else EPOCH + timedelta(microseconds=int(token))
