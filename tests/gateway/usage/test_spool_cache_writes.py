"""The input tokens a provider wrote to its prompt cache go through the same durable spool as the
other counts: the line carries `cw`, the row `cache_write_input_tokens`, and the cost prices them at
the cache-write price. A line spooled by the release before (no `cw`) and a row of the shape before
are written, with no cache writes and the cost they carry."""

import json

from gateway.calls.metering import meter
from gateway.models import UsageRecord
from gateway.registry.prices import Price
from gateway.usage.spool import SUFFIX
from gateway.usage.writer import insert_rows, record_from_line, usage_writer
from tests.gateway.usage.test_spool_cached import spool_dir, spooled_lines  # noqa: F401 — a fixture

PRICE = Price(input=30_000, cached_input=3_000, output=150_000, cache_write=37_500)  # 3, 0.3, 15, 3.75 per million


def test_cache_writes_are_spooled_priced_and_written(owner, spool_dir):  # noqa: F811
    meter(account_id=owner.pk, model="an/claude", surface="messages", input_tokens=1_000, output_tokens=10,
          request_id="req-writes", price=PRICE, cached_input_tokens=100, cache_write_input_tokens=500)
    meter(account_id=owner.pk, model="an/claude", surface="messages", input_tokens=4, output_tokens=1,
          request_id="req-more-than-the-input", price=PRICE, cached_input_tokens=3, cache_write_input_tokens=9)
    writes, capped = spooled_lines(spool_dir)
    expected = 400 * 30_000 + 100 * 3_000 + 500 * 37_500 + 10 * 150_000
    assert (writes["ci"], writes["cw"], writes["$"]) == (100, 500, expected)
    assert (capped["ci"], capped["cw"], capped["$"]) == (3, 1, 3 * 3_000 + 37_500 + 150_000)  # what the input holds
    assert usage_writer.flush(timeout=1)
    record = UsageRecord.objects.get(request_id="req-writes")
    assert (record.input_tokens, record.cached_input_tokens, record.cache_write_input_tokens, record.cost_units) \
        == (1_000, 100, 500, expected)


def test_a_line_without_cache_writes_has_none_and_no_key_for_them(owner, spool_dir):  # noqa: F811
    meter(account_id=owner.pk, model="oa/echo-1", surface="chat.completions", input_tokens=5, output_tokens=5,
          request_id="req-plain", price=PRICE)
    (line,) = spooled_lines(spool_dir)
    assert "cw" not in line


def test_a_line_spooled_by_the_release_before_is_still_written(owner, spool_dir):  # noqa: F811
    spool_dir.mkdir(parents=True)
    old = {"k": "old-cw", "a": owner.pk, "m": "an/claude", "s": "messages", "i": 6, "o": 2, "r": "req-old",
           "t": "2026-11-24T10:00:00+00:00", "ci": 2, "$": 99, "tg": {"app": "billing"}}
    (spool_dir / f"999995-dead{SUFFIX}").write_text(json.dumps(old) + "\n")
    assert record_from_line(old).cache_write_input_tokens == 0
    assert usage_writer.flush(timeout=1)
    record = UsageRecord.objects.get(key="old-cw")
    assert (record.cached_input_tokens, record.cache_write_input_tokens, record.cost_units, record.tags) == (
        2, 0, 99, {"app": "billing"})


def test_a_row_of_the_shape_before_has_no_cache_writes(owner):
    at = UsageRecord._meta.get_field("created_at").to_python("2026-11-24T10:00:00+00:00")
    row = ("k-1", owner.pk, "an/claude", "messages", 9, 1, "req", at, False, 2, 99, {})
    insert_rows([row, ("k-2", *row[1:], 5)])
    written = dict(UsageRecord.objects.filter(account=owner).values_list("key", "cache_write_input_tokens"))
    assert written == {"k-1": 0, "k-2": 5}
