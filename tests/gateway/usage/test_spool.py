"""Usage records are never held only in memory: each process appends them to a
spool file of its own, which is written to the database idempotently (by the record's key), by
this process or, once it is gone, by any other."""

import json
import logging
import os
import shutil
import subprocess
import sys
import time

import pytest
from django.db import OperationalError

from gateway.calls.metering import meter
from gateway.models import UsageRecord
from gateway.state import write_behind
from gateway.usage.spool import SUFFIX, Spool
from gateway.usage.writer import UsageWriter, database_tag, usage_writer
from tests.factories import AccountFactory
from tests.servers import ROOT


@pytest.fixture
def spool_dir(settings, tmp_path):
    """Records go to the spool, as in a server process, and stay there until `usage_writer.flush()`
    (no drainer thread in the tests' process: this test's data is in its own transaction). The
    directory of this database's spool files."""
    settings.USAGE_SPOOL_DIR = tmp_path / "spool"
    return tmp_path / "spool" / database_tag()


def spend(account, tokens, **extra):
    meter(account_id=account.pk, model="oa/echo-1", surface="chat.completions", input_tokens=tokens,
          output_tokens=1, **extra)


def line(account, key, tokens=5):
    return json.dumps({"k": key, "a": account.pk, "m": "oa/echo-1", "s": "chat.completions", "i": tokens, "o": 0,
                       "r": f"req-{key}", "t": "2026-11-24T10:00:00+00:00"}) + "\n"


def files(directory):
    return sorted(p.name for p in directory.glob("*" + SUFFIX))


def keys_of(account):
    return sorted(UsageRecord.objects.filter(account=account).values_list("key", flat=True))


def test_a_record_is_on_disk_before_meter_returns_and_in_the_database_after_a_flush(owner, spool_dir):
    spend(owner, 3, request_id="req-1")
    assert not UsageRecord.objects.exists()
    [name] = files(spool_dir)
    [record] = [json.loads(text) for text in (spool_dir / name).read_text().splitlines()]
    assert (record["a"], record["i"], record["o"], record["r"]) == (owner.pk, 3, 1, "req-1")
    assert usage_writer.flush(timeout=1)
    [row] = UsageRecord.objects.filter(account=owner)
    assert (row.input_tokens, row.output_tokens, row.request_id, row.key) == (3, 1, "req-1", record["k"])
    assert files(spool_dir) == []


def test_a_spool_replayed_twice_writes_each_record_once(owner, spool_dir):
    for tokens in (1, 2, 3):
        spend(owner, tokens)
    [name] = files(spool_dir)
    # the same file left behind, as when a process dies between the database's commit and the unlink
    shutil.copy(spool_dir / name, spool_dir / f"1-left-behind{SUFFIX}")
    assert usage_writer.flush(timeout=1)
    assert usage_writer.flush(timeout=1)
    assert sorted(UsageRecord.objects.filter(account=owner).values_list("input_tokens", flat=True)) == [1, 2, 3]
    assert files(spool_dir) == []


def test_the_file_of_a_dead_process_is_written_by_another_and_removed(owner, spool_dir):
    spool_dir.mkdir(parents=True)
    (spool_dir / f"999999-dead{SUFFIX}").write_text(line(owner, "a") + line(owner, "b"))  # nobody holds its lock
    assert usage_writer.flush(timeout=1)
    assert keys_of(owner) == ["a", "b"]
    assert files(spool_dir) == []


SPOOLER = """
import json, os, signal, sys
from gateway.usage.spool import Spool
spool = Spool(sys.argv[1])
for key in sys.argv[3:]:
    spool.append(json.loads(sys.argv[2].replace("KEY", key)))
print("spooled", flush=True)
if sys.argv[3] == "killed":
    os.kill(os.getpid(), signal.SIGKILL)
sys.stdin.read()  # alive, holding its file, until its stdin closes
"""


def test_a_live_process_keeps_its_file_and_a_killed_ones_is_taken_over(owner, spool_dir):
    template = line(owner, "KEY").strip()

    def spooler(*keys):
        proc = subprocess.Popen([sys.executable, "-c", SPOOLER, str(spool_dir), template, *keys], cwd=ROOT,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "spooled"
        return proc

    alive = spooler("alive-1", "alive-2")
    killed = spooler("killed", "killed-2")
    assert killed.wait(timeout=10) == -9
    try:
        assert usage_writer.flush(timeout=1)
        assert keys_of(owner) == ["killed", "killed-2"]  # the live process's file is its own
        assert len(files(spool_dir)) == 1
    finally:
        alive.kill()
        alive.wait(timeout=10)
        alive.stdout.close()
        alive.stdin.close()
        killed.stdout.close()
        killed.stdin.close()
    assert usage_writer.flush(timeout=1)  # SIGKILLed too, now: its lock went with it
    assert keys_of(owner) == ["alive-1", "alive-2", "killed", "killed-2"]
    assert files(spool_dir) == []


def test_a_last_line_cut_short_by_a_kill_is_skipped(owner, spool_dir):
    spool_dir.mkdir(parents=True)
    cut = line(owner, "c")[:40]
    (spool_dir / f"999999-cut{SUFFIX}").write_text(line(owner, "a") + line(owner, "b") + cut)
    assert usage_writer.flush(timeout=1)
    assert keys_of(owner) == ["a", "b"]
    assert files(spool_dir) == []


def test_the_database_failing_keeps_the_records_until_it_answers(owner, spool_dir, monkeypatch, caplog):
    def database_down(*args, **kwargs):
        raise OperationalError("server closed the connection unexpectedly")

    spend(owner, 4)
    spend(owner, 5)
    with monkeypatch.context() as patched:
        patched.setattr("gateway.usage.writer._write_rows", database_down)
        with caplog.at_level(logging.WARNING, logger="gateway.usage.writer"):
            assert not usage_writer.flush(timeout=0)  # never raises
            spend(owner, 6)
            assert not usage_writer.flush(timeout=0)
        outage_logs = [r for r in caplog.records if "kept in the spool" in r.getMessage()]
        assert len(outage_logs) == 1  # logged once per outage
        assert not UsageRecord.objects.exists()
        assert files(spool_dir)
    assert usage_writer.flush(timeout=1)
    assert sorted(UsageRecord.objects.filter(account=owner).values_list("input_tokens", flat=True)) == [4, 5, 6]
    assert files(spool_dir) == []


def test_a_spool_that_cannot_be_written_falls_back_to_the_database(owner, settings, tmp_path):
    (tmp_path / "not-a-directory").write_text("")
    settings.USAGE_SPOOL_DIR = tmp_path / "not-a-directory"
    spend(owner, 8)  # does not raise
    assert UsageRecord.objects.get(account=owner).input_tokens == 8


def test_a_record_of_a_deleted_account_is_dropped_and_the_others_written(owner, spool_dir, caplog):
    gone = AccountFactory()
    spend(gone, 1)
    spend(owner, 2)
    gone.delete()
    with caplog.at_level(logging.WARNING, logger="gateway.usage.writer"):
        assert usage_writer.flush(timeout=1)
    assert list(UsageRecord.objects.values_list("input_tokens", flat=True)) == [2]
    assert any("deleted account" in r.getMessage() for r in caplog.records)
    assert files(spool_dir) == []


def test_a_record_the_database_can_never_take_is_dropped_and_the_others_written(owner, spool_dir, caplog):
    """One INSERT per batch: a row with a number too large for its column fails it, and the batch is
    written row by row, the bad one logged and dropped. (A number, not a text too long: SQLite, the
    embedded default, keeps text of any length in a varchar column.)"""
    (spool_dir).mkdir(parents=True, exist_ok=True)
    bad = json.loads(line(owner, "bad"))
    bad["i"] = 2**64  # past PostgreSQL's integer and SQLite's 64-bit INTEGER
    (spool_dir / f"999998-dead{SUFFIX}").write_text(line(owner, "a") + json.dumps(bad) + "\n" + line(owner, "b"))
    with caplog.at_level(logging.WARNING, logger="gateway.usage.writer"):
        assert usage_writer.flush(timeout=1)
    assert keys_of(owner) == ["a", "b"]
    [error] = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert error.startswith("usage record the database refuses, dropped: {'key': 'bad'")


def test_a_spooled_record_reads_back_as_it_was_written(owner, spool_dir):
    spend(owner, 7, request_id="req-7")
    [record] = [json.loads(text) for name in files(spool_dir) for text in (spool_dir / name).read_text().splitlines()]
    assert usage_writer.flush(timeout=1)
    row = UsageRecord.objects.get(account=owner)
    assert (row.key, row.model, row.surface, row.input_tokens, row.output_tokens, row.request_id) == (
        record["k"], "oa/echo-1", "chat.completions", 7, 1, "req-7")
    assert row.created_at.isoformat() == record["t"]


def test_records_are_written_once_on_sqlite_too(tmp_path):
    """The embedded default (bin/serve) inserts row by row: the same columns, the same key rule."""
    code = (
        "from datetime import datetime, timezone\n"
        "from accounts.models import Account\n"
        "from gateway.models import UsageRecord\n"
        "from gateway.usage.writer import insert_rows\n"
        "account = Account.objects.create_user('s@example.test')\n"
        "at = datetime(2026, 11, 24, 10, 0, 0, 123456, tzinfo=timezone.utc)\n"
        "rows = [(f'k{i}', account.pk, 'oa/echo-1', 'chat.completions', i, 1, 'req', at) for i in range(3)]\n"
        "insert_rows(rows)\n"
        "insert_rows(rows + [('k3', account.pk + 1, 'oa/echo-1', 'chat.completions', 9, 1, 'req', at)])\n"
        "print(sorted((r.key, r.input_tokens, r.created_at == at) for r in UsageRecord.objects.all()))\n"
    )
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'usage.sqlite3'}", "REDIS_URL": ""}
    for args in (["migrate", "--noinput", "-v", "0"], ["shell", "-c", code]):
        done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[('k0', 0, True), ('k1', 1, True), ('k2', 2, True)]"


def test_a_key_metered_twice_is_written_once(owner, spool_dir):
    spend(owner, 1, key="run-1")
    spend(owner, 1, key="run-1")
    assert usage_writer.flush(timeout=1)
    assert UsageRecord.objects.filter(account=owner).count() == 1


def test_a_file_sealed_for_replay_lets_later_records_go_to_a_new_file(tmp_path):
    spool = Spool(tmp_path)
    spool.append({"n": 1})
    seen = []
    spool.replay(seen.extend)
    spool.append({"n": 2})
    spool.replay(seen.extend)
    assert seen == [{"n": 1}, {"n": 2}]
    assert list(tmp_path.glob("*" + SUFFIX)) == []
    spool.close()


@pytest.mark.django_db(transaction=True)
def test_the_drainer_thread_writes_the_spool_and_takes_over_dead_files(settings, tmp_path, monkeypatch):
    """A process's own drainer: it takes over the files of dead processes when it starts, and
    writes what is spooled within USAGE_FLUSH_SECONDS."""
    monkeypatch.setattr(write_behind, "background", True)  # as in a server process
    settings.USAGE_SPOOL_DIR = tmp_path / "spool"
    settings.USAGE_FLUSH_SECONDS = 0.02
    account = AccountFactory()
    directory = tmp_path / "spool" / database_tag()
    directory.mkdir(parents=True)
    (directory / f"999999-dead{SUFFIX}").write_text(line(account, "orphan"))
    writer = UsageWriter()
    try:
        writer.submit(UsageRecord(account_id=account.pk, model="oa/echo-1", surface="messages", input_tokens=2,
                                  output_tokens=3, key="fresh", created_at=_now()))
        deadline = time.monotonic() + 10
        while keys_of(account) != ["fresh", "orphan"] or files(directory):
            assert time.monotonic() < deadline, (keys_of(account), files(directory))
            time.sleep(0.02)
    finally:
        writer.close()
    assert os.listdir(directory) == []


def _now():
    from django.utils import timezone

    return timezone.now()
