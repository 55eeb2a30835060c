"""Schedules: 5-field cron in the routine's time zone, one beat tick a minute.

A routine's next slot is computed on the wall clock of its time zone and stored in UTC. Across a
change of the clock (DST) a slot that falls in the skipped hour runs when the clock resumes
(02:30 on a spring-forward night runs at 03:00), and a wall time that occurs twice runs once, at
its first occurrence — except for schedules whose hour field is `*`, which keep running at their
real interval through the repeated hour.

A `schedule` routine may have no schedule (spec 4.5 requires none; routines/records.py,
NO_SCHEDULE): it has no `next_run_at`, the tick never starts it, and it runs by run-now.

`enqueue_due` is what the beat tick calls: every enabled `schedule` routine with a schedule whose
`next_run_at` has passed gets ONE queued run, however many slots were missed while nothing ran, and its
`next_run_at` moves to the first slot after now. The move is a conditional update on the old
`next_run_at`, in the same transaction as the queued run, so two ticks racing each other (two beat
processes, a tick redelivered) queue the run once.
"""

from __future__ import annotations

import logging
from datetime import datetime
from datetime import timezone as dt_timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import CroniterError, croniter
from django.db import transaction
from django.utils import timezone

from routines.models import Routine
from routines.run_start import queue_run

log = logging.getLogger(__name__)

CRON_FIELDS = 5


def schedule_errors(schedule: str, timezone: str) -> list[str]:  # noqa: A002  (the field's name)
    """What is wrong with a schedule and its time zone; empty when both are valid."""
    errors = []
    zone_ok = _zone(timezone) is not None
    if not zone_ok:
        errors.append(f"'{timezone}' is not a known IANA time zone (for example UTC or Europe/Lisbon).")
    fields = (schedule or "").split()
    if len(fields) != CRON_FIELDS:
        errors.append(
            "The schedule must be a cron expression of exactly 5 fields: minute hour day-of-month month "
            "day-of-week (for example '30 8 * * 1-5'); seconds and '@' shortcuts are not accepted."
        )
        return errors
    try:
        it = croniter(" ".join(fields), datetime(2000, 1, 1, tzinfo=dt_timezone.utc))
        it.get_next(datetime)
    except CroniterError as exc:
        if "find next date" in str(exc):
            errors.append("The schedule never matches a date (for example the 30th of February).")
        else:
            errors.append(f"The schedule is not a valid cron expression: {exc}.")
    return errors


def next_run_at(schedule: str, timezone: str, after: datetime) -> datetime:  # noqa: A002
    """The first slot of `schedule` strictly after `after`, on the wall clock of `timezone`,
    as an aware UTC datetime. Raises ValueError for an invalid schedule or zone."""
    errors = schedule_errors(schedule, timezone)
    if errors:
        raise ValueError(" ".join(errors))
    zone = _zone(timezone)
    if after.tzinfo is None:
        raise ValueError("`after` must be an aware datetime")
    fields = schedule.split()
    repeat_hour_too = fields[1] == "*"
    it = croniter(" ".join(fields), after.astimezone(zone))
    while True:
        slot = it.get_next(datetime).astimezone(zone)
        if repeat_hour_too or not _second_occurrence(slot):
            return slot.astimezone(dt_timezone.utc)


def routine_next_run(routine: Routine, *, after: datetime | None = None) -> datetime | None:
    """The routine's next slot after `after` (now), or None when it has no valid schedule."""
    if routine.trigger != Routine.Trigger.SCHEDULE or not routine.schedule:
        return None
    try:
        return next_run_at(routine.schedule, routine.timezone, after or timezone.now())
    except ValueError:
        return None


def enqueue_due(now: datetime | None = None) -> int:
    """Queue one run for each enabled schedule routine that is due; returns how many were queued.
    A routine without a schedule is never due, even with a `next_run_at` left from an old one."""
    now = now or timezone.now()
    _fill_missing_next_run(now)
    due = (
        Routine.objects.filter(trigger=Routine.Trigger.SCHEDULE, is_enabled=True, next_run_at__lte=now)
        .exclude(schedule="")
        .values_list("pk", "next_run_at")
    )
    queued = 0
    for pk, slot in list(due):
        if _queue_once(pk, slot, now):
            queued += 1
    return queued


def _queue_once(pk: int, slot: datetime, now: datetime) -> bool:
    with transaction.atomic():
        routine = Routine.objects.filter(pk=pk).first()
        if routine is None:
            return False
        following = routine_next_run(routine, after=now)
        if following is None:  # its schedule was taken away since it was found due, or is broken
            if routine.trigger == Routine.Trigger.SCHEDULE and routine.schedule:
                log.warning("routine %s has an invalid schedule %r (zone %r); not run", pk, routine.schedule,
                            routine.timezone)
            Routine.objects.filter(pk=pk, next_run_at=slot).update(next_run_at=None)
            return False
        claimed = Routine.objects.filter(pk=pk, is_enabled=True, next_run_at=slot).update(
            next_run_at=following, last_run_at=now
        )
        if not claimed:
            return False
        routine.next_run_at, routine.last_run_at = following, now
        queue_run(routine, trigger="schedule")
    return True


def _fill_missing_next_run(now: datetime) -> None:
    """Schedule routines without a next slot (new, or saved without one) get it computed."""
    missing = Routine.objects.filter(trigger=Routine.Trigger.SCHEDULE, next_run_at__isnull=True).exclude(schedule="")
    for routine in missing.only("pk", "trigger", "schedule", "timezone"):
        following = routine_next_run(routine, after=now)
        if following is not None:
            Routine.objects.filter(pk=routine.pk, next_run_at__isnull=True).update(next_run_at=following)


def _zone(name: str) -> ZoneInfo | None:
    if not name or not isinstance(name, str) or name != name.strip():
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return None


def _second_occurrence(moment: datetime) -> bool:
    """Whether this wall time already happened earlier the same night: the repeated stretch after
    a clock goes back, which `astimezone` marks with fold=1."""
    return bool(moment.fold) and moment.replace(fold=0).utcoffset() != moment.utcoffset()
