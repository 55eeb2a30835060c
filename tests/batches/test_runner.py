"""The runner (batches/runner.py): each line one call of its surface through the live view, answered once,
metered once under its line's key; retries of a retryable failure; a budget reached holds the batch; cancel
and expiry end the lines not yet run; a worker that lost its hold leaves its lines to the next."""

from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from django.utils import timezone

from batches import finish, runner
from batches.models import Batch, BatchLine
from batches.runner import Outcome
from gateway.models import CallRecord, UsageRecord
from gateway.usage.call_log import call_log
from gateway.usage.writer import usage_writer
from tests.factories import BatchFactory, BatchLineFactory, ModelFactory, ModelServerFactory
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def served(upstream, owner):  # noqa: F811
    server = ModelServerFactory(name="oa", kind="openai", base_url=f"{upstream.url}/v1", read_timeout=5.0)
    ModelFactory(server=server, name="echo-1", is_default=True)
    return upstream


def batch_of(owner, lines: int, **fields) -> Batch:
    batch = BatchFactory(account=owner, **fields)
    for index in range(lines):
        BatchLineFactory(batch=batch, index=index)
    return batch


def statuses(batch) -> list[str]:
    return list(BatchLine.objects.filter(batch=batch).order_by("index").values_list("status", flat=True))


def test_every_line_is_answered_once_and_the_batch_completes(served, owner, settings):
    settings.BATCH_CONCURRENCY = 3
    batch = batch_of(owner, 7)

    assert runner.run_batch(batch.pk) == Outcome.ENDED

    batch.refresh_from_db()
    assert batch.status == "completed" and batch.completed_at is not None and batch.finalizing_at is not None
    assert batch.output_file is not None and batch.error_file is None
    assert statuses(batch) == ["succeeded"] * 7
    assert len(served.requests) == 7
    line = BatchLine.objects.get(batch=batch, index=3)
    assert line.status_code == 200 and line.result["object"] == "chat.completion"
    assert line.result["choices"][0]["message"]["content"] == "Echo: line 3"
    assert batch.runner == "" and batch.runner_until is None


def test_a_line_is_metered_under_its_key_and_logged_as_a_batch_call(served, owner):
    batch = batch_of(owner, 2)
    runner.run_batch(batch.pk)
    usage_writer.flush()
    call_log.flush()

    keys = set(UsageRecord.objects.filter(account=owner).values_list("key", flat=True))
    assert keys == {line.usage_key for line in BatchLine.objects.filter(batch=batch)}
    rows = CallRecord.objects.filter(account_id=owner.pk)
    assert rows.count() == 2
    assert {row.tags["batch"] for row in rows} == {batch.pk}
    assert {row.tags["custom_id"] for row in rows} == {"req-0", "req-1"}
    assert {row.surface for row in rows} == {"chat.completions"} and {row.status for row in rows} == {200}


def test_a_retryable_failure_is_tried_again_and_a_lasting_one_kept(served, owner, settings):
    settings.BATCH_RETRY_SECONDS = 0.01
    settings.BATCH_LINE_ATTEMPTS = 3
    served.configure(fail_status=503, fail_times=1)
    batch = batch_of(owner, 1)
    runner.run_batch(batch.pk)
    line = BatchLine.objects.get(batch=batch)
    assert (line.status, line.tries, line.status_code) == ("succeeded", 2, 200)

    served.configure(fail_status=503, fail_times=-1)
    other = batch_of(owner, 1, id="batch_" + "f" * 24)
    runner.run_batch(other.pk)
    line = BatchLine.objects.get(batch=other)
    assert (line.status, line.tries) == ("errored", 3)
    assert line.status_code >= 500 and "error" in line.result
    other.refresh_from_db()
    assert other.status == "completed" and other.error_file is not None and other.output_file is None


def test_a_refusal_that_is_the_lines_own_is_kept_at_once(served, owner):
    batch = BatchFactory(account=owner)
    BatchLineFactory(batch=batch, index=0, body={"model": "echo-1", "messages": "hello"})
    runner.run_batch(batch.pk)
    line = BatchLine.objects.get(batch=batch)
    assert (line.status, line.tries, line.status_code) == ("errored", 1, 400)
    assert line.result["error"]["param"] == "messages"
    assert served.requests == []


def test_a_quota_reached_holds_the_lines_and_says_why(served, owner, group, settings):
    settings.BATCH_CONCURRENCY = 1  # lines in flight at once all passed the check: one at a time here
    group.daily_tokens = 1  # the first answered line spends it
    group.save()
    batch = batch_of(owner, 3)
    outcome = runner.run_batch(batch.pk)
    batch.refresh_from_db()
    assert outcome == Outcome.WAITING
    assert batch.status == "in_progress" and batch.waiting_for.startswith("Token quota reached")
    assert statuses(batch) == ["succeeded", "queued", "queued"]
    assert len(served.requests) == 1

    group.daily_tokens = -1
    group.save()
    assert runner.run_batch(batch.pk) == Outcome.ENDED
    batch.refresh_from_db()
    assert batch.status == "completed" and batch.waiting_for == ""
    assert statuses(batch) == ["succeeded"] * 3


def test_a_cancel_ends_the_lines_not_yet_run_and_bills_what_ran(served, owner):
    batch = batch_of(owner, 4)
    BatchLine.objects.filter(batch=batch, index__lt=2).update(status="succeeded", status_code=200, result={},
                                                              ended_at=timezone.now())
    finish.cancel(batch)
    batch.refresh_from_db()
    assert batch.status == "cancelling" and batch.cancelling_at is not None

    assert runner.run_batch(batch.pk) == Outcome.ENDED
    batch.refresh_from_db()
    assert batch.status == "cancelled" and batch.cancelled_at is not None
    assert statuses(batch) == ["succeeded", "succeeded", "cancelled", "cancelled"]
    assert served.requests == []
    lines = finish.output_line(batch, BatchLine.objects.get(batch=batch, index=2))
    assert lines["error"]["code"] == "batch_cancelled" and lines["response"] is None


def test_a_batch_past_its_window_expires_its_waiting_lines(served, owner):
    batch = batch_of(owner, 2, expires_at=timezone.now() - timedelta(seconds=1))
    assert runner.run_batch(batch.pk) == Outcome.ENDED
    batch.refresh_from_db()
    assert batch.status == "expired" and batch.expired_at is not None
    assert statuses(batch) == ["expired", "expired"]
    assert served.requests == []


def test_a_batch_held_by_a_live_worker_is_left_to_it_and_a_lapsed_hold_taken_over(served, owner):
    batch = batch_of(owner, 2)
    Batch.objects.filter(pk=batch.pk).update(runner="other", runner_until=timezone.now() + timedelta(seconds=30))
    BatchLine.objects.filter(batch=batch, index=0).update(status="running", claim="other")
    assert runner.run_batch(batch.pk) == Outcome.HELD
    assert served.requests == []

    Batch.objects.filter(pk=batch.pk).update(runner_until=timezone.now() - timedelta(seconds=1))
    assert runner.run_batch(batch.pk) == Outcome.ENDED
    assert statuses(batch) == ["succeeded", "succeeded"]
    assert len(served.requests) == 2


def test_a_batch_gives_its_worker_back_after_its_slice(served, owner, settings):
    settings.BATCH_SLICE_SECONDS = 0
    batch = batch_of(owner, 2)
    assert runner.run_batch(batch.pk) == Outcome.SLICED
    batch.refresh_from_db()
    assert batch.status == "in_progress" and batch.runner_until is None


@pytest.mark.parametrize("shared", [False, True], ids=["in-process", "redis"])
def test_lines_to_one_server_stay_within_its_cap_across_batches(served, owner, settings, monkeypatch, request, shared):
    """Two batches run at once by two workers, eight lines in flight each: the server never has more than
    BATCH_CONCURRENCY_PER_SERVER of them at a time."""
    if shared:
        request.getfixturevalue("redis_url")
    settings.BATCH_CONCURRENCY = 8
    settings.BATCH_CONCURRENCY_PER_SERVER = 3
    served.configure(latency_ms=40)
    now, most = 0, 0
    real = runner.call_line

    async def counted(**kwargs):
        nonlocal now, most
        now += 1
        most = max(most, now)
        try:
            return await real(**kwargs)
        finally:
            now -= 1

    monkeypatch.setattr(runner, "call_line", counted)
    first, second = batch_of(owner, 12), batch_of(owner, 12, id="batch_" + "e" * 24)
    with ThreadPoolExecutor(2) as pool:
        outcomes = list(pool.map(runner.run_batch, [first.pk, second.pk]))
    assert outcomes == [Outcome.ENDED, Outcome.ENDED]
    assert statuses(first) == statuses(second) == ["succeeded"] * 12
    assert most == 3


def test_a_lines_own_metadata_tags_join_the_batch_tags_and_cannot_replace_them(served, owner):
    batch = BatchFactory(account=owner)
    BatchLineFactory(batch=batch, index=0, body={"model": "echo-1", "messages": [{"role": "user", "content": "x"}],
                                                 "metadata": {"team": "ml", "batch": "spoofed"}})
    runner.run_batch(batch.pk)
    call_log.flush()
    row = CallRecord.objects.get(account_id=owner.pk)
    assert row.tags == {"team": "ml", "batch": batch.pk, "custom_id": "req-0"}


def test_a_budget_spent_mid_batch_holds_the_rest_billed_at_the_batch_price(served, owner, group, settings):
    """The daily budget is the smallest amount there is: the first answered line spends it, the rest wait, and
    what ran was billed at half price."""
    from decimal import Decimal

    from gateway.models import Model
    from gateway.registry.snapshot import registry_invalidate

    settings.BATCH_CONCURRENCY = 1
    Model.objects.filter(name="echo-1").update(input_price=Decimal("2000"), output_price=Decimal("2000"))
    registry_invalidate()
    group.daily_budget = Decimal("0.0001")
    group.save()
    batch = batch_of(owner, 3)
    assert runner.run_batch(batch.pk) == Outcome.WAITING
    batch.refresh_from_db()
    assert batch.waiting_for.startswith("Budget reached")
    assert statuses(batch) == ["succeeded", "queued", "queued"]
    usage_writer.flush()
    record = UsageRecord.objects.get(account=owner)
    full = (record.input_tokens + record.output_tokens) * 2000 * 10**4  # its COST_UNITS at the full price
    assert record.batch_id == batch.pk and record.cost_units == full // 2
