"""A usage record answered from the response cache goes through the same durable spool:
its line carries `c`, the database row `cached`; a line spooled before the flag existed, and a row
written without it, are records not cached."""

import json

import pytest

from gateway.calls.metering import meter
from gateway.models import UsageRecord
from gateway.usage.spool import SUFFIX
from gateway.usage.writer import database_tag, insert_rows, record_from_line, usage_writer


@pytest.fixture
def spool_dir(settings, tmp_path):
    """Records stay in the spool until `usage_writer.flush()` (no drainer thread in the tests' process)."""
    settings.USAGE_SPOOL_DIR = tmp_path / "spool"
    return tmp_path / "spool" / database_tag()


def spooled_lines(directory):
    return [json.loads(text) for path in sorted(directory.glob("*" + SUFFIX)) for text in path.read_text().splitlines()]


def test_a_cached_record_is_spooled_with_its_flag_and_written_with_it(owner, spool_dir):
    meter(account_id=owner.pk, model="oa/echo-1", surface="chat.completions", input_tokens=6, output_tokens=7,
          request_id="req-hit", cached=True)
    meter(account_id=owner.pk, model="oa/echo-1", surface="chat.completions", input_tokens=6, output_tokens=7,
          request_id="req-miss")
    hit, miss = spooled_lines(spool_dir)
    assert (hit["r"], hit["c"]) == ("req-hit", 1)
    assert miss["r"] == "req-miss" and "c" not in miss
    assert usage_writer.flush(timeout=1)
    written = dict(UsageRecord.objects.filter(account=owner).values_list("request_id", "cached"))
    assert written == {"req-hit": True, "req-miss": False}


def test_a_line_spooled_before_the_flag_existed_is_not_cached(owner, spool_dir):
    spool_dir.mkdir(parents=True)
    old = {"k": "old-1", "a": owner.pk, "m": "oa/echo-1", "s": "chat.completions", "i": 4, "o": 2, "r": "req",
           "t": "2026-11-24T10:00:00+00:00"}
    (spool_dir / f"999997-dead{SUFFIX}").write_text(json.dumps(old) + "\n")
    assert record_from_line(old).cached is False
    assert usage_writer.flush(timeout=1)
    record = UsageRecord.objects.get(key="old-1")
    assert (record.cached, record.input_tokens, record.output_tokens) == (False, 4, 2)


def test_a_row_without_the_flag_is_written_as_not_cached(owner):
    row = ("k-1", owner.pk, "oa/echo-1", "chat.completions", 3, 1, "req", UsageRecord._meta.get_field("created_at")
           .to_python("2026-11-24T10:00:00+00:00"))
    insert_rows([row, ("k-2", *row[1:], True)])
    assert dict(UsageRecord.objects.filter(account=owner).values_list("key", "cached")) == {"k-1": False, "k-2": True}
