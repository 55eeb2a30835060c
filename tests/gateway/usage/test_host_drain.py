"""The host's drainer: while a process of the host holds the drainer's lock on a spool folder, the other
processes' periodic cycles let their files go instead of writing them, and the drainer takes them over;
without it, each writes its own, as before. A flush and the write at exit always write."""

import json
import logging
import subprocess
import sys

import pytest

from gateway.models import CallRecord, UsageRecord
from gateway.usage import call_log as call_log_module
from gateway.usage import host_drain
from gateway.usage.call_log import CallLog
from gateway.usage.spool import RELEASED, SUFFIX, Spool
from gateway.usage.writer import UsageWriter, database_tag, usage_writer
from tests.factories import AccountFactory
from tests.servers import ROOT

HOLDER = """
import sys
from pathlib import Path
from gateway.usage.host_drain import DrainerLock
assert DrainerLock().hold(Path(sys.argv[1]))
print("held", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def folder(db, settings, tmp_path):
    settings.USAGE_SPOOL_DIR = tmp_path / "spool"
    return tmp_path / "spool" / database_tag()


@pytest.fixture
def drainer_elsewhere(folder):
    """Another process of the host holding the drainer's lock on this database's spool folder."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder)], cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    yield proc
    proc.stdin.close()
    proc.wait(timeout=10)
    proc.stdout.close()


@pytest.fixture
def writers():
    made = []

    def make():
        writer = UsageWriter()
        log = CallLog()
        writer.after_cycle.append(log.drain)
        made.append((writer, log))
        return writer, log

    yield make
    for writer, log in made:
        writer.close()
        log.forget()


def record(account, key):
    from django.utils import timezone

    return UsageRecord(account_id=account.pk, model="oa/echo-1", surface="chat.completions", input_tokens=2,
                       output_tokens=3, key=key, request_id=f"req-{key}", created_at=timezone.now())


def call_line(account, request_id):
    return {"k": request_id * 2, "t": 1764400000.0, "a": account.pk, "g": account.group_id, "s": "chat.completions",
            "m": "oa/echo-1", "st": 200, "o": "ok", "l": 1.5, "r": request_id}


def names(directory):
    """The spool files that hold records (a file made ahead for the next append holds none)."""
    return sorted(p.name for p in directory.glob("*" + SUFFIX) if p.stat().st_size) if directory.exists() else []


def test_the_lock_says_whether_a_drainer_runs(folder):
    assert not host_drain.present(folder)  # no lock file yet
    lock = host_drain.DrainerLock()
    assert lock.hold(folder)
    assert host_drain.present(folder)
    assert host_drain.DrainerLock().hold(folder) is False  # one holder at a time
    lock.let_go()
    assert not host_drain.present(folder)


def test_with_a_drainer_a_cycle_lets_the_files_go_and_the_drainer_writes_them(folder, drainer_elsewhere, writers,
                                                                              caplog):
    account = AccountFactory()
    web, web_calls = writers()
    web.submit(record(account, "u1"))
    web_calls.submit(call_line(account, "c1"))
    web.drainer.flush(periodic=True)  # the thread's turn

    assert not UsageRecord.objects.exists() and not CallRecord.objects.exists()  # written by no one yet
    released = names(folder) + names(folder / "calls")
    assert len(released) == 2 and all(name.endswith(RELEASED) for name in released), released
    assert web.drainer.pending()  # let go, not yet taken over: the write at exit would take them

    drainer_elsewhere.stdin.close()  # that drainer gone; this test's process drains the host now
    drainer_elsewhere.wait(timeout=10)
    host, _ = writers()
    host.drains_host = True
    with caplog.at_level(logging.INFO, logger="gateway.usage.spool"):
        host.drainer.flush(periodic=True)
    assert host_drain.present(folder)
    assert list(UsageRecord.objects.values_list("key", flat=True)) == ["u1"]
    assert list(CallRecord.objects.values_list("request_id", flat=True)) == ["c1"]
    assert names(folder) == [] and names(folder / "calls") == []
    assert "process that is gone" not in caplog.text  # a hand-over, not a dead process's file
    assert not web.drainer.pending()


def test_without_a_drainer_the_cycle_writes_its_own_files(folder, writers):
    account = AccountFactory()
    web, web_calls = writers()
    web.submit(record(account, "u1"))
    web_calls.submit(call_line(account, "c1"))
    web.drainer.flush(periodic=True)
    assert list(UsageRecord.objects.values_list("key", flat=True)) == ["u1"]
    assert list(CallRecord.objects.values_list("request_id", flat=True)) == ["c1"]
    assert names(folder) == [] and names(folder / "calls") == []


def test_a_flush_writes_even_while_a_drainer_runs(folder, drainer_elsewhere, writers):
    """The write at exit (and a test's flush) is not the thread's turn: the process writes its own files
    and takes over those it let go, whether the drainer is still there or stopping with it."""
    account = AccountFactory()
    web, web_calls = writers()
    web.submit(record(account, "u1"))
    web.drainer.flush(periodic=True)  # let go
    web.submit(record(account, "u2"))
    web_calls.submit(call_line(account, "c2"))
    web.drainer.write_at_exit()
    assert sorted(UsageRecord.objects.values_list("key", flat=True)) == ["u1", "u2"]
    assert list(CallRecord.objects.values_list("request_id", flat=True)) == ["c2"]
    assert names(folder) == [] and names(folder / "calls") == []


def test_a_released_file_is_made_ahead_and_read_by_its_taker(tmp_path):
    spool = Spool(tmp_path)
    spool.append({"k": "a"})
    assert spool.release() == 1
    assert spool.release() == 0  # nothing new: nothing let go, no new file made
    [released] = [p for p in tmp_path.iterdir() if p.name.endswith(RELEASED)]
    made_ahead = [p for p in tmp_path.glob("*" + SUFFIX) if not p.name.endswith(RELEASED)]
    assert len(made_ahead) == 1 and made_ahead[0].stat().st_size == 0  # the next file, ready for the next append
    assert spool.backlog().files == 1  # the empty file is not a file waiting
    spool.append({"k": "b"})
    assert made_ahead[0].read_text() == json.dumps({"k": "b"}, separators=(",", ":")) + "\n"
    taken = []
    assert Spool(tmp_path).take_over(taken.extend) == 1
    assert taken == [{"k": "a"}] and not released.exists()
    spool.close()


def test_the_usage_drainer_tells_the_calls_log_whether_it_let_go(folder, drainer_elsewhere, writers):
    """The calls log's drain is the usage cycle's step (gateway/apps.py), told what the cycle did."""
    seen = []
    web, _ = writers()
    web.after_cycle.append(lambda **cycle: seen.append(cycle["hand_off"]))
    web.drainer.flush(periodic=True)
    web.drainer.flush()
    assert seen == [True, False]
    assert call_log_module.drain in usage_writer.after_cycle
