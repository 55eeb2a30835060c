"""A run executes once: the answer is saved with `answered_at` before
anything else, completion writes are retried while the database is unreachable, a run taken up
again after its answer never calls the model again, the sweep re-queues only runs that did not
reach the model and enqueues nothing twice, and metering never fails an answered run."""

from datetime import timedelta

import pytest
import time_machine
from django.db import OperationalError
from django.utils import timezone

import routines.deliveries
import routines.run_call
import routines.runs
from gateway.models import UsageRecord
from gateway.state.per_process import flush_all
from routines.models import Delivery, InboxMessage, Run
from routines.runs import ANSWER_LOST, NO_DELIVERY, execute_run, settle_run, sweep_runs
from tests.factories import UsageRecordFactory
from tests.routines.test_runs import T0, accept, eager, models, routine  # noqa: F401 — fixtures
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture


def fail_once(monkeypatch, module, name):
    """`module.name` raises OperationalError (the database went away) on its first call only."""
    real = getattr(module, name)
    calls = []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise OperationalError("server closed the connection unexpectedly")
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, flaky)
    return calls


@pytest.fixture
def held(monkeypatch):
    """Deliveries are not enqueued (the worker died right after saving the answer)."""
    sent = []
    monkeypatch.setattr(routines.runs, "enqueue_delivery", lambda pk, task_id=None: sent.append(pk) or True)
    return sent


@pytest.mark.parametrize("module, write", [
    (routines.runs, "new_deliveries"),  # saving the answer with its pending deliveries
    (routines.deliveries, "_record"),  # the outcome of a delivery
    (routines.runs, "_end"),  # the end of the run
])
def test_a_completion_write_that_fails_once_is_retried(routine, upstream, monkeypatch, module, write):  # noqa: F811
    calls = fail_once(monkeypatch, module, write)
    run = execute_run(accept(routine).pk)
    assert len(calls) >= 2
    assert run.status == "succeeded" and run.error == "" and run.answered_at is not None
    assert [(d.status, d.attempts) for d in run.deliveries.all()] == [("succeeded", 1)]
    assert flush_all()
    assert UsageRecord.objects.filter(key=f"run-{run.pk}").count() == 1
    assert UsageRecord.objects.count() == 1
    assert len(upstream.requests) == 1
    assert InboxMessage.objects.count() == 1


def test_a_run_taken_up_again_after_its_answer_does_not_call_the_model_again(routine, upstream, held):  # noqa: F811
    run = execute_run(accept(routine).pk)
    assert run.status == "running" and run.answered_at is not None and run.output.startswith("Echo:")
    (delivery,) = run.deliveries.all()
    assert delivery.status == "pending" and held == [delivery.pk]
    assert len(upstream.requests) == 1
    # The task is delivered again (or the run queued again): only what is left is done.
    Run.objects.filter(pk=run.pk).update(status="queued")
    held.clear()
    again = execute_run(run.pk)
    assert len(upstream.requests) == 1
    assert held == [delivery.pk] and again.answered_at == run.answered_at and again.output == run.output
    assert flush_all()
    assert UsageRecord.objects.count() == 1


def test_the_sweep_takes_up_the_deliveries_of_an_answered_run_not_its_model_call(routine, upstream, held,
                                                                                  settings, monkeypatch):  # noqa: F811
    settings.ROUTINE_RUN_TIMEOUT_SECONDS = 30
    run = execute_run(accept(routine).pk)
    (delivery,) = run.deliveries.all()
    long_ago = timezone.now() - timedelta(seconds=3600)
    Run.objects.filter(pk=run.pk).update(started_at=long_ago, answered_at=long_ago, created_at=long_ago)
    assert sweep_runs() == 0  # its delivery is still held by its task
    assert Run.objects.get(pk=run.pk).status == "running"
    Delivery.objects.filter(pk=delivery.pk).update(busy_until=long_ago)  # the task was lost
    monkeypatch.undo()  # deliveries are enqueued (and run inline) again
    assert sweep_runs() == 1
    run.refresh_from_db()
    assert run.status == "succeeded" and run.error == ""
    assert [(d.status, d.attempts) for d in run.deliveries.all()] == [("succeeded", 1)]
    assert flush_all()
    assert len(upstream.requests) == 1 and UsageRecord.objects.count() == 1
    assert InboxMessage.objects.count() == 1
    assert sweep_runs() == 0


def test_the_sweep_requeues_only_runs_that_did_not_reach_the_model_and_never_twice(routine, upstream, held,
                                                                                    settings, monkeypatch):  # noqa: F811
    settings.ROUTINE_RUN_TIMEOUT_SECONDS = 30
    enqueued = []
    monkeypatch.setattr(routines.runs, "enqueue", enqueued.append)  # the broker holds them: nothing runs
    with time_machine.travel(T0, tick=False) as traveller:
        answered = execute_run(accept(routine, event_id="answered").pk)
        assert answered.answered_at is not None
        lost = accept(routine, event_id="lost")
        Run.objects.filter(pk=lost.pk).update(status="running", started_at=timezone.now())
        traveller.shift(31)
        assert sweep_runs() == 1
        assert enqueued == [lost.pk]
        lost.refresh_from_db()
        answered.refresh_from_db()
        assert lost.status == "queued" and answered.status == "running"
        for _ in range(4):  # still queued, past the grace of a minute: not enqueued again yet
            traveller.shift(61)
            sweep_runs()
            assert enqueued == [lost.pk]
        traveller.shift(60)  # REQUEUE_EVERY_SECONDS after the first: once more
        sweep_runs()
        sweep_runs()
    assert enqueued == [lost.pk, lost.pk]
    # The answered run's delivery: enqueued with the answer, then once by the sweep when its
    # task's hold ran out; never its model call.
    (delivery,) = answered.deliveries.all()
    assert held == [delivery.pk, delivery.pk]
    assert len(upstream.requests) == 1


def test_a_run_whose_answer_died_with_its_worker_fails_without_a_second_call(routine, upstream, settings,
                                                                             monkeypatch):  # noqa: F811
    """The model answered and was metered, but the answer could not be saved before the task
    ended: taken up again, the run is not sent to the model again."""
    settings.ROUTINE_RUN_TIMEOUT_SECONDS = 30
    settings.ROUTINE_WRITE_RETRY_SECONDS = 0  # the database stays away longer than the task may wait

    def down(*args, **kwargs):
        raise OperationalError("could not connect to server")

    monkeypatch.setattr(routines.runs, "new_deliveries", down)
    run = accept(routine)
    with pytest.raises(routines.runs.RunPostponed):
        execute_run(run.pk)  # given up: logged and raised, and the task that would take it up again is lost
    monkeypatch.undo()
    run.refresh_from_db()
    assert run.status == "running" and run.answered_at is None
    Run.objects.filter(pk=run.pk).update(started_at=timezone.now() - timedelta(seconds=31))
    assert sweep_runs() == 0  # the usage record read from the spool: not yet in the database
    run.refresh_from_db()
    assert run.status == "failed" and run.error == ANSWER_LOST
    assert flush_all()
    record = UsageRecord.objects.get(key=f"run-{run.pk}")
    assert run.model == record.model and run.usage["total_tokens"] == record.input_tokens + record.output_tokens
    assert len(upstream.requests) == 1 and UsageRecord.objects.count() == 1
    routine.refresh_from_db()
    assert routine.consecutive_failures == 0  # the gateway's failure, not the routine's


def _answered_but_not_saved(routine, settings, monkeypatch):  # noqa: F811
    """A run whose model answered while the database stayed away longer than the task may wait:
    the RunPostponed its try raised."""
    settings.ROUTINE_WRITE_RETRY_SECONDS = 0

    def down(*args, **kwargs):
        raise OperationalError("could not connect to server")

    monkeypatch.setattr(routines.runs, "new_deliveries", down)
    run = accept(routine)
    with pytest.raises(routines.runs.RunPostponed) as postponed:
        execute_run(run.pk)
    monkeypatch.undo()
    run.refresh_from_db()
    assert run.status == "running" and run.answered_at is None and postponed.value.held_since == run.started_at
    assert execute_run(run.pk) is None  # a redelivery of the first try's message does nothing
    return run, postponed.value


def test_an_answer_that_could_not_be_saved_is_saved_by_its_tasks_retry_without_a_second_call(
        routine, upstream, settings, monkeypatch):  # noqa: F811
    """The task lives: its retry carries the run's start time and the answer, takes the run up again
    at once (a deployment without beat has no sweep) and saves the answer: the run succeeds."""
    run, postponed = _answered_but_not_saved(routine, settings, monkeypatch)
    assert postponed.answer["output"] and postponed.answer["error"] == ""
    done = execute_run(run.pk, held_since=postponed.held_since, answer=postponed.answer)
    assert done.status == "succeeded" and done.output == postponed.answer["output"]
    assert [d.status for d in done.deliveries.all()] == ["succeeded"]
    assert execute_run(run.pk, held_since=postponed.held_since, answer=postponed.answer) is None  # once
    assert flush_all()
    assert len(upstream.requests) == 1 and UsageRecord.objects.count() == 1


def test_a_run_taken_up_again_without_its_answer_is_not_sent_to_the_model_again(
        routine, upstream, settings, monkeypatch):  # noqa: F811
    run, postponed = _answered_but_not_saved(routine, settings, monkeypatch)
    done = execute_run(run.pk, held_since=postponed.held_since)
    assert done.status == "failed" and done.error == ANSWER_LOST
    assert len(upstream.requests) == 1


def test_a_run_the_database_left_running_before_its_model_call_is_carried_out_by_its_tasks_retry(
        routine, upstream):  # noqa: F811
    """The database went away right after the claim, so the run could not even be put back in the
    queue: the retry, carrying the start time, takes it up again and runs it once."""
    from unittest import mock

    real = routines.runs._carry_out
    with mock.patch.object(routines.runs, "_carry_out",
                           side_effect=OperationalError("server closed the connection unexpectedly")):
        run = accept(routine)
        with pytest.raises(routines.runs.RunPostponed) as postponed:
            execute_run(run.pk)
    run.refresh_from_db()
    assert (run.status, run.answered_at) == ("running", None) and upstream.requests == []
    assert routines.runs._carry_out is real
    assert execute_run(run.pk) is None
    done = execute_run(run.pk, held_since=postponed.value.held_since)
    assert done.status == "succeeded" and len(upstream.requests) == 1
    routine.refresh_from_db()
    assert routine.consecutive_failures == 0


def test_a_run_queued_again_after_its_answer_was_metered_is_not_sent_to_the_model(routine, upstream):  # noqa: F811
    from routines.runs import LOST_ONCE

    run = accept(routine)
    UsageRecordFactory(account=routine.account, model="oa/echo-1", surface="routine", input_tokens=7,
                       output_tokens=5, request_id=f"run-{run.pk}", key=f"run-{run.pk}",
                       created_at=timezone.now())
    Run.objects.filter(pk=run.pk).update(error=LOST_ONCE)  # as the sweep queues a lost run again
    done = execute_run(run.pk)
    assert done.status == "failed" and done.error == ANSWER_LOST
    assert done.usage == {"prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12}
    assert upstream.requests == []


def test_metering_that_raises_after_an_answer_leaves_the_run_succeeded(routine, upstream, monkeypatch):  # noqa: F811
    routine.consecutive_failures = 2
    routine.save()

    def broken(**kwargs):
        raise ConnectionError("Redis is down")

    monkeypatch.setattr(routines.run_call, "meter", broken)  # where a run meters its answer
    run = execute_run(accept(routine).pk)
    assert run.status == "succeeded" and run.error == ""
    assert run.usage["total_tokens"] > 0 and run.model == "oa/echo-1"
    routine.refresh_from_db()
    assert routine.consecutive_failures == 0 and routine.is_enabled


def test_a_run_ends_once_however_often_it_is_settled(routine, settings):
    settings.DELIVERY_ALLOW_PRIVATE_ADDRESSES = False
    routine.uses_ai = False
    routine.delivery_targets = ["webhook:https://127.0.0.1:9/x"]
    routine.save()
    run = execute_run(accept(routine).pk)
    assert run.status == "failed" and run.error == NO_DELIVERY
    assert settle_run(run.pk) is False
    routine.refresh_from_db()
    assert routine.consecutive_failures == 1


def test_a_delivery_lost_on_its_last_try_is_given_up_by_the_sweep(routine, upstream, held, settings):  # noqa: F811
    run = execute_run(accept(routine).pk)
    (delivery,) = run.deliveries.all()
    Delivery.objects.filter(pk=delivery.pk).update(attempts=settings.DELIVERY_RETRY_ATTEMPTS,
                                                   busy_until=timezone.now() - timedelta(seconds=1))
    assert sweep_runs() == 0
    run.refresh_from_db()
    delivery.refresh_from_db()
    assert delivery.status == "failed" and delivery.error == routines.runs.DELIVERY_LOST
    assert run.status == "failed" and run.error == NO_DELIVERY
    assert InboxMessage.objects.count() == 0


def test_a_run_that_meets_a_redis_outage_before_its_model_call_goes_back_to_the_queue(
        routine, upstream, monkeypatch):  # noqa: F811
    """Its quota check cannot read the counters: the run is queued again for its task's retry,
    not failed, and nothing counts toward the routine's auto-disable."""
    import redis

    import gateway.calls.plan

    def redis_down(**_kwargs):
        raise redis.exceptions.ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr(gateway.calls.plan, "quota_check", redis_down)
    run = accept(routine)
    with pytest.raises(routines.runs.RunPostponed):
        execute_run(run.pk)
    run.refresh_from_db()
    routine.refresh_from_db()
    assert (run.status, run.error, run.started_at, run.answered_at) == ("queued", "", None, None)
    assert routine.consecutive_failures == 0 and routine.is_enabled
    assert flush_all()
    assert upstream.requests == [] and UsageRecord.objects.count() == 0
    monkeypatch.undo()
    done = execute_run(run.pk)  # the task's retry, once Redis is back
    assert done.status == "succeeded" and len(upstream.requests) == 1


def test_the_run_task_retries_a_postponed_run_with_celery(routine, monkeypatch):  # noqa: F811
    from celery.exceptions import Retry

    from routines.tasks import execute_routine_run

    def postponed(run_id, held_since=None, answer=None):
        raise routines.runs.RunPostponed(str(run_id))

    monkeypatch.setattr("routines.tasks.execute_run", postponed)
    retries = []
    monkeypatch.setattr(execute_routine_run, "retry", lambda **kwargs: retries.append(kwargs) or Retry())
    with pytest.raises(Retry):
        execute_routine_run.run(1)
    assert retries == [{"countdown": 1, "max_retries": 30}]


def test_the_run_task_retry_carries_the_start_time_of_a_run_it_still_holds(monkeypatch):
    from datetime import datetime, timezone

    from celery.exceptions import Retry

    from routines.tasks import execute_routine_run

    started = datetime(2026, 11, 28, 21, 30, 5, 123456, tzinfo=timezone.utc)
    tried = []

    answer = {"output": "done", "model": "oa/echo-1", "usage": None, "error": ""}

    def held(run_id, held_since=None, answer=None):
        tried.append((held_since, answer))
        raise routines.runs.RunPostponed(run_id, held_since=started, answer={"output": "done", "model": "oa/echo-1",
                                                                             "usage": None, "error": ""})

    monkeypatch.setattr("routines.tasks.execute_run", held)
    retries = []
    monkeypatch.setattr(execute_routine_run, "retry", lambda **kwargs: retries.append(kwargs) or Retry())
    with pytest.raises(Retry):
        execute_routine_run.run(7)
    assert retries == [{"countdown": 1, "max_retries": 30,
                        "kwargs": {"held_since": 1795901405123456, "answer": answer}}]
    with pytest.raises(Retry):
        execute_routine_run.run(7, **retries[0]["kwargs"])
    assert tried == [(None, None), (started, answer)]
