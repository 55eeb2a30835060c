"""An Anthropic message batch forwarded to an Anthropic cloud's Message Batches (batches/forward.py): launched
once made, polled until the cloud's `processing_status` is `ended`, its results read back by custom_id (a
message, or the cloud's error body), each answered line metered once; an Anthropic batch whose model is on an
OpenAI-compatible server runs here; the sweep restarts a poll that was lost, and a second chain of polls stops."""

from datetime import timedelta

import pytest
from django.utils import timezone

from batches import finish, forward, tasks
from batches.models import Batch, BatchLine
from batches.queue import POLL, RUN
from gateway.models import CallRecord, UsageRecord
from gateway.usage.call_log import call_log
from gateway.usage.writer import usage_writer
from tests.batches.forwarding import KEY, anthropic_batch, anthropic_cloud, calls, openai_cloud, queued, statuses
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture

pytestmark = pytest.mark.django_db(transaction=True)
_ = queued  # the fixture


def message(index: int, model: str = "claude/echo-1") -> dict:
    return {"model": model, "max_tokens": 64, "messages": [{"role": "user", "content": f"line {index}"}]}


@pytest.fixture
def cloud(upstream, settings):  # noqa: F811
    settings.BATCH_FORWARD_POLL_SECONDS = 1
    return anthropic_cloud(upstream)


def test_an_anthropic_batch_is_forwarded_polled_and_its_results_filled(cloud, upstream, owner, queued):  # noqa: F811
    upstream.configure(batch_pending_polls=1, batch_failing_ids=["msg-2"])
    batch, lines = anthropic_batch(owner, [message(i) for i in range(3)])

    assert forward.launch(batch, lines) is True

    batch.refresh_from_db()
    assert batch.forwarded_to_id == cloud.pk and batch.upstream_id.startswith("msgbatch_")
    assert queued == [(POLL, batch.pk, 1)]
    [made] = calls(upstream, "/v1/messages/batches")
    assert (made.method, made.headers["x-api-key"], made.headers["anthropic-version"]) == ("POST", KEY, "2023-06-01")
    assert made.json == {"requests": [{"custom_id": f"msg-{i}", "params": message(i, "echo-1")} for i in range(3)]}

    assert tasks.poll_forwarded_batch(batch.pk) == "waiting"
    assert tasks.poll_forwarded_batch(batch.pk) == "completed"

    batch.refresh_from_db()
    assert batch.status == "completed" and batch.output_file is None  # an Anthropic batch's results are its lines
    assert statuses(batch) == ["succeeded", "succeeded", "errored"]
    first = BatchLine.objects.get(batch=batch, index=0)
    assert (first.status_code, first.result["type"], first.result["model"]) == (200, "message", "claude/echo-1")
    assert first.result["content"][0]["text"] == "Echo: line 0"
    failed = BatchLine.objects.get(batch=batch, index=2)
    assert failed.status_code == 500 and failed.result["type"] == "error"
    assert failed.result["error"]["type"] == "api_error" and "batch_failing_ids" in failed.result["error"]["message"]
    assert [r.path for r in upstream.requests if r.method == "GET"][-1] == (
        f"/v1/messages/batches/{batch.upstream_id}/results")
    assert calls(upstream, "/v1/messages") == calls(upstream, "/v1/messages/batches")  # no line ran here

    usage_writer.flush()
    call_log.flush()
    records = UsageRecord.objects.filter(account=owner)
    usage = first.result["usage"]
    assert sorted(records.values_list("key", "model", "surface", "input_tokens", "output_tokens")) == sorted(
        (line.usage_key, "claude/echo-1", "messages", usage["input_tokens"], usage["output_tokens"])
        for line in BatchLine.objects.filter(batch=batch, status="succeeded"))
    rows = CallRecord.objects.filter(account_id=owner.pk)
    assert sorted((row.tags["custom_id"], row.status) for row in rows) == [("msg-0", 200), ("msg-1", 200),
                                                                           ("msg-2", 500)]


def test_a_cancelled_anthropic_batch_is_cancelled_at_the_cloud(cloud, upstream, owner, queued):  # noqa: F811
    upstream.configure(batch_pending_polls=5)
    batch, lines = anthropic_batch(owner, [message(0), message(1)])
    forward.launch(batch, lines)
    batch.refresh_from_db()

    finish.cancel(batch)

    assert [r.method for r in calls(upstream, f"/v1/messages/batches/{batch.upstream_id}/cancel")] == ["POST"]
    assert tasks.poll_forwarded_batch(batch.pk) == "cancelled"
    batch.refresh_from_db()
    assert batch.status == "cancelled" and statuses(batch) == ["cancelled", "cancelled"]


def test_an_anthropic_batch_whose_model_is_on_an_openai_server_runs_here(upstream, owner, queued):  # noqa: F811
    openai_cloud(upstream)  # forwards batches, but speaks OpenAI's format: an Anthropic batch is not for it
    batch, lines = anthropic_batch(owner, [message(0, "oa/echo-1")])

    assert forward.launch(batch, lines) is False

    assert queued == [(RUN, batch.pk, None)]
    assert Batch.objects.get(pk=batch.pk).upstream_id == "" and statuses(batch) == ["queued"]
    assert calls(upstream, "/v1/messages/batches") == calls(upstream, "/v1/batches") == []


def test_the_sweep_restarts_a_lost_poll_and_a_second_chain_of_polls_stops(cloud, upstream, owner, queued,  # noqa: F811
                                                                          settings):
    upstream.configure(batch_pending_polls=5)
    settings.BATCH_FORWARD_POLL_SECONDS = 30
    batch, lines = anthropic_batch(owner, [message(0)])
    forward.launch(batch, lines)
    queued.clear()

    tasks.sweep_batches()
    assert queued == []  # its poll is due in 30 s: not lost
    assert tasks.poll_forwarded_batch(batch.pk) == "held"  # a poll sent twice: the second stops there
    reads = len([r for r in upstream.requests if r.method == "GET"])
    assert reads == 0

    Batch.objects.filter(pk=batch.pk).update(runner_until=timezone.now() - timedelta(
        seconds=settings.BATCH_LEASE_SECONDS + 1))  # its poll's message was lost
    tasks.sweep_batches()
    assert queued == [(POLL, batch.pk, None)]
    assert tasks.poll_forwarded_batch(batch.pk) == "waiting"
    assert queued[-1] == (POLL, batch.pk, 30)
