"""A batch line's call (its exchange carries a `BatchUse`, as batches/line_call.py sets it) is metered under the
line's key, at the batch price (the model's batch discount off the full cost, rounded down; a cached reply
still costs nothing) and with its batch's id, through the same spool as every record: a line metered twice
is one record. Its row in the calls log has the cost billed, and /metrics counts its spend apart
(`gateway_batch_spend`) as well as in `gateway_spend`."""

import json

import pytest

from gateway.calls.metering import BatchUse, meter
from gateway.models import CallRecord, UsageRecord
from gateway.registry.prices import Price
from gateway.state.per_process import flush_all
from gateway.usage.call_log import own_call
from gateway.usage.spool import SUFFIX
from gateway.usage.writer import insert_rows, record_from_line, usage_writer
from tests.factories import ModelFactory, ModelServerFactory
from tests.gateway.telemetry.test_metrics import samples, value
from tests.gateway.usage.test_spool_cached import spool_dir, spooled_lines  # noqa: F401 — a fixture

BATCH = "batch_0123456789abcdef01234567"
# 3 per million input tokens, 15 per million output tokens: 1,001 in and 7 out cost 0.003108 (31,080,000 units)
FULL = 1_001 * 30_000 + 7 * 150_000


@pytest.fixture
def models(db):
    server = ModelServerFactory(name="srv")
    for name, discount in (("half", 50), ("none-off", 0), ("free", 100), ("forty", 40)):
        ModelFactory(server=server, name=name, input_price="3", output_price="15", batch_discount_percent=discount)
    ModelFactory(server=server, name="odd", input_price="0.0003")  # 3 units a token, half off by default


def meter_line(owner, model: str, line_key: str, *, input_tokens: int = 1_001, output_tokens: int = 7, **fields):
    """Meter a call as a batch line's call is metered: inside its own call, whose exchange carries the batch."""
    with own_call(surface="chat.completions", account=owner, request_id=f"req-{line_key}",
                  tags={"batch": BATCH}) as exchange:
        exchange.batch = BatchUse(BATCH, line_key)
        meter(account_id=owner.pk, model=model, surface="chat.completions", input_tokens=input_tokens,
              output_tokens=output_tokens, request_id=f"req-{line_key}", **fields)


def records(owner) -> dict[str, tuple]:
    return {key: (batch_id, cost) for key, batch_id, cost in
            UsageRecord.objects.filter(account=owner).values_list("key", "batch_id", "cost_units")}


def test_a_lines_record_takes_its_key_and_batch_and_the_batch_price(owner, models, spool_dir):  # noqa: F811
    meter_line(owner, "srv/half", "batch-line-1")
    meter_line(owner, "srv/none-off", "batch-line-2")
    meter_line(owner, "srv/free", "batch-line-3")
    meter_line(owner, "srv/forty", "batch-line-4")
    meter_line(owner, "srv/odd", "batch-line-5", input_tokens=1, output_tokens=0)  # 3 units: 1.5, rounded down
    meter(account_id=owner.pk, model="srv/half", surface="chat.completions", input_tokens=1_001, output_tokens=7,
          request_id="req-live")
    lines = spooled_lines(spool_dir)
    assert [(line["k"], line.get("b"), line.get("$")) for line in lines[:5]] == [
        ("batch-line-1", BATCH, FULL // 2), ("batch-line-2", BATCH, FULL), ("batch-line-3", BATCH, None),
        ("batch-line-4", BATCH, FULL * 60 // 100), ("batch-line-5", BATCH, 1)]
    live = lines[5]
    assert "b" not in live and live["$"] == FULL and len(live["k"]) == 32  # a key of its own
    assert usage_writer.flush(timeout=1)
    assert records(owner) == {"batch-line-1": (BATCH, 15_540_000), "batch-line-2": (BATCH, 31_080_000),
                              "batch-line-3": (BATCH, 0), "batch-line-4": (BATCH, 18_648_000),
                              "batch-line-5": (BATCH, 1), live["k"]: ("", 31_080_000)}


def test_a_price_given_by_the_caller_takes_its_own_discount(owner, models, spool_dir):  # noqa: F811
    meter_line(owner, "srv/half", "batch-line-7", price=Price(input=30_000, output=150_000, batch_discount_percent=25))
    assert usage_writer.flush(timeout=1)
    assert records(owner) == {"batch-line-7": (BATCH, FULL * 75 // 100)}


def test_a_line_metered_twice_is_one_record(owner, models, spool_dir):  # noqa: F811
    meter_line(owner, "srv/half", "batch-line-9")
    meter_line(owner, "srv/half", "batch-line-9")  # its worker killed before it saved the answer, run again
    assert [line["k"] for line in spooled_lines(spool_dir)] == ["batch-line-9", "batch-line-9"]
    assert usage_writer.flush(timeout=1)
    assert records(owner) == {"batch-line-9": (BATCH, FULL // 2)}
    meter_line(owner, "srv/half", "batch-line-9")  # and after the first was written
    assert usage_writer.flush(timeout=1)
    assert UsageRecord.objects.filter(account=owner).count() == 1


def test_a_key_given_by_the_caller_wins_and_a_cached_reply_costs_nothing(owner, models, spool_dir):  # noqa: F811
    meter_line(owner, "srv/half", "batch-line-11", key="run-5")
    meter_line(owner, "srv/half", "batch-line-12", cached=True)
    assert usage_writer.flush(timeout=1)
    assert records(owner) == {"run-5": (BATCH, FULL // 2), "batch-line-12": (BATCH, 0)}
    assert UsageRecord.objects.get(key="batch-line-12").cached is True


def test_the_calls_log_row_has_the_cost_billed(owner, models, spool_dir):  # noqa: F811
    meter_line(owner, "srv/half", "batch-line-13")
    meter_line(owner, "srv/none-off", "batch-line-14")
    assert flush_all()
    rows = dict(CallRecord.objects.filter(account=owner).values_list("request_id", "cost_units"))
    assert rows == {"req-batch-line-13": FULL // 2, "req-batch-line-14": FULL}


def test_metrics_count_batch_spend_apart_and_in_the_total(owner, models, spool_dir):  # noqa: F811
    before = samples()
    meter_line(owner, "srv/half", "batch-line-15")
    meter_line(owner, "srv/free", "batch-line-16")
    meter(account_id=owner.pk, model="srv/half", surface="chat.completions", input_tokens=1_001, output_tokens=7)
    after = samples()

    def grew(name: str, model: str) -> float:
        return round(value(after, name, model=model, currency="USD") - value(before, name, model=model, currency="USD"),
                     10)

    assert grew("gateway_batch_spend_total", "srv/half") == 0.001554
    assert grew("gateway_spend_total", "srv/half") == 0.001554 + 0.003108
    assert grew("gateway_batch_spend_total", "srv/free") == 0  # free: no spend to count
    assert ("gateway_batch_spend_total", (("currency", "USD"), ("model", "srv/free"))) not in after


def test_a_line_spooled_before_the_batch_existed_is_a_live_call(owner, spool_dir):  # noqa: F811
    spool_dir.mkdir(parents=True)
    old = {"k": "old-1", "a": owner.pk, "m": "oa/echo-1", "s": "chat.completions", "i": 4, "o": 2, "r": "req",
           "t": "2026-11-24T10:00:00+00:00", "$": 9, "tg": {"app": "x"}, "cw": 1}
    new = {**old, "k": "new-1", "b": BATCH}
    (spool_dir / f"999995-dead{SUFFIX}").write_text(json.dumps(old) + "\n" + json.dumps(new) + "\n")
    assert (record_from_line(old).batch_id, record_from_line(new).batch_id) == ("", BATCH)
    assert usage_writer.flush(timeout=1)
    assert records(owner) == {"old-1": ("", 9), "new-1": (BATCH, 9)}


def test_a_row_of_the_shape_before_is_written_as_a_live_call(owner):
    at = UsageRecord._meta.get_field("created_at").to_python("2026-11-24T10:00:00+00:00")
    row = ("k-1", owner.pk, "oa/echo-1", "chat.completions", 3, 1, "req", at, False, 0, 5, {}, 0)
    insert_rows([row, ("k-2", *row[1:], BATCH)])
    assert records(owner) == {"k-1": ("", 5), "k-2": (BATCH, 5)}


def test_a_line_whose_batch_is_not_text_is_skipped_and_the_others_written(owner, spool_dir):  # noqa: F811
    spool_dir.mkdir(parents=True)
    good = {"k": "good", "a": owner.pk, "m": "oa/echo-1", "s": "chat.completions", "i": 4, "o": 2,
            "t": "2026-11-24T10:00:00+00:00", "b": BATCH}
    bad = {**good, "k": "bad", "b": ["not", "an", "id"]}
    (spool_dir / f"999994-dead{SUFFIX}").write_text(json.dumps(bad) + "\n" + json.dumps(good) + "\n")
    assert usage_writer.flush(timeout=1)
    assert records(owner) == {"good": (BATCH, 0)}
