"""A failed run keeps the model it tried and its error as it was, without the API's
"retry in N seconds" (nothing retries a run by itself), and the owner reads in the inbox why the
routine switched itself off (spec 3.3)."""

import pytest

from gateway.celery import app as celery_app
from routines.ingest import ingest
from routines.models import Run
from routines.routine_writes import new_token
from routines.runs import execute_run
from tests.factories import ModelFactory, ModelFallbackFactory, ModelServerFactory, RoutineFactory, api_key_for, bearer
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture

pytestmark = pytest.mark.django_db

NOT_RETRIED = "This run is not tried again by itself: run the routine again (Run now) once the model answers."


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


def routine_of(owner, **fields):
    return RoutineFactory(account=owner, name="Digest", prompt="Summarize.", trigger="webhook",
                          delivery_targets=["inapp"], webhook_secret=None, webhook_token=new_token(), **fields)


def run_once(routine, event_id="e1") -> Run:
    status, answer = ingest(routine.webhook_token, b'{"text": "hi"}', {"X-Event-Id": event_id})
    assert status == 200 and answer["queued"] is True, answer
    return execute_run(Run.objects.get(routine=routine, event_id=event_id).pk)


def test_a_run_whose_server_is_down_names_the_model_and_its_failure(owner, closed_port, redis_url):
    server = ModelServerFactory(name="dead", base_url=f"http://127.0.0.1:{closed_port}/v1")
    ModelFactory(server=server, name="m", is_default=True)

    run = run_once(routine_of(owner))

    assert run.status == "failed" and run.model == "dead/m"
    assert run.error == f"503: No model of the chain answered (dead/m: 503 The model server could not be reached.). " \
                        f"{NOT_RETRIED}"
    assert "retry in" not in run.error
    # the API shows the run as it is stored
    [shown] = [r for r in _runs(owner, run.routine) if r["id"] == run.pk]
    assert (shown["model"], shown["error"], shown["status"]) == ("dead/m", run.error, "failed")


def test_each_model_of_the_chain_is_named_with_its_own_failure(owner, oa, upstream):  # noqa: F811
    other = ModelFactory(server=oa.server, name="echo-2")
    ModelFallbackFactory(model=other, fallback=oa, position=1)
    upstream.configure(fail_status=500)

    run = run_once(routine_of(owner, model="oa/echo-2"))

    assert run.model == "oa/echo-2, oa/echo-1"
    assert run.error == ("503: No model of the chain answered (oa/echo-2: 500 Internal Server Error (injected by the "
                         "test upstream); oa/echo-1: 500 Internal Server Error (injected by the test upstream)). "
                         f"{NOT_RETRIED}")


def test_a_refusal_names_the_model_that_refused(owner, oa, upstream):  # noqa: F811
    upstream.configure(fail_status=400)
    run = run_once(routine_of(owner))
    assert run.model == "oa/echo-1"
    assert run.error.startswith("400: ") and NOT_RETRIED not in run.error


def test_a_run_refused_before_any_call_names_the_model_it_asked_for(owner, oa):
    owner.group.daily_tokens = 0
    owner.group.save()
    run = run_once(routine_of(owner))
    assert run.model == "oa/echo-1" and run.error.startswith("403: ")


def test_the_owner_reads_in_the_inbox_why_the_routine_switched_itself_off(owner, oa, upstream, client):  # noqa: F811
    upstream.configure(fail_status=500)
    routine = routine_of(owner)
    runs = [run_once(routine, event_id=f"f{i}") for i in range(3)]

    key = api_key_for(owner)
    [notice] = client.get("/api/v1/inbox", headers=bearer(key)).json()["messages"]
    last = runs[-1]
    assert notice["title"] == "Routine “Digest” was switched off"
    assert notice["body"] == (
        f"Its last 3 runs failed in a row, so it was switched off and starts no run until it is enabled again. "
        f"The last one, run {last.pk}, failed with: {last.error}\n\nLook at its runs "
        f"(GET /api/v1/routines/{routine.pk}/runs), fix the cause, and enable it again.")
    assert (notice["routine_id"], notice["run_id"]) == (routine.pk, last.pk)
    detail = client.get(f"/api/v1/routines/{routine.pk}", headers=bearer(key)).json()["routine"]
    assert (detail["is_enabled"], detail["disabled_reason"]) == (False, "failures")


def _runs(owner, routine):
    from django.test import Client

    return Client().get(f"/api/v1/routines/{routine.pk}/runs", headers=bearer(api_key_for(owner))).json()["runs"]
