"""Schedules: cron parsing, the next slot in a time zone (across DST), and the beat tick."""

import secrets
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone

import pytest
import time_machine

from routines.models import Routine, Run
from routines.schedules import _queue_once, enqueue_due, next_run_at, schedule_errors
from tests.factories import RoutineFactory

UTC = dt_timezone.utc


def make_routine(account, **fields):
    values = {"name": "Every hour", "prompt": "Say hi", "trigger": "schedule", "schedule": "0 * * * *",
              "timezone": "UTC", "delivery_targets": ["inapp"], "webhook_token": secrets.token_hex(24)}
    values.update(fields)
    return RoutineFactory(account=account, **values)


class TestScheduleErrors:
    def test_it_accepts_five_fields_and_an_iana_zone(self):
        assert schedule_errors("30 8 * * 1-5", "America/Sao_Paulo") == []
        assert schedule_errors("*/15 0-6 1,15 jan-jun mon", "UTC") == []

    @pytest.mark.parametrize("schedule", ["* * * * * *", "0 0 * * * 2030", "@daily", "* * * *", "", "   "])
    def test_it_refuses_anything_but_five_fields(self, schedule):
        errors = schedule_errors(schedule, "UTC")
        assert len(errors) == 1 and "exactly 5 fields" in errors[0]

    @pytest.mark.parametrize("schedule", ["61 * * * *", "0 24 * * *", "0 0 0 * *", "0 0 * 13 *", "*/0 * * * *",
                                          "H * * * *", "0 0 * * funday"])
    def test_it_refuses_values_out_of_range(self, schedule):
        errors = schedule_errors(schedule, "UTC")
        assert len(errors) == 1 and errors[0].startswith("The schedule is not a valid cron expression")

    def test_it_refuses_a_schedule_that_never_matches(self):
        assert schedule_errors("0 0 30 2 *", "UTC") == [
            "The schedule never matches a date (for example the 30th of February)."]

    @pytest.mark.parametrize("zone", ["Mars/Olympus", "", "utc ", "../../etc/passwd", "+03:00"])
    def test_it_refuses_unknown_zones(self, zone):
        errors = schedule_errors("0 * * * *", zone)
        assert errors == [f"'{zone}' is not a known IANA time zone (for example UTC or Europe/Lisbon)."]

    def test_it_reports_both_faults(self):
        assert len(schedule_errors("nope", "Nowhere/Land")) == 2


class TestNextRunAt:
    def test_it_is_computed_on_the_zones_wall_clock_and_returned_in_utc(self):
        after = datetime(2026, 1, 10, 12, 0, tzinfo=UTC)
        slot = next_run_at("30 8 * * *", "America/Sao_Paulo", after)  # UTC-3
        assert slot == datetime(2026, 1, 11, 11, 30, tzinfo=UTC)
        assert slot.tzinfo is UTC

    def test_it_is_strictly_after(self):
        at = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
        assert next_run_at("0 9 * * *", "UTC", at) == datetime(2026, 5, 2, 9, 0, tzinfo=UTC)
        assert next_run_at("0 9 * * *", "UTC", at - timedelta(microseconds=1)) == at

    def test_a_daily_slot_keeps_its_local_time_across_spring_forward(self):
        # New York moves from UTC-5 to UTC-4 on 8 March 2026.
        first = next_run_at("0 9 * * *", "America/New_York", datetime(2026, 3, 7, 15, 0, tzinfo=UTC))
        second = next_run_at("0 9 * * *", "America/New_York", first)
        third = next_run_at("0 9 * * *", "America/New_York", second)
        assert [first, second, third] == [
            datetime(2026, 3, 8, 13, 0, tzinfo=UTC),  # 09:00 EDT: already summer time that morning
            datetime(2026, 3, 9, 13, 0, tzinfo=UTC),
            datetime(2026, 3, 10, 13, 0, tzinfo=UTC),
        ]
        before = next_run_at("0 9 * * *", "America/New_York", datetime(2026, 3, 6, 15, 0, tzinfo=UTC))
        assert before == datetime(2026, 3, 7, 14, 0, tzinfo=UTC)  # 09:00 EST

    def test_a_slot_in_the_skipped_hour_runs_when_the_clock_resumes(self):
        # Berlin skips 02:00–03:00 on 29 March 2026.
        slot = next_run_at("30 2 * * *", "Europe/Berlin", datetime(2026, 3, 28, 12, 0, tzinfo=UTC))
        assert slot == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)  # 03:00 CEST
        assert next_run_at("30 2 * * *", "Europe/Berlin", slot) == datetime(2026, 3, 30, 0, 30, tzinfo=UTC)

    def test_a_repeated_wall_time_runs_once_on_fall_back(self):
        # Berlin goes from 03:00 CEST back to 02:00 CET on 25 October 2026: 02:30 happens twice.
        first = next_run_at("30 2 * * *", "Europe/Berlin", datetime(2026, 10, 24, 12, 0, tzinfo=UTC))
        assert first == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)  # 02:30 CEST
        assert next_run_at("30 2 * * *", "Europe/Berlin", first) == datetime(2026, 10, 26, 1, 30, tzinfo=UTC)

    def test_an_every_hour_schedule_keeps_its_real_interval_through_the_repeated_hour(self):
        slots, after = [], datetime(2026, 10, 24, 23, 59, tzinfo=UTC)
        for _ in range(4):
            after = next_run_at("0 * * * *", "Europe/Berlin", after)
            slots.append(after)
        assert slots == [datetime(2026, 10, 25, hour, 0, tzinfo=UTC) for hour in (0, 1, 2, 3)]

    def test_it_refuses_an_invalid_schedule_or_a_naive_moment(self):
        with pytest.raises(ValueError):
            next_run_at("0 0 * *", "UTC", datetime(2026, 1, 1, tzinfo=UTC))
        with pytest.raises(ValueError):
            next_run_at("0 0 * * *", "UTC", datetime(2026, 1, 1))


@pytest.mark.django_db
class TestEnqueueDue:
    START = datetime(2026, 6, 1, 10, 20, 5, tzinfo=UTC)

    def test_a_new_routine_gets_its_next_slot_and_no_run(self, owner):
        routine = make_routine(owner, schedule="45 * * * *", timezone="Asia/Kolkata")  # UTC+5:30
        with time_machine.travel(self.START, tick=False):
            assert enqueue_due() == 0
        routine.refresh_from_db()
        assert routine.next_run_at == datetime(2026, 6, 1, 11, 15, tzinfo=UTC)  # 16:45 IST
        assert routine.runs.count() == 0

    def test_a_routine_due_long_ago_gets_one_run_and_its_next_slot_after_now(self, owner):
        with time_machine.travel(self.START, tick=False):
            routine = make_routine(owner, schedule="*/5 * * * *")
            enqueue_due()
        routine.refresh_from_db()
        assert routine.next_run_at == datetime(2026, 6, 1, 10, 25, tzinfo=UTC)
        later = self.START + timedelta(days=3, hours=2)  # ~900 missed slots of downtime
        with time_machine.travel(later, tick=False):
            assert enqueue_due() == 1
            assert enqueue_due() == 0  # the same minute again: nothing more
        routine.refresh_from_db()
        runs = list(Run.objects.filter(routine=routine))
        assert len(runs) == 1
        assert runs[0].trigger == "schedule" and runs[0].status == "queued" and runs[0].event_id == ""
        assert routine.last_run_at == later
        assert routine.next_run_at == datetime(2026, 6, 4, 12, 25, tzinfo=UTC)

    def test_it_runs_at_the_slot_and_not_before(self, owner):
        routine = make_routine(owner, next_run_at=datetime(2026, 6, 1, 11, 0, tzinfo=UTC))
        with time_machine.travel(datetime(2026, 6, 1, 10, 59, 59, tzinfo=UTC), tick=False):
            assert enqueue_due() == 0
        with time_machine.travel(datetime(2026, 6, 1, 11, 0, 0, tzinfo=UTC), tick=False):
            assert enqueue_due() == 1
        routine.refresh_from_db()
        assert routine.next_run_at == datetime(2026, 6, 1, 12, 0, tzinfo=UTC)

    def test_a_paused_routine_gets_no_run(self, owner):
        due = datetime(2026, 6, 1, 9, 0, tzinfo=UTC)
        paused = make_routine(owner, is_enabled=False, disabled_reason="user", next_run_at=due)
        with time_machine.travel(self.START, tick=False):
            assert enqueue_due() == 0
        paused.refresh_from_db()
        assert paused.runs.count() == 0 and paused.next_run_at == due and paused.last_run_at is None

    def test_webhook_and_email_routines_are_not_scheduled(self, owner):
        due = datetime(2026, 6, 1, 9, 0, tzinfo=UTC)
        make_routine(owner, trigger="webhook", next_run_at=due)
        make_routine(owner, trigger="email", next_run_at=due)
        with time_machine.travel(self.START, tick=False):
            assert enqueue_due() == 0
        assert Run.objects.count() == 0

    def test_a_schedule_routine_without_a_schedule_is_never_due(self, owner):
        """Created with the three required fields only (spec 4.5): it runs by run-now, never by the
        tick, even with a `next_run_at` left from a schedule it no longer has."""
        never = make_routine(owner, schedule="")
        make_routine(owner, schedule="", next_run_at=datetime(2026, 6, 1, 9, 0, tzinfo=UTC))
        with time_machine.travel(self.START, tick=False):
            assert enqueue_due() == 0
        with time_machine.travel(self.START + timedelta(days=400), tick=False):
            assert enqueue_due() == 0
        assert Run.objects.count() == 0
        never.refresh_from_db()
        assert never.next_run_at is None

    def test_a_schedule_taken_away_after_the_routine_was_found_due_queues_nothing_and_warns_of_nothing(
            self, owner, caplog):
        slot = datetime(2026, 6, 1, 10, 0, tzinfo=UTC)
        routine = make_routine(owner, next_run_at=slot)
        Routine.objects.filter(pk=routine.pk).update(schedule="")  # a PUT between the query and the claim
        with time_machine.travel(self.START, tick=False), caplog.at_level("WARNING", logger="routines.schedules"):
            assert _queue_once(routine.pk, slot, self.START) is False
        routine.refresh_from_db()
        assert routine.runs.count() == 0 and routine.next_run_at is None
        assert caplog.records == []

    def test_a_late_tick_that_lost_the_race_queues_nothing(self, owner):
        slot = datetime(2026, 6, 1, 10, 0, tzinfo=UTC)
        routine = make_routine(owner, next_run_at=slot)
        with time_machine.travel(self.START, tick=False):
            assert enqueue_due() == 1
            # A second beat process read the same due row before the first moved it:
            assert _queue_once(routine.pk, slot, self.START) is False
        assert routine.runs.count() == 1

    def test_each_due_routine_of_each_account_gets_its_run(self, owner, outsider):
        slot = datetime(2026, 6, 1, 10, 0, tzinfo=UTC)
        mine, theirs = make_routine(owner, next_run_at=slot), make_routine(outsider, next_run_at=slot)
        with time_machine.travel(self.START, tick=False):
            assert enqueue_due() == 2
        assert mine.runs.count() == 1 and theirs.runs.count() == 1

    def test_a_broken_schedule_is_skipped_without_running(self, owner):
        routine = make_routine(owner, schedule="0 0 30 2 *", next_run_at=datetime(2026, 6, 1, 9, 0, tzinfo=UTC))
        with time_machine.travel(self.START, tick=False):
            assert enqueue_due() == 0
        routine.refresh_from_db()
        assert routine.runs.count() == 0 and routine.next_run_at is None


@pytest.mark.django_db
def test_the_beat_tick_is_the_run_due_schedules_task_each_minute(owner):
    from celery.schedules import crontab

    from gateway.celery import app
    from routines.tasks import run_due_schedules

    entry = app.conf.beat_schedule["run-due-schedules"]
    assert entry["task"] == "routines.tasks.run_due_schedules" and entry["schedule"] == crontab()
    make_routine(owner, next_run_at=datetime(2026, 6, 1, 9, 0, tzinfo=UTC))
    with time_machine.travel(datetime(2026, 6, 1, 9, 0, 30, tzinfo=UTC), tick=False):
        assert run_due_schedules() == 1
