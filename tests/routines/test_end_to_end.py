"""End to end on real processes: the gateway under uvicorn and Celery workers on Redis, sharing
the test database; the reference upstream as the model server; a local HTTPS receiver for
`webhook:` deliveries. A webhook call becomes a run, the run's result reaches the inbox and the
receiver (signature checked), a routine failing three times is switched off, and a worker killed
mid-run loses no accepted event."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import signal
import sys
import time
from pathlib import Path

import httpx
import pytest
from django.conf import settings as django_settings

from routines.models import Run
from tests import servers
from tests.conftest import TEST_REDIS_URL
from tests.factories import AccountFactory, AccountGroupFactory, ModelFactory, ModelServerFactory, api_key_for, bearer
from tests.routines.https_receiver import https_receiver
from tests.servers import wait_for_quiet_database, web_process
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture


def _redis_for_processes() -> str:
    return django_settings.REDIS_URL or TEST_REDIS_URL


@pytest.fixture(scope="module")
def receiver():
    with https_receiver() as r:
        yield r


@pytest.fixture(scope="module")
def process_env(receiver):
    url = _redis_for_processes()
    return {
        "REDIS_URL": url,
        "CELERY_BROKER_URL": url,
        "REGISTRY_TTL_SECONDS": "0",
        "DELIVERY_ALLOW_PRIVATE_ADDRESSES": "true",
        "DELIVERY_CA_BUNDLE": receiver.ca_bundle,
        "DELIVERY_RETRY_BACKOFF_SECONDS": "0.05",
    }


@pytest.fixture(scope="module")
def gateway(django_db_setup, django_db_blocker, process_env):
    with django_db_blocker.unblock():
        with web_process(**process_env) as base:
            yield base


@contextlib.contextmanager
def worker_process(env: dict[str, str], *extra_args: str, name: str = "worker"):
    """`celery -A gateway worker` (solo pool: the task runs in this very process) on the test
    database and the test Redis. Stopped at the end, unless the test killed it."""
    args = [sys.executable, "-m", "celery", "-A", "gateway", "worker", "--pool=solo", "--loglevel=INFO",
            "--without-gossip", "--without-mingle", "-n", f"{name}-{os.getpid()}@%h", *extra_args]
    with servers.server_process(args, name=name, env=servers.child_env(**env),
                                ready=lambda log: b"ready." in log.read_bytes()) as proc:
        yield proc


@pytest.fixture
def world(transactional_db, redis_url, gateway, upstream, receiver):  # noqa: F811
    import redis

    client = redis.Redis.from_url(_redis_for_processes())
    client.delete("celery", "unacked", "unacked_index")  # no task left over from an earlier run
    client.close()
    account = AccountFactory(group=AccountGroupFactory(name="team", api_access=True), email="dev@example.test")
    server = ModelServerFactory(name="oa", kind="openai", base_url=f"{upstream.url}/v1", read_timeout=10.0)
    ModelFactory(server=server, name="echo-1", is_default=True)
    receiver.received.clear()
    receiver.statuses.clear()
    http = httpx.Client(base_url=gateway, headers=bearer(api_key_for(account)), timeout=10)
    yield http
    http.close()
    wait_for_quiet_database()


def create_routine(http, **fields) -> dict:
    r = http.post("/api/v1/routines", json={"name": "E2E", "prompt": "Summarize the event.", "trigger": "webhook",
                                            **fields})
    assert r.status_code == 201, r.text
    return r.json()


def send_event(url: str, secret: str, payload: dict, event_id: str) -> httpx.Response:
    body = json.dumps(payload).encode()
    signature = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return httpx.post(url, content=body, headers={"Content-Type": "application/json", "X-Svc-Signature": signature,
                                                  "X-Event-Id": event_id}, timeout=10)


def wait_until(check, timeout: float = 30.0, what: str = "the condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def run_status(run_id: int) -> str:
    return Run.objects.filter(pk=run_id).values_list("status", flat=True).first()


def test_a_webhook_event_runs_and_is_delivered_to_the_inbox_and_a_signed_webhook(world, process_env, receiver):
    created = create_routine(world, delivery_targets=["inapp", f"webhook:{receiver.url}/result"])
    rid, secret = created["routine"]["id"], created["webhook_secret"]
    with worker_process(process_env):
        r = send_event(created["webhook_url"], secret, {"text": "the build is green"}, "evt-1")
        assert r.json() == {"ok": True, "queued": True, "event_id": "evt-1"}
        run_id = Run.objects.get(routine_id=rid).pk
        wait_until(lambda: run_status(run_id) in ("succeeded", "failed"), what="the run to end")
    runs = world.get(f"/api/v1/routines/{rid}/runs").json()["runs"]
    (run,) = runs
    assert run["status"] == "succeeded", run
    assert run["event_id"] == "evt-1" and run["trigger"] == "webhook" and run["model"] == "oa/echo-1"
    assert run["output"].startswith("Echo: Summarize the event.") and "the build is green" in run["output"]
    assert run["usage"]["total_tokens"] > 0
    assert [(d["target"], d["status"]) for d in run["deliveries"]] == [
        ("inapp", "succeeded"), (f"webhook:{receiver.url}/result", "succeeded")]
    (inbox,) = world.get("/api/v1/inbox").json()["messages"]
    assert inbox["body"] == run["output"] and inbox["run_id"] == run["id"]
    (got,) = receiver.received
    assert got.signature_valid(secret)
    assert got.json["run_id"] == run["id"] and got.json["output"] == run["output"]
    assert got.json["event_id"] == "evt-1" and got.json["routine_id"] == rid


def test_a_routine_failing_three_times_is_switched_off(world, process_env, upstream):  # noqa: F811
    created = create_routine(world, delivery_targets=["inapp"])
    rid, secret, url = created["routine"]["id"], created["webhook_secret"], created["webhook_url"]
    upstream.configure(fail_status=500)
    with worker_process(process_env):
        for i in range(3):
            assert send_event(url, secret, {"n": i}, f"bad-{i}").json()["queued"] is True
        wait_until(lambda: Run.objects.filter(routine_id=rid, status="failed").count() == 3, what="three failures")
    routine = next(r for r in world.get("/api/v1/routines").json()["routines"] if r["id"] == rid)
    assert routine["is_enabled"] is False
    assert routine["disabled_reason"] == "failures"
    assert routine["consecutive_failures"] == 3
    (notice,) = world.get("/api/v1/inbox").json()["messages"]
    assert "switched off" in notice["title"]
    assert send_event(url, secret, {"n": 9}, "after").json() == {"ok": True, "ignored": "disabled_routine"}


def test_a_worker_killed_mid_run_loses_no_accepted_event(world, process_env, upstream):  # noqa: F811
    created = create_routine(world, delivery_targets=["inapp"])
    rid, secret, url = created["routine"]["id"], created["webhook_secret"], created["webhook_url"]
    upstream.configure(end_delay_ms=5000)  # a slow reply: the run is still running when its worker dies
    with worker_process(process_env, name="doomed") as doomed:
        assert send_event(url, secret, {"n": 1}, "slow").json()["queued"] is True
        first = Run.objects.get(routine_id=rid, event_id="slow").pk
        wait_until(lambda: run_status(first) == "running", what="the run to start")
        upstream.wait_for_requests(1, timeout=10)
        doomed.send_signal(signal.SIGKILL)
        doomed.wait(timeout=10)
    assert run_status(first) == "running"
    upstream.configure(end_delay_ms=0)
    # accepted while no worker runs: they wait in the broker
    for name in ("while-down-1", "while-down-2"):
        assert send_event(url, secret, {"n": name}, name).json()["queued"] is True
    # A new worker with its beat: the sweep finds the run lost (past the run timeout) and queues it again.
    env = {**process_env, "ROUTINE_RUN_TIMEOUT_SECONDS": "3", "ROUTINE_SWEEP_SECONDS": "1"}
    with worker_process(env, "-B", "-s", str(Path(django_settings.VAR_DIR) / "e2e-beat-schedule"), name="rescuer"):
        wait_until(lambda: Run.objects.filter(routine_id=rid, status="succeeded").count() == 3, timeout=45,
                   what="every accepted event to be run")
    runs = world.get(f"/api/v1/routines/{rid}/runs").json()["runs"]
    assert sorted(r["event_id"] for r in runs) == ["slow", "while-down-1", "while-down-2"]
    assert all(r["status"] == "succeeded" and len(r["deliveries"]) == 1 for r in runs)
    assert len(world.get("/api/v1/inbox").json()["messages"]) == 3
