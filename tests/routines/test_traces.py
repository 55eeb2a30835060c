"""A routine's trace across processes: the webhook request in the gateway's web process, the
run's task in a Celery worker (the context carried in the task's headers), the run's model call and
each delivery attempt, all exported to an OTLP/HTTP receiver this test starts, as one trace."""

from __future__ import annotations

import httpx
import pytest

from routines.models import Run
from tests.factories import AccountFactory, AccountGroupFactory, ModelFactory, ModelServerFactory, api_key_for, bearer
from tests.gateway.telemetry.otlp_receiver import otel_env, otlp_receiver
from tests.routines.https_receiver import https_receiver
from tests.routines.test_end_to_end import (
    _redis_for_processes,
    create_routine,
    run_status,
    send_event,
    wait_until,
    worker_process,
)
from tests.servers import wait_for_quiet_database, web_process
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture

EXECUTE_RUN, DELIVER = "routines.tasks.execute_routine_run", "routines.tasks.deliver_run_target"


@pytest.fixture(scope="module")
def otlp():
    with otlp_receiver() as r:
        yield r


@pytest.fixture(scope="module")
def deliveries():
    with https_receiver() as r:
        yield r


@pytest.fixture(scope="module")
def traced_env(deliveries, otlp):
    url = _redis_for_processes()
    return {"REDIS_URL": url, "CELERY_BROKER_URL": url, "REGISTRY_TTL_SECONDS": "0",
            "DELIVERY_ALLOW_PRIVATE_ADDRESSES": "true", "DELIVERY_CA_BUNDLE": deliveries.ca_bundle,
            "DELIVERY_RETRY_BACKOFF_SECONDS": "0.05", **otel_env(otlp)}


@pytest.fixture(scope="module")
def gateway(django_db_setup, django_db_blocker, traced_env):
    with django_db_blocker.unblock():
        with web_process(**traced_env) as base:
            yield base


@pytest.fixture
def http(transactional_db, redis_url, gateway, upstream, deliveries, otlp):  # noqa: F811
    import redis

    client = redis.Redis.from_url(_redis_for_processes())
    client.delete("celery", "unacked", "unacked_index")  # no task left over from an earlier run
    client.close()
    account = AccountFactory(group=AccountGroupFactory(name="team", api_access=True))
    server = ModelServerFactory(name="oa", kind="openai", base_url=f"{upstream.url}/v1", read_timeout=10.0)
    ModelFactory(server=server, name="echo-1", is_default=True)
    deliveries.received.clear()
    deliveries.statuses.clear()
    otlp.clear()
    client = httpx.Client(base_url=gateway, headers=bearer(api_key_for(account)), timeout=10)
    yield client
    client.close()
    wait_for_quiet_database()


def test_a_webhook_event_its_run_its_model_call_and_each_delivery_try_are_one_trace(http, traced_env, otlp,
                                                                                   deliveries, upstream):  # noqa: F811
    created = create_routine(http, delivery_targets=["inapp", f"webhook:{deliveries.url}/result"])
    rid, secret = created["routine"]["id"], created["webhook_secret"]
    deliveries.statuses.extend([503])  # the webhook's first try fails: the delivery is tried twice
    with worker_process(traced_env, name="traced-worker"):
        r = send_event(created["webhook_url"], secret, {"text": "the build is green"}, "evt-traced")
        assert r.json()["queued"] is True
        run_id = Run.objects.get(routine_id=rid).pk
        wait_until(lambda: run_status(run_id) in ("succeeded", "failed"), what="the run to end")
        assert run_status(run_id) == "succeeded"
        request_id = r.headers["X-Request-Id"]
        spans = otlp.wait_for(lambda spans: any(s.kind == "SERVER" and s.attributes.get("gateway.request_id") ==
                                                request_id for s in spans)
                              and sum(s.name == DELIVER for s in spans) >= 3, what="the routine's trace")
    hook = next(s for s in spans if s.kind == "SERVER" and s.attributes["gateway.request_id"] == request_id)
    trace = [s for s in spans if s.trace_id == hook.trace_id]
    assert hook.parent_id == "" and hook.attributes["http.route"] == "/api/v1/hooks/<str:token>"
    assert created["webhook_url"].rsplit("/", 1)[1] not in hook.attributes["url.path"]  # the token is a secret
    (run,) = [s for s in trace if s.name == EXECUTE_RUN]
    assert run.kind == "CONSUMER" and run.parent_id == hook.span_id
    assert run.attributes["gateway.task.state"] == "SUCCESS"
    (model_call,) = [s for s in trace if s.kind == "CLIENT"]
    assert model_call.parent_id == run.span_id and model_call.name == "chat echo-1"
    assert model_call.attributes["gen_ai.usage.input_tokens"] > 0
    (sent,) = [q for q in upstream.requests if q.path.endswith("/chat/completions")]
    assert sent.headers["traceparent"].split("-")[1:3] == [hook.trace_id, model_call.span_id]
    tries = sorted((s for s in trace if s.name == DELIVER), key=lambda s: s.start)
    assert len(tries) == 3  # the in-app delivery, the webhook's failed try and its retry
    assert all(t.kind == "CONSUMER" and t.trace_id == hook.trace_id for t in tries)
    assert {t.attributes["gateway.run.id"] for t in tries} == {run_id} == {run.attributes["gateway.run.id"]}
    webhook_tries = [t for t in tries if t.attributes["gateway.delivery.target_kind"] == "webhook"]
    assert [t.attributes["gateway.task.state"] for t in webhook_tries] == ["RETRY", "SUCCESS"]
    assert webhook_tries[0].event("gateway.task_retry") is not None
    assert {t.parent_id for t in tries} == {run.span_id}  # a retry keeps its message's headers: the run's context
    assert {s.resource["service.name"] for s in trace} == {"gateway-under-test"}
