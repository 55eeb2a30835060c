"""A routine run's model call under its owner's group's guardrails: the event's text reaches the model
redacted, and a check that blocks fails the run with the refusal's words (never the value found), with
nothing sent to the model and nothing billed."""

import pytest

from gateway.celery import app as celery_app
from gateway.models import UsageRecord
from routines.ingest import ingest
from routines.models import Run
from routines.routine_writes import new_token
from routines.runs import execute_run
from tests.compat.guard_support import AWS_KEY, BLOCK, EMAIL, REDACT, guard
from tests.factories import ModelFactory, ModelServerFactory, RoutineFactory
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture

pytestmark = pytest.mark.django_db
EVENT = f'{{"text": "mail {EMAIL} with the key {AWS_KEY}"}}'.encode()


@pytest.fixture(autouse=True)
def eager():
    before = celery_app.conf.CELERY_TASK_ALWAYS_EAGER  # the app reads its settings under CELERY_
    celery_app.conf.CELERY_TASK_ALWAYS_EAGER = True
    yield
    celery_app.conf.CELERY_TASK_ALWAYS_EAGER = before


@pytest.fixture
def oa(upstream):  # noqa: F811
    server = ModelServerFactory(name="oa", base_url=f"{upstream.url}/v1", read_timeout=5.0)
    return ModelFactory(server=server, name="echo-1", is_default=True)


def run_once(owner) -> Run:
    routine = RoutineFactory(account=owner, name="Digest", prompt="Summarize.", trigger="webhook",
                             delivery_targets=["inapp"], webhook_secret=None, webhook_token=new_token())
    status, answer = ingest(routine.webhook_token, EVENT, {"X-Event-Id": "e1"})
    assert status == 200 and answer["queued"] is True, answer
    return execute_run(Run.objects.get(routine=routine, event_id="e1").pk)


def test_a_runs_event_reaches_the_model_redacted(owner, oa, upstream):  # noqa: F811
    guard(owner.group, REDACT)
    run = run_once(owner)
    assert run.status != "failed", run.error
    sent = upstream.last.body.decode()
    assert EMAIL not in sent and AWS_KEY not in sent


def test_a_blocked_run_fails_with_the_refusal_and_calls_no_model(owner, oa, upstream):  # noqa: F811
    guard(owner.group, BLOCK)
    run = run_once(owner)
    assert run.status == "failed"
    assert run.error.startswith("400: The request was refused by the group's guardrails (secrets, input).")
    assert AWS_KEY not in run.error
    assert upstream.requests == []
    assert not UsageRecord.objects.exists()
