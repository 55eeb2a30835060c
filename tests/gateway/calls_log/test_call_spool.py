"""The calls log's durable way: a call's line is in its process's spool when the request ends
and reaches the database once, also from a gateway killed after the answer, also when a file is replayed
twice; refusals without a credential are bounded; lines of deleted accounts are dropped."""

import json
import shutil
import signal
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest
from django.conf import settings

from gateway.models import CallRecord
from gateway.state.per_process import flush_all
from gateway.telemetry import call_facts
from gateway.telemetry.logjson import Exchange, current
from gateway.usage import call_log as call_log_module
from gateway.usage.call_log import UNAUTHENTICATED_PER_MINUTE, call_log, record_call
from gateway.usage.spool import SUFFIX
from gateway.usage.writer import database_tag, usage_writer
from tests.factories import AccountFactory, AccountGroupFactory, ModelFactory, ModelServerFactory, api_key_for
from tests.gateway.calls_log.conftest import HELLO, call_of
from tests.servers import answers_on, child_env, free_port, server_process, wait_for_quiet_database
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture


def calls_dir() -> Path:
    return Path(settings.USAGE_SPOOL_DIR) / database_tag() / "calls"


def spooled_lines(request_id: str) -> list[dict]:
    lines = []
    for path in calls_dir().glob("*" + SUFFIX):
        lines += [json.loads(text) for text in path.read_text().splitlines() if text.strip()]
    return [line for line in lines if line.get("r") == request_id]


@pytest.fixture
def spooled(settings, tmp_path):
    """Lines go to a spool of the test's own, as in a server process, and stay there until
    `call_log.flush()` (no drainer thread in the tests' process)."""
    settings.USAGE_SPOOL_DIR = tmp_path / "spool"
    return calls_dir()


def a_call(account, *, request_id="req-1", status=200, route="v1/chat/completions", seconds=0.25) -> Exchange:
    """A request's record as the middleware and the call's way leave it, then ended."""
    exchange = Exchange("POST", request_id=request_id)
    exchange.route, exchange.status = route, status
    if account is not None:
        exchange.account_id, exchange.group_id = account.pk, account.group_id
    token = current.set(exchange)
    try:
        call_facts.model_asked("oa/echo-1")
        target = type("T", (), {"public_id": "oa/echo-1", "server": type("S", (), {"name": "oa"})})
        call_facts.attempted(target, call_facts.OK, status=200, seconds=0.01)
        exchange.metered("oa/echo-1", 7, 3, 1234)
    finally:
        current.reset(token)
    record_call(exchange, seconds, status)
    return exchange


def test_it_spools_one_line_per_call_and_writes_it_once_however_often_replayed(owner, spooled):
    a_call(owner, request_id="req-1")
    [line] = spooled_lines("req-1")
    assert not CallRecord.objects.exists()  # nothing on the call's way reaches the database
    [name] = [p.name for p in spooled.glob("*" + SUFFIX)]
    shutil.copy(spooled / name, spooled / f"1-left-behind{SUFFIX}")  # a file replayed after a crash
    assert call_log.flush(timeout=2)
    assert call_log.flush(timeout=2)
    call = CallRecord.objects.get()
    assert (call.key, call.account_id, call.group_id, call.surface, call.model_requested, call.model, call.status,
            call.outcome, call.input_tokens, call.output_tokens, call.cost_units, call.latency_ms, call.request_id) == (
        line["k"], owner.pk, owner.group_id, "chat.completions", "oa/echo-1", "oa/echo-1", 200, "ok", 7, 3, 1234,
        250.0, "req-1")
    assert call.attempts == [{"model": "oa/echo-1", "server": "oa", "outcome": "ok", "status": 200, "error": None,
                              "ttfb_ms": 10.0}]
    assert list(spooled.glob("*" + SUFFIX)) == []


def test_a_route_that_is_no_call_is_not_recorded(owner, spooled):
    a_call(owner, route="api/v1/usage")
    a_call(owner, route=None)
    assert call_log.flush(timeout=2)
    assert not CallRecord.objects.exists()


def test_calls_without_a_credential_are_bounded_per_minute(db, spooled, monkeypatch):
    clock = SimpleNamespace(now=600.0)  # the process's monotonic clock, in seconds: minute 10
    monkeypatch.setattr(call_log_module, "time", SimpleNamespace(monotonic=lambda: clock.now, time=time.time,
                                                                  sleep=time.sleep))
    for n in range(UNAUTHENTICATED_PER_MINUTE + 5):
        a_call(None, request_id=f"anon-{n}", status=401)
    clock.now += 60  # the next minute: some more
    for n in range(3):
        a_call(None, request_id=f"later-{n}", status=401)
    a_call(AccountFactory(), request_id="with-a-key", status=429)  # an identified caller is never bounded
    assert call_log.flush(timeout=5)
    assert CallRecord.objects.filter(account=None).count() == UNAUTHENTICATED_PER_MINUTE + 3
    assert CallRecord.objects.filter(request_id="with-a-key").exists()


def test_a_deleted_account_drops_its_calls_and_a_deleted_group_leaves_the_column_empty(spooled, group):
    gone = AccountFactory()
    kept = AccountFactory(group=AccountGroupFactory(name="short-lived"))
    a_call(gone, request_id="gone")
    a_call(kept, request_id="kept")
    gone.delete()
    doomed = kept.group
    kept.group = group
    kept.save()
    doomed.delete()
    assert call_log.flush(timeout=2)
    assert list(CallRecord.objects.values_list("request_id", "account_id", "group_id")) == [("kept", kept.pk, None)]


def test_a_line_that_cannot_be_read_is_skipped_and_the_others_written(owner, spooled):
    spooled.mkdir(parents=True)
    a_call(owner, request_id="good")
    (spooled / f"999999-dead{SUFFIX}").write_text('{"k": "x", "t": "not a time"}\n{"cut short')
    assert call_log.flush(timeout=2)
    assert list(CallRecord.objects.values_list("request_id", flat=True)) == ["good"]


def test_the_database_down_keeps_the_calls_until_it_answers(owner, spooled, monkeypatch):
    from django.db import OperationalError

    def down(*args, **kwargs):
        raise OperationalError("server closed the connection unexpectedly")

    a_call(owner, request_id="kept-1")
    monkeypatch.setattr("gateway.usage.call_records._write", down)
    assert not call_log.drain(scan=True)  # never raises
    assert spooled_lines("kept-1")
    monkeypatch.undo()
    assert call_log.flush(timeout=2)
    assert CallRecord.objects.get().request_id == "kept-1"


def test_the_drain_is_a_step_of_the_usage_drainer(spooled, owner):
    assert call_log_module.drain in usage_writer.after_cycle  # gateway/apps.py
    a_call(owner, request_id="by-the-drainer")
    assert usage_writer.flush(timeout=2)
    assert CallRecord.objects.get().request_id == "by-the-drainer"


def test_in_process_a_call_is_spooled_and_written_by_the_flush(client, transactional_db):
    """In the tests' process as in a server: a refused call's line is in the spool when the answer is,
    and in the database once the process's buffers are written (its drainer's step, by hand here)."""
    response = client.post("/v1/chat/completions", {"model": "oa/echo-1", "messages": HELLO},
                           content_type="application/json", headers={"Authorization": "Bearer wrong",
                                                                     "X-Request-Id": "in-process"})
    assert response.status_code == 401
    assert spooled_lines("in-process") and not CallRecord.objects.exists()
    assert flush_all()
    call = CallRecord.objects.get(request_id="in-process")
    assert (call.account_id, call.status, call.outcome, call.error_code) == (None, 401, "refused", "invalid_api_key")


@pytest.mark.django_db(transaction=True)
def test_a_gateway_killed_after_the_answer_loses_no_call_and_doubles_none(upstream):  # noqa: F811
    """A web process whose drainer would not write for an hour answers a call and is SIGKILLed: its spool
    file, taken over by another process, writes the call once, and a copy of it replayed writes nothing."""
    account = AccountFactory(group=AccountGroupFactory(api_access=True))
    server = ModelServerFactory(name="oa", kind="openai", base_url=f"{upstream.url}/v1")
    ModelFactory(server=server, name="echo-1", is_default=True)
    port = free_port()
    args = [sys.executable, "-m", "uvicorn", "gateway.asgi:application", "--host", "127.0.0.1", "--port", str(port),
            "--log-level", "warning"]
    env = child_env(USAGE_FLUSH_SECONDS="3600", USAGE_ORPHAN_SCAN_SECONDS="3600", REGISTRY_TTL_SECONDS="0")

    with server_process(args, name=f"killed-{port}", ready=answers_on(port), env=env) as proc:
        r = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json={"model": "oa/echo-1", "messages": HELLO},
                       headers={"Authorization": f"Bearer {api_key_for(account)}", "X-Request-Id": "before-kill"},
                       timeout=30)
        assert r.status_code == 200
        deadline = time.monotonic() + 10
        while not spooled_lines("before-kill"):  # spooled when the request ended
            assert time.monotonic() < deadline, "the call was not spooled"
            time.sleep(0.02)
        [own] = [p for p in calls_dir().glob(f"{proc.pid}-*{SUFFIX}")]
        shutil.copy(own, calls_dir() / f"1-copy-of-the-killed{SUFFIX}")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    assert call_log.flush(timeout=10)  # this process takes the dead one's file (and the copy) over
    call = call_of("before-kill")
    assert (call.account_id, call.status, call.outcome, call.model) == (account.pk, 200, "ok", "oa/echo-1")
    assert call_log.flush(timeout=10)
    assert CallRecord.objects.filter(request_id="before-kill").count() == 1
    wait_for_quiet_database()
