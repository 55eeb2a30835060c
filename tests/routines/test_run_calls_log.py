"""A routine run's model call is a call of the calls log (gateway/usage/call_log.py `own_call`), answered or
not, as a request's would be: the Calls list, the home and the usage console count it
(gateway/console/call_counts.py). Its row names the routine and the run (tags, and the request ID
`run-<id>` its usage record has too)."""

import pytest

from gateway.celery import app as celery_app
from gateway.models import CallRecord, UsageRecord
from gateway.state.per_process import flush_all
from gateway.usage.call_log import call_log
from routines.runs import execute_run
from tests.factories import ModelFactory, ModelServerFactory, RoutineFactory, RunFactory
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture


@pytest.fixture(autouse=True)
def eager():
    """A run's deliveries run inline, so the run has ended when execute_run returns."""
    before = celery_app.conf.CELERY_TASK_ALWAYS_EAGER
    celery_app.conf.CELERY_TASK_ALWAYS_EAGER = True
    yield
    celery_app.conf.CELERY_TASK_ALWAYS_EAGER = before


@pytest.fixture
def routine(owner, upstream):  # noqa: F811
    server = ModelServerFactory(name="oa", kind="openai", base_url=f"{upstream.url}/v1", read_timeout=5.0)
    ModelFactory(server=server, name="echo-1", is_default=True)
    return RoutineFactory(account=owner, name="Digest", prompt="Summarize.", delivery_targets=["inapp"])


def row_of(run) -> CallRecord:
    """The run's row, once this process's spools are written (its usage, then its calls)."""
    assert flush_all() and call_log.flush()
    return CallRecord.objects.get(request_id=f"run-{run.pk}")


def test_an_answered_run_is_a_call_with_its_usage(routine, owner):
    run = execute_run(RunFactory(routine=routine).pk)
    assert run.status == "succeeded", run.error

    call = row_of(run)
    usage = UsageRecord.objects.get(request_id=f"run-{run.pk}")
    assert (call.surface, call.account_id, call.group_id, call.model_requested, call.model, call.status,
            call.outcome, call.tags) == ("routine", owner.pk, owner.group_id, "oa/echo-1", "oa/echo-1", 200, "ok",
                                         {"routine": str(routine.pk), "run": str(run.pk)})
    assert (call.input_tokens, call.output_tokens, call.cost_units) == (usage.input_tokens, usage.output_tokens,
                                                                        usage.cost_units)
    assert usage.tags == call.tags  # a tag filter finds its usage too
    assert [(a["model"], a["outcome"]) for a in call.attempts] == [("oa/echo-1", "ok")]


def test_a_run_the_model_fails_is_a_failed_call(routine, upstream):  # noqa: F811
    upstream.configure(fail_status=500)
    run = execute_run(RunFactory(routine=routine).pk)
    assert run.status == "failed"

    call = row_of(run)
    assert (call.status, call.outcome, call.model, call.input_tokens) == (503, "failed", "", 0)


def test_a_run_refused_by_its_quota_is_a_refused_call(routine, owner):
    owner.group.daily_tokens = 0
    owner.group.save()
    run = execute_run(RunFactory(routine=routine).pk)
    assert run.status == "failed"

    call = row_of(run)
    assert (call.status, call.outcome, call.attempts) == (403, "refused", [])
    assert not UsageRecord.objects.filter(request_id=f"run-{run.pk}").exists()
