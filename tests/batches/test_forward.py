"""An OpenAI batch forwarded to an OpenAI-compatible cloud's Batch API (batches/forward.py): sent once
validated, polled until the cloud ends it, its lines and output file then as a run here leaves them, each
answered line metered once under its key; a batch not forwarded runs here; a failed submit falls back to the
gateway's workers; a cancel is sent on to the cloud; a poll run again after the end meters nothing twice."""

import json
import logging

import pytest

from batches import finish, forward, runner, tasks
from batches.models import Batch, BatchLine
from batches.queue import POLL, RUN
from gateway.files import store
from gateway.models import CallRecord, UsageRecord
from gateway.usage.call_log import call_log
from gateway.usage.writer import usage_writer
from tests.batches.forwarding import KEY, calls, chat, form_of, openai_batch, openai_cloud, queued, statuses
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture

pytestmark = pytest.mark.django_db(transaction=True)
_ = queued  # the fixture


@pytest.fixture
def cloud(upstream, settings):  # noqa: F811
    settings.BATCH_FORWARD_POLL_SECONDS = 1  # due at once (batches/forward.py DUE_SLACK_SECONDS)
    return openai_cloud(upstream)


def output_of(stored) -> list[dict]:
    with store.open_file(stored) as handle:
        return [json.loads(raw) for raw in handle]


def flushed():
    usage_writer.flush()
    call_log.flush()


def test_a_forwarded_batch_is_sent_polled_and_ends_as_if_run_here(cloud, upstream, owner, queued):  # noqa: F811
    upstream.configure(batch_pending_polls=1)
    batch = openai_batch(owner, [chat(i) for i in range(3)])

    assert tasks.validate_batch(batch.pk) == "in_progress"

    batch.refresh_from_db()
    assert batch.forwarded_to_id == cloud.pk and batch.upstream_id.startswith("batch_")
    assert list(BatchLine.objects.filter(batch=batch).values_list("status", "claim").distinct()) == [
        ("running", "upstream")]
    assert queued == [(POLL, batch.pk, 1)]
    upload, made = calls(upstream, "/v1/files"), calls(upstream, "/v1/batches")
    assert [(r.method, r.headers["authorization"]) for r in upload + made] == [("POST", f"Bearer {KEY}")] * 2
    form = form_of(upload[0])
    assert set(form) == {"purpose", "file"} and form["purpose"] == (None, b"batch")
    sent = [json.loads(raw) for raw in form["file"][1].splitlines()]
    assert sent == [{"custom_id": f"req-{i}", "method": "POST", "url": "/v1/chat/completions",
                     "body": chat(i, "echo-1")} for i in range(3)]
    file_id = made[0].json["input_file_id"]
    assert upstream.state.store["files"][file_id]["filename"] == f"{batch.pk}.jsonl"
    assert made[0].json == {"input_file_id": file_id, "endpoint": "/v1/chat/completions", "completion_window": "24h",
                            "metadata": {"gateway_batch_id": batch.pk}}
    assert calls(upstream, "/v1/chat") == []

    assert runner.run_batch(batch.pk) == runner.Outcome.HELD  # no worker of ours runs it
    assert tasks.poll_forwarded_batch(batch.pk) == "waiting"
    assert queued[-1] == (POLL, batch.pk, 1)
    assert statuses(batch) == ["running"] * 3
    assert tasks.poll_forwarded_batch(batch.pk) == "completed"

    batch.refresh_from_db()
    assert batch.status == "completed" and batch.completed_at is not None and batch.error_file is None
    assert (batch.runner, batch.runner_until) == ("", None)
    assert statuses(batch) == ["succeeded"] * 3
    lines = output_of(batch.output_file)
    assert [line["custom_id"] for line in lines] == ["req-0", "req-1", "req-2"]
    for index, line in enumerate(lines):
        body = line["response"]["body"]
        assert line["response"]["status_code"] == 200 and line["error"] is None
        assert body["model"] == "oa/echo-1" and body["choices"][0]["message"]["content"] == f"Echo: line {index}"
        assert body["usage"] == {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5}
        assert line["response"]["request_id"] == BatchLine.objects.get(batch=batch, index=index).request_id
    assert calls(upstream, "/v1/chat") == []  # the cloud answered every line

    flushed()
    records = UsageRecord.objects.filter(account=owner).order_by("key")
    assert {r.key for r in records} == {line.usage_key for line in BatchLine.objects.filter(batch=batch)}
    assert {(r.model, r.surface, r.input_tokens, r.output_tokens) for r in records} == {
        ("oa/echo-1", "chat.completions", 2, 3)}
    rows = CallRecord.objects.filter(account_id=owner.pk)
    assert sorted(row.tags["custom_id"] for row in rows) == ["req-0", "req-1", "req-2"]
    assert {(row.tags["batch"], row.surface, row.status, row.model) for row in rows} == {
        (batch.pk, "chat.completions", 200, "oa/echo-1")}


def test_the_cost_of_a_forwarded_line_is_the_cost_of_the_same_line_run_here(cloud, upstream, owner,  # noqa: F811
                                                                             queued):
    """The same requests, forwarded and run here: each line's record has the same tokens, model and cost (the
    batch price, as gateway/calls/metering.py gives a batch line's call)."""
    there = openai_batch(owner, [chat(i) for i in range(2)])
    tasks.validate_batch(there.pk)
    assert tasks.poll_forwarded_batch(there.pk) == "completed"
    cloud.forward_batches = False
    cloud.save()
    here = openai_batch(owner, [chat(i) for i in range(2)])
    tasks.validate_batch(here.pk)
    assert queued[-1] == (RUN, here.pk, None)
    assert runner.run_batch(here.pk) == runner.Outcome.ENDED
    flushed()

    def costs(batch):
        ids = {f"batch-line-{pk}" for pk in BatchLine.objects.filter(batch=batch).values_list("pk", flat=True)}
        tagged = UsageRecord.objects.filter(tags__batch=batch.pk) | UsageRecord.objects.filter(key__in=ids)
        return sorted(tagged.values_list("model", "input_tokens", "output_tokens", "cost_units"))

    assert costs(there) == costs(here) and len(costs(there)) == 2 and costs(there)[0][3] > 0
    answers = {b.pk: [line.result for line in BatchLine.objects.filter(batch=b).order_by("index")]
               for b in (there, here)}
    for forwarded, local in zip(answers[there.pk], answers[here.pk]):
        assert (forwarded["model"], forwarded["choices"][0]["message"], forwarded["usage"]) == (
            local["model"], local["choices"][0]["message"], local["usage"])


def test_a_poll_run_again_after_the_end_meters_nothing_twice(cloud, upstream, owner, queued,  # noqa: F811
                                                             monkeypatch):
    batch = openai_batch(owner, [chat(i) for i in range(2)])
    tasks.validate_batch(batch.pk)
    batch.refresh_from_db()
    real = finish.finalize

    def killed(batch_id, *, end_as):  # the worker dies after filling the lines, before the end is written
        raise SystemExit("worker killed")

    monkeypatch.setattr(finish, "finalize", killed)
    with pytest.raises(SystemExit):
        tasks.poll_forwarded_batch(batch.pk)
    assert statuses(batch) == ["succeeded"] * 2 and Batch.objects.get(pk=batch.pk).status == "in_progress"
    monkeypatch.setattr(finish, "finalize", real)
    assert tasks.poll_forwarded_batch(batch.pk) == "completed"  # delivered again
    assert tasks.poll_forwarded_batch(batch.pk) == "held"  # and once more, after the end
    flushed()

    assert Batch.objects.get(pk=batch.pk).status == "completed"
    assert UsageRecord.objects.filter(account=owner).count() == 2
    assert CallRecord.objects.filter(account_id=owner.pk).count() == 2
    assert [r.method + " " + r.path for r in upstream.requests].count(f"GET /v1/batches/{batch.upstream_id}") == 2


@pytest.mark.parametrize("case", ["off", "two servers", "no batch api", "guardrails", "responses"])
def test_a_batch_that_may_not_go_to_a_cloud_runs_here(cloud, upstream, owner, group, queued, case):  # noqa: F811
    bodies = [chat(0), chat(1)]
    endpoint = "/v1/chat/completions"
    if case == "off":
        cloud.forward_batches = False
        cloud.save()
    elif case == "two servers":
        openai_cloud(upstream, name="other", model="echo-2", default=False)
        bodies[1] = chat(1, "other/echo-2")
    elif case == "no batch api":  # a row written around ModelServer.clean, which refuses it
        type(cloud).objects.filter(pk=cloud.pk).update(kind="azure", api_version="v1")
    elif case == "guardrails":
        group.guardrails = [{"check": "keywords", "on": "input", "action": "block", "keywords": ["secret"]}]
        group.save()
    else:
        endpoint = "/v1/responses"
        bodies = [{"model": "echo-1", "input": "line 0"}]
    batch = openai_batch(owner, bodies, endpoint=endpoint)

    tasks.validate_batch(batch.pk)

    batch.refresh_from_db()
    assert (batch.forwarded_to, batch.upstream_id, batch.status) == (None, "", "in_progress")
    assert queued == [(RUN, batch.pk, None)]
    assert statuses(batch) == ["queued"] * len(bodies)
    assert calls(upstream, "/v1/files") == calls(upstream, "/v1/batches") == []


@pytest.mark.parametrize("path,status", [("/v1/files", 500), ("/v1/batches", 400)])
def test_a_submit_the_cloud_refuses_falls_back_to_the_gateways_workers(cloud, upstream, owner, queued, caplog,  # noqa: F811
                                                                       path, status):
    upstream.configure(fail_status=status, fail_paths=[path])
    batch = openai_batch(owner, [chat(0), chat(1)])

    with caplog.at_level(logging.WARNING, logger="batches.forward"):
        tasks.validate_batch(batch.pk)

    batch.refresh_from_db()
    assert (batch.forwarded_to, batch.upstream_id, batch.runner, batch.runner_until) == (None, "", "", None)
    assert queued == [(RUN, batch.pk, None)]
    assert f"batch {batch.pk}: not forwarded to server oa" in caplog.text and f"{status}" in caplog.text
    upstream.configure(fail_status=None)
    assert runner.run_batch(batch.pk) == runner.Outcome.ENDED
    assert statuses(batch) == ["succeeded"] * 2
    assert len(calls(upstream, "/v1/chat/completions")) == 2


def test_a_cancel_is_sent_to_the_cloud_and_the_batch_ends_cancelled(cloud, upstream, owner, queued):  # noqa: F811
    upstream.configure(batch_pending_polls=5)
    batch = openai_batch(owner, [chat(i) for i in range(2)])
    tasks.validate_batch(batch.pk)
    batch.refresh_from_db()

    assert finish.cancel(batch).status == "cancelling"

    cancels = calls(upstream, f"/v1/batches/{batch.upstream_id}/cancel")
    assert [(r.method, r.headers["authorization"]) for r in cancels] == [("POST", f"Bearer {KEY}")]
    assert queued == [(POLL, batch.pk, 1)]  # no run here: its poll ends it
    assert tasks.poll_forwarded_batch(batch.pk) == "cancelled"
    batch.refresh_from_db()
    assert batch.status == "cancelled" and batch.cancelled_at is not None and batch.output_file is None
    assert statuses(batch) == ["cancelled"] * 2
    assert [line["error"]["code"] for line in output_of(batch.error_file)] == ["batch_cancelled"] * 2
    flushed()
    assert UsageRecord.objects.filter(account=owner).count() == 0


def test_lines_the_cloud_failed_or_left_out_are_errored_and_a_failed_batch_runs_here(cloud, upstream, owner,  # noqa: F811
                                                                                      queued, monkeypatch):
    monkeypatch.setattr(forward, "CHUNK", 2)  # the lines filled two by two
    upstream.configure(batch_failing_ids=["req-1"])
    batch = openai_batch(owner, [chat(i) for i in range(2)])
    tasks.validate_batch(batch.pk)
    BatchLine.objects.create(batch=batch, index=2, custom_id="req-2", body=chat(2), status="running",
                             claim=forward.UPSTREAM)  # one the cloud never heard of
    assert tasks.poll_forwarded_batch(batch.pk) == "completed"
    lines = {line.custom_id: line for line in BatchLine.objects.filter(batch=batch)}
    assert (lines["req-1"].status, lines["req-1"].status_code) == ("errored", 500)
    assert "batch_failing_ids" in lines["req-1"].result["error"]["message"]
    assert (lines["req-2"].status, lines["req-2"].status_code) == ("errored", 502)
    assert lines["req-2"].result["error"]["code"] == "upstream_no_result"
    assert lines["req-0"].status == "succeeded"

    upstream.configure(batch_refused="Enqueued token limit reached for echo-1.", batch_failing_ids=[])
    refused = openai_batch(owner, [chat(0)])
    tasks.validate_batch(refused.pk)
    assert tasks.poll_forwarded_batch(refused.pk) == "local"
    refused.refresh_from_db()
    assert (refused.forwarded_to, refused.upstream_id, statuses(refused)) == (None, "", ["queued"])
    assert queued[-1] == (RUN, refused.pk, None)
    assert runner.run_batch(refused.pk) == runner.Outcome.ENDED and statuses(refused) == ["succeeded"]
