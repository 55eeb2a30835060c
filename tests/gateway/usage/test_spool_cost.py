"""A usage record's cost goes through the same durable spool as its tokens: its line carries
`$` (COST_UNITS) and `ci` (the provider's cached input tokens), the row `cost_units` and
`cached_input_tokens`, exactly (integers); a line spooled before they existed, and a row of an older
shape, cost nothing. The daily roll-up adds the cost up with the tokens."""

import json
from decimal import Decimal

from gateway.calls.metering import meter
from gateway.models import UsageDaily, UsageRecord
from gateway.registry.prices import Price, money
from gateway.usage.spool import SUFFIX
from gateway.usage.writer import insert_rows, record_from_line, usage_writer
from tests.gateway.usage.test_spool_cached import spool_dir, spooled_lines  # noqa: F401 — a fixture

PRICE = Price(input=30_000, cached_input=3_000, output=150_000)  # 3, 0.3 and 15 per million tokens


def test_a_records_cost_is_spooled_with_it_and_written_exactly(owner, spool_dir):  # noqa: F811
    meter(account_id=owner.pk, model="an/claude", surface="messages", input_tokens=1_000_003, output_tokens=7,
          request_id="req-paid", price=PRICE, cached_input_tokens=1_000_000)
    meter(account_id=owner.pk, model="oa/free", surface="chat.completions", input_tokens=5, output_tokens=5,
          request_id="req-free", price=Price())
    paid, free = spooled_lines(spool_dir)
    # 3 × 3 + 1,000,000 × 0.3 + 7 × 15 per million: 0.300114
    assert (paid["$"], paid["ci"]) == (3_001_140_000, 1_000_000)
    assert "$" not in free and "ci" not in free
    assert usage_writer.flush(timeout=1)
    record = UsageRecord.objects.get(request_id="req-paid")
    assert (record.cost_units, record.cached_input_tokens) == (3_001_140_000, 1_000_000)
    assert money(record.cost_units) == Decimal("0.300114")
    assert UsageRecord.objects.get(request_id="req-free").cost_units == 0
    day = UsageDaily.objects.get(account=owner, model="an/claude")
    assert (day.calls, day.cost_units) == (1, 3_001_140_000)


def test_a_line_spooled_before_the_cost_existed_costs_nothing(owner, spool_dir):  # noqa: F811
    spool_dir.mkdir(parents=True)
    old = {"k": "old-1", "a": owner.pk, "m": "oa/echo-1", "s": "chat.completions", "i": 4, "o": 2, "r": "req",
           "t": "2026-11-24T10:00:00+00:00", "c": 1}
    (spool_dir / f"999996-dead{SUFFIX}").write_text(json.dumps(old) + "\n")
    assert (record_from_line(old).cost_units, record_from_line(old).cached_input_tokens) == (0, 0)
    assert usage_writer.flush(timeout=1)
    record = UsageRecord.objects.get(key="old-1")
    assert (record.cached, record.cost_units, record.cached_input_tokens) == (True, 0, 0)


def test_rows_of_each_older_shape_are_written_at_no_cost(owner):
    at = UsageRecord._meta.get_field("created_at").to_python("2026-11-24T10:00:00+00:00")
    row = ("k-1", owner.pk, "oa/echo-1", "chat.completions", 3, 1, "req", at)
    insert_rows([row, ("k-2", *row[1:], True), ("k-3", *row[1:], False, 2, 99)])
    written = {key: (cached, ci, cost) for key, cached, ci, cost in UsageRecord.objects.filter(account=owner)
               .values_list("key", "cached", "cached_input_tokens", "cost_units")}
    assert written == {"k-1": (False, 0, 0), "k-2": (True, 0, 0), "k-3": (False, 2, 99)}
    assert UsageDaily.objects.get(account=owner).cost_units == 99
