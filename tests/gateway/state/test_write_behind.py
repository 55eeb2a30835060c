"""The one write-behind helper (gateway/state/write_behind.py) and the registry of per-process state
(gateway/state/per_process.py): a failing write is retried with a growing pause and logged once, a
forked child starts empty with a thread of its own, what is buffered is written at exit, and
`reset_all` empties every buffer and cache the process registered."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import time
from datetime import datetime, timezone

import pytest

from gateway.state import per_process, write_behind
from gateway.state.write_behind import LogOnce, WriteBehind
from tests.faults.services import wait_for
from tests.servers import ROOT, child_env, wait_for_quiet_database

logger = logging.getLogger("tests.write_behind")


@pytest.fixture
def threads(monkeypatch):
    """Buffers start their threads, as in a server process (the tests' process starts none)."""
    monkeypatch.setattr(write_behind, "background", True)


@pytest.fixture
def made():
    """Buffers a test makes, closed at its end (their threads stopped, out of the registries)."""
    buffers: list[WriteBehind] = []
    yield buffers
    for buffer in buffers:
        buffer.close()


def a_buffer(made, write, **options) -> WriteBehind:
    options.setdefault("log", LogOnce(logger, "test buffer kept for now (%s)", "test buffer written again"))
    buffer = WriteBehind(f"test-{len(made)}", write, **options)
    made.append(buffer)
    return buffer


def test_the_pause_doubles_after_each_failure_within_its_bounds(made):
    buffer = a_buffer(made, lambda: None, every=0.5, backoff_max=3.0)
    assert buffer.pause() == 0.5
    buffer.failures = 1
    assert buffer.pause() == 1.0
    buffer.failures = 2
    assert buffer.pause() == 2.0
    buffer.failures = 5
    assert buffer.pause() == 3.0  # at most backoff_max...
    slow = a_buffer(made, lambda: None, every=10.0, backoff_max=3.0)
    slow.failures = 1
    assert slow.pause() == 10.0  # ...and never less than every


def test_a_failing_write_is_retried_with_backoff_and_logged_once(made, threads, caplog):
    attempts: list[float] = []
    written: list[dict] = []

    def write(taken):
        attempts.append(time.monotonic())
        if len(attempts) <= 4:
            raise ConnectionError("the database is away")
        written.append(dict(taken))
        taken.clear()

    buffer = a_buffer(made, write, merge=lambda old, new: old + new, every=0.02, backoff_max=0.16)
    with caplog.at_level(logging.WARNING, logger="tests.write_behind"):
        buffer.put("m", 1)
        buffer.put("m", 2)
        wait_for(lambda: attempts, 10, "a first write", interval=0.005)
        buffer.put("m", 4)
        buffer.put("n", 1)
        wait_for(lambda: written, 10, "a write that succeeds", interval=0.005)
        # the thread logs the end of the failures once its write has returned, just after `written` grew
        wait_for(lambda: any(r.getMessage() == "test buffer written again" for r in caplog.records), 10,
                 "the end of the failures logged", interval=0.005)
    assert written == [{"m": 7, "n": 1}]  # what failed was kept, merged with what came since
    gaps = [b - a for a, b in zip(attempts, attempts[1:])]
    assert [round(gap, 2) >= least for gap, least in zip(gaps, [0.04, 0.08, 0.16, 0.16])] == [True] * 4, gaps
    messages = [r.getMessage() for r in caplog.records if r.name == "tests.write_behind"]
    assert messages == ["test buffer kept for now (ConnectionError: the database is away)",
                        "test buffer written again"]  # the first failure of the run, then its end
    assert buffer.failures == 0 and buffer.pause() == 0.02
    assert buffer.buffer == {}


def test_a_flush_that_fails_keeps_what_the_write_did_not_take(made):
    def write(taken):
        del taken["written"]
        raise ConnectionError("gone halfway")

    buffer = a_buffer(made, write, merge=max, every=1.0)
    buffer.put("written", 1)
    buffer.put("kept", 5)
    with pytest.raises(ConnectionError):
        buffer.flush()
    assert buffer.buffer == {"kept": 5}
    assert buffer.flush_quietly() is False  # never raises
    assert buffer.pending()


def test_after_fork_the_child_has_an_empty_buffer_and_a_thread_of_its_own(made, threads, tmp_path):
    out = tmp_path / "written"
    interval = [3600.0]  # the parent's thread writes nothing during the test; the child's at once

    def write(taken):
        with open(out, "a") as file:
            file.write(json.dumps({"pid": os.getpid(), "taken": taken}) + "\n")
        taken.clear()

    buffer = a_buffer(made, write, merge=max, every=lambda: interval[0])
    buffer.put("parent's", 1)
    parent_thread = buffer.thread
    assert parent_thread is not None and parent_thread.is_alive()
    read, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, write what it buffers from its own thread, leave at once
        try:
            report = {"buffer": dict(buffer.buffer), "thread": buffer.thread is not None, "failures": buffer.failures}
            interval[0] = 0.02
            buffer.put("child's", 2)
            report["own_thread"] = buffer.thread not in (None, parent_thread) and buffer.thread.is_alive()
            wait_for(lambda: out.exists() and "child's" in out.read_text(), 10, "the child's write", interval=0.005)
            os.write(write_end, json.dumps(report).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read) as pipe:
        report = json.loads(pipe.read() or "{}")
    os.waitpid(pid, 0)
    assert report == {"buffer": {}, "thread": False, "failures": 0, "own_thread": True}
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(line["pid"], line["taken"]) for line in lines] == [(pid, {"child's": 2})]
    assert buffer.buffer == {"parent's": 1} and buffer.thread is parent_thread  # the parent's, for its own thread


def test_what_a_buffer_holds_is_written_at_exit(tmp_path):
    """A process that ends normally writes what its buffers hold, whatever their interval."""
    out = tmp_path / "written"
    code = textwrap.dedent(f"""
        import logging
        from gateway.state.write_behind import LogOnce, WriteBehind

        def write(taken):
            with open({str(out)!r}, "a") as file:
                file.write(repr(sorted(taken.items())) + "\\n")
            taken.clear()

        buffer = WriteBehind("exit-test", write, merge=max, every=3600,
                             log=LogOnce(logging.getLogger("x"), "kept (%s)", "written"))
        buffer.put("a", 1)
        buffer.put("b", 2)
        buffer.put("a", 3)
    """)
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert out.read_text() == "[('a', 3), ('b', 2)]\n"


@pytest.mark.django_db(transaction=True)
def test_a_process_writes_its_failure_counts_at_exit(settings):
    """The same with a buffer of the gateway: a process whose thread would not write for an hour
    counts two failures and ends; the counts are in the database."""
    from gateway.models import CallFailureDaily

    code = ("import django; django.setup()\n"
            "from gateway.usage import call_failures\n"
            "call_failures.count(model='exit/m', kind=call_failures.FELL_THROUGH)\n"
            "call_failures.count(model='exit/m', kind=call_failures.FELL_THROUGH)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=child_env(USAGE_FLUSH_SECONDS="3600"),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert list(CallFailureDaily.objects.values_list("model", "kind", "count")) == [("exit/m", "fell_through", 2)]
    wait_for_quiet_database()


def test_reset_all_empties_every_registered_buffer_and_cache(owner, redis_url, made, tmp_path, settings):
    from accounts import key_use, principal_cache
    from gateway.calls.metering import meter
    from gateway.limits import quotas
    from gateway.registry import server_health
    from gateway.state import loads
    from gateway.usage import call_failures
    from gateway.usage.call_log import call_log
    from gateway.usage.writer import usage_writer
    from tests.factories import api_key_for

    settings.USAGE_SPOOL_DIR = tmp_path / "spool"
    server = type("Server", (), {"id": 7})
    key_use.note_key_use(owner.pk, api_key_for(owner))
    server_health.failed(server, "connect failed")
    assert server_health.failing(7)
    loads.started(7)
    call_failures.count(model="oa/echo-1", kind=call_failures.FELL_THROUGH)
    meter(account_id=owner.pk, model="oa/echo-1", surface="messages", input_tokens=1, output_tokens=1)
    call_log.submit({"k": "k-1", "t": time.time(), "a": owner.pk, "s": "messages", "st": 200, "o": "ok", "l": 1.0})
    quotas.quota_counters_unsure(["tokens:{a1}:day:1"])
    principal_cache.remember("a-token", object(), expires_at=datetime.max.replace(tzinfo=timezone.utc), version=1)
    assert principal_cache.cached("a-token") is not None
    mine = a_buffer(made, lambda taken: taken.clear(), merge=max, every=3600)
    mine.put("x", 1)
    names = per_process.names()
    for name in ("api-key-use", "server-health", "deployment-loads", "call-failures", "usage-drainer", "calls-log",
                 "unsure-quota-counters", "credentials", "cooldowns", "model-registry", mine.name):
        assert name in names
    buffers = [key_use._uses, server_health._news, call_failures._counts, usage_writer.drainer, mine]
    assert all(buffer.pending() for buffer in buffers) and call_log.pending()
    per_process.reset_all()
    assert not any(buffer.pending() for buffer in buffers) and not call_log.pending()
    assert loads.in_flight(7) == 0 and not server_health.failing(7)
    assert quotas.unsure_counters == set() and principal_cache.cached("a-token") is None
    assert list((tmp_path / "spool").rglob("*.spool")) == []  # this process's spooled lines went with the test


def test_without_nul_replaces_the_character_a_database_refuses_wherever_it_is():
    at = datetime(2026, 1, 1, tzinfo=timezone.utc)
    value = ("a\x00b", 1, None, at, ["\x00"], {"k\x00": {"v": "x\x00"}}, "\\x00 spelt out")
    assert write_behind.holds_nul(value)
    assert write_behind.without_nul(value) == (
        "a\ufffdb", 1, None, at, ["\ufffd"], {"k\ufffd": {"v": "x\ufffd"}}, "\\x00 spelt out")
    assert not write_behind.holds_nul(("plain", 1, at, {"k": ["v"]}))
