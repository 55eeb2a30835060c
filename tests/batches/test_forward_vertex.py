"""An Anthropic message batch of a Claude model on a Google Vertex AI server forwarded to Vertex AI's batch
prediction (batches/clouds_vertex.py), against the fake Google (tests/gateway/upstream/google/batch_jobs.py: the
jobs and Cloud Storage, its tokens from a service account's key): the input written to Cloud Storage and a job
made of it as google-genai makes one, polled until it ends, its output read back page by page and file by
file, each line filled and metered once at the batch price; a request Vertex AI failed is errored; a cancel is
sent on; a batch Vertex AI cannot take (a Gemini model, two models, no Cloud Storage location, a refused
submit, a job failed whole) runs on the gateway's workers."""

from __future__ import annotations

import json
import logging
from decimal import Decimal

import pytest
from google import genai
from google.oauth2 import service_account

from batches import finish, forward, runner, tasks
from batches.models import Batch, BatchLine
from batches.queue import POLL, RUN
from gateway.models import CallRecord, UsageRecord
from gateway.usage.call_log import call_log
from gateway.usage.writer import usage_writer
from tests.batches.forwarding import anthropic_batch, openai_batch, queued, statuses
from tests.factories import ModelFactory, ModelServerFactory
from tests.gateway.upstream.google.fake import CLAUDE, GEMINI, PROJECT, REGION
from tests.gateway.upstream.google.keys import SCOPE
from tests.gateway.upstream.google.support import fake_google, key_file  # noqa: F401 — the fixtures

pytestmark = pytest.mark.django_db(transaction=True)
_ = queued  # the fixture

BUCKET, FOLDER = "gw-batches", "gateway/batches"
JOBS = f"/v1/projects/{PROJECT}/locations/{REGION}/batchPredictionJobs"
OTHER_CLAUDE = "claude-opus-4-1@20250805"


def message(index: int, model: str = f"gcp/{CLAUDE}") -> dict:
    return {"model": model, "max_tokens": 64, "messages": [{"role": "user", "content": f"line {index}"}]}


@pytest.fixture
def gcp(fake_google, key_file, settings):  # noqa: F811
    """A Vertex AI server that forwards batches, with a Claude model (3 and 15 per million), a second Claude
    model and a Gemini model; Cloud Storage is the fake's."""
    settings.BATCH_FORWARD_POLL_SECONDS = 1  # due at once (batches/forward.py DUE_SLACK_SECONDS)
    settings.BATCH_GCS_URL = fake_google.url
    server = ModelServerFactory(name="gcp", kind="vertex", base_url=fake_google.url, region=REGION,
                                gcp_project=PROJECT, gcp_credentials_file=key_file, is_remote=True, read_timeout=5.0,
                                forward_batches=True, batch_gcs_uri=f"gs://{BUCKET}/{FOLDER}/")
    for name in (CLAUDE, OTHER_CLAUDE, GEMINI):
        ModelFactory(server=server, name=name, input_price=Decimal("3"), output_price=Decimal("15"))
    return server


def seen(google, method: str, path: str) -> list:
    return [r for r in google.requests if r.method == method and r.raw_path == path]


def model_calls(google) -> list:
    """The live calls of Claude and Gemini (a line run here), not the batch's."""
    return [r for r in google.requests if r.path.rpartition(":")[2] in ("streamRawPredict", "streamGenerateContent")]


def flushed() -> None:
    usage_writer.flush()
    call_log.flush()


def test_a_claude_batch_goes_to_vertex_and_its_lines_are_filled_and_metered_once(gcp, fake_google, owner,  # noqa: F811
                                                                                 queued):
    fake_google.configure(batch_pending_polls=1, batch_failing_ids=["msg-2"], batch_lines_per_file=1)
    bodies = [message(0), message(1), message(2), {**message(3), "max_tokens": 0}]  # the last one Claude refuses
    batch, lines = anthropic_batch(owner, bodies)

    assert forward.launch(batch, lines) is True

    batch.refresh_from_db()
    assert batch.forwarded_to_id == gcp.pk and batch.upstream_id.isdigit()
    assert queued == [(POLL, batch.pk, 1)]
    [upload] = seen(fake_google, "POST", f"/upload/storage/v1/b/{BUCKET}/o")
    assert upload.query == f"uploadType=media&name={FOLDER.replace('/', '%2F')}%2F{batch.pk}%2Finput.jsonl"
    assert upload.headers["authorization"].startswith("Bearer ya29.fake-") and upload.problem is None
    assert upload.headers["content-type"] == "application/jsonl"
    assert [json.loads(raw) for raw in upload.body.splitlines()] == [
        {"custom_id": f"msg-{i}", "request": {"max_tokens": body["max_tokens"], "messages": body["messages"],
                                              "anthropic_version": "vertex-2023-10-16"}}
        for i, body in enumerate(bodies)]
    [made] = seen(fake_google, "POST", JOBS)
    assert made.headers["authorization"] == upload.headers["authorization"] and made.problem is None
    here = f"gs://{BUCKET}/{FOLDER}/{batch.pk}"
    assert made.json == {"displayName": batch.pk, "model": f"publishers/anthropic/models/{CLAUDE}",
                         "inputConfig": {"instancesFormat": "jsonl", "gcsSource": {"uris": [f"{here}/input.jsonl"]}},
                         "outputConfig": {"predictionsFormat": "jsonl",
                                          "gcsDestination": {"outputUriPrefix": f"{here}/output"}}}

    assert runner.run_batch(batch.pk) == runner.Outcome.HELD  # no worker of ours runs it
    assert tasks.poll_forwarded_batch(batch.pk) == "waiting"  # JOB_STATE_RUNNING
    assert statuses(batch) == ["running"] * 4
    assert tasks.poll_forwarded_batch(batch.pk) == "completed"  # JOB_STATE_PARTIALLY_SUCCEEDED

    batch.refresh_from_db()
    assert batch.status == "completed" and (batch.runner, batch.runner_until) == ("", None)
    assert statuses(batch) == ["succeeded", "succeeded", "errored", "errored"]
    first = BatchLine.objects.get(batch=batch, index=0)
    assert (first.status_code, first.result["type"], first.result["model"]) == (200, "message", f"gcp/{CLAUDE}")
    assert first.result["content"][0]["text"] == "Echo: line 0"
    failed = BatchLine.objects.get(batch=batch, index=2)
    assert (failed.status_code, failed.result["type"], failed.result["error"]["type"]) == (500, "error", "api_error")
    assert "The model crashed (batch_failing_ids)." in failed.result["error"]["message"]
    refused = BatchLine.objects.get(batch=batch, index=3)
    assert (refused.status_code, refused.result) == (400, {"type": "error", "error": {
        "type": "invalid_request_error", "message": "max_tokens: Field required (an integer >= 1)"}})
    assert len(seen(fake_google, "GET", f"{JOBS}/{batch.upstream_id}")) == 2
    listings = seen(fake_google, "GET", f"/storage/v1/b/{BUCKET}/o")
    assert [r.query.partition("&pageToken=")[2] for r in listings] == ["", "2"]  # two pages of output files
    assert listings[0].query.startswith(f"prefix={FOLDER.replace('/', '%2F')}%2F{batch.pk}%2Foutput%2Fprediction-")
    reads = [r for r in fake_google.requests if r.method == "GET" and r.query == "alt=media"]
    assert [r.raw_path.rpartition("%2F")[2] for r in reads] == [f"predictions_000{n}.jsonl" for n in (1, 2, 3, 4)]
    assert model_calls(fake_google) == []  # no line ran here (streamRawPredict)

    assert tasks.poll_forwarded_batch(batch.pk) == "held"  # polled again after the end: nothing twice
    flushed()
    records = UsageRecord.objects.filter(account=owner)
    usage = first.result["usage"]
    assert sorted(records.values_list("key", "model", "surface", "input_tokens", "output_tokens")) == sorted(
        (line.usage_key, f"gcp/{CLAUDE}", "messages", usage["input_tokens"], usage["output_tokens"])
        for line in BatchLine.objects.filter(batch=batch, status="succeeded"))
    rows = CallRecord.objects.filter(account_id=owner.pk)
    assert sorted((row.tags["custom_id"], row.status, row.tags["batch"]) for row in rows) == [
        ("msg-0", 200, batch.pk), ("msg-1", 200, batch.pk), ("msg-2", 500, batch.pk), ("msg-3", 400, batch.pk)]


def test_a_forwarded_line_costs_what_the_same_line_run_here_costs(gcp, fake_google, owner, queued):  # noqa: F811
    """The batch price, as gateway/calls/metering.py gives a batch line's call, whether Vertex AI's batch
    prediction answered it or streamRawPredict did."""
    there, lines = anthropic_batch(owner, [message(0), message(1)])
    assert forward.launch(there, lines) is True
    assert tasks.poll_forwarded_batch(there.pk) == "completed"
    gcp.forward_batches = False
    gcp.save()
    here, lines = anthropic_batch(owner, [message(0), message(1)])
    assert forward.launch(here, lines) is False
    assert runner.run_batch(here.pk) == runner.Outcome.ENDED
    assert len(model_calls(fake_google)) == 2  # streamRawPredict, for the batch run here
    flushed()

    def costs(batch):
        keys = [line.usage_key for line in BatchLine.objects.filter(batch=batch)]
        return sorted(UsageRecord.objects.filter(key__in=keys).values_list("model", "input_tokens", "output_tokens",
                                                                            "cost_units"))

    assert costs(there) == costs(here) and len(costs(there)) == 2 and costs(there)[0][3] > 0


def test_the_job_requests_are_those_google_genai_sends(gcp, fake_google, key_file, owner, queued):  # noqa: F811
    fake_google.configure(batch_pending_polls=5)
    batch, lines = anthropic_batch(owner, [message(0)])
    forward.launch(batch, lines)
    batch.refresh_from_db()
    assert tasks.poll_forwarded_batch(batch.pk) == "waiting"
    finish.cancel(batch)
    [ours_made] = seen(fake_google, "POST", JOBS)
    [ours_read] = seen(fake_google, "GET", f"{JOBS}/{batch.upstream_id}")
    [ours_cancel] = seen(fake_google, "POST", f"{JOBS}/{batch.upstream_id}:cancel")

    credentials = service_account.Credentials.from_service_account_file(key_file, scopes=[SCOPE])
    client = genai.Client(vertexai=True, project=PROJECT, location=REGION, credentials=credentials,
                          http_options={"base_url": fake_google.url, "api_version": "v1"})
    job = client.batches.create(
        model=ours_made.json["model"], src=ours_made.json["inputConfig"]["gcsSource"]["uris"][0],
        config={"display_name": batch.pk, "dest": ours_made.json["outputConfig"]["gcsDestination"]["outputUriPrefix"]})
    [_, sent_made] = seen(fake_google, "POST", JOBS)
    assert sent_made.json == ours_made.json
    job_id = job.name.rsplit("/", 1)[1]
    assert job.name == f"projects/123456789012/locations/{REGION}/batchPredictionJobs/{job_id}"  # by number
    assert client.batches.get(name=job.name).state.name == "JOB_STATE_RUNNING"
    [sent_read] = seen(fake_google, "GET", f"{JOBS}/{job_id}")  # by its id, under the project's id: as ours
    client.batches.cancel(name=job.name)
    [sent_cancel] = seen(fake_google, "POST", f"{JOBS}/{job_id}:cancel")
    assert (ours_cancel.body, ours_read.query, ours_cancel.query) == (sent_cancel.body, sent_read.query,
                                                                       sent_cancel.query) == (b"", "", "")
    assert all(r.problem is None for r in (ours_made, ours_read, ours_cancel, sent_made, sent_read, sent_cancel))


def test_a_cancelled_batch_is_cancelled_at_vertex_and_its_unrun_lines_cancelled(gcp, fake_google, owner,  # noqa: F811
                                                                                queued):
    fake_google.configure(batch_pending_polls=5)
    batch, lines = anthropic_batch(owner, [message(0), message(1)])
    forward.launch(batch, lines)
    batch.refresh_from_db()

    assert finish.cancel(batch).status == "cancelling"

    [cancel] = seen(fake_google, "POST", f"{JOBS}/{batch.upstream_id}:cancel")
    assert cancel.headers["authorization"].startswith("Bearer ya29.fake-") and cancel.body == b""
    assert queued == [(POLL, batch.pk, 1)]  # no run here: its poll ends it
    assert tasks.poll_forwarded_batch(batch.pk) == "cancelled"  # JOB_STATE_CANCELLED, no output written
    batch.refresh_from_db()
    assert batch.status == "cancelled" and statuses(batch) == ["cancelled", "cancelled"]
    assert BatchLine.objects.filter(batch=batch, status_code__isnull=False).count() == 0
    flushed()
    assert UsageRecord.objects.filter(account=owner).count() == CallRecord.objects.filter(
        account_id=owner.pk).count() == 0


@pytest.mark.parametrize("case,why", [
    ("gemini", f"serves Claude models only, not {GEMINI}"),
    ("two models", "a batch prediction job runs one model; this batch names 2"),
    ("no location", "not a Cloud Storage location"),
])
def test_a_batch_vertex_ai_cannot_take_runs_here(gcp, fake_google, owner, queued, caplog, case, why):  # noqa: F811
    bodies = [message(0), message(1)]
    if case == "gemini":
        bodies = [message(0, f"gcp/{GEMINI}")]
    elif case == "two models":
        bodies[1] = message(1, f"gcp/{OTHER_CLAUDE}")
    else:  # a row written around ModelServer.clean, which refuses forwarding without it
        type(gcp).objects.filter(pk=gcp.pk).update(batch_gcs_uri="")
    batch, lines = anthropic_batch(owner, bodies)

    with caplog.at_level(logging.WARNING, logger="batches.forward"):
        assert forward.launch(batch, lines) is False

    assert queued == [(RUN, batch.pk, None)]
    assert f"batch {batch.pk}: not forwarded to server gcp" in caplog.text and why in caplog.text
    assert fake_google.requests == []  # refused before any call
    assert runner.run_batch(batch.pk) == runner.Outcome.ENDED
    assert statuses(batch) == ["succeeded"] * len(bodies)
    assert len(model_calls(fake_google)) == len(bodies)


def test_an_openai_batch_of_claude_on_vertex_runs_here(gcp, fake_google, owner, queued):  # noqa: F811
    """Vertex AI's batch prediction of Claude takes Anthropic's format: an OpenAI batch is not for it."""
    batch = openai_batch(owner, [{"model": f"gcp/{CLAUDE}", "messages": [{"role": "user", "content": "line 0"}]}])

    assert tasks.validate_batch(batch.pk) == "in_progress"

    assert queued == [(RUN, batch.pk, None)]
    assert fake_google.requests == [] and Batch.objects.get(pk=batch.pk).upstream_id == ""


@pytest.mark.parametrize("operation,failure", [
    ("upload", [403, None, "gateway@my-project.iam.gserviceaccount.com does not have storage.objects.create "
                           "access to the Google Cloud Storage object."]),
    ("create", [400, "INVALID_ARGUMENT", "Batch prediction is not supported for this model in us-east5."]),
])
def test_a_submit_vertex_ai_refuses_runs_here(gcp, fake_google, owner, queued, caplog, operation,  # noqa: F811
                                              failure):
    fake_google.configure(batch_fail={operation: failure})
    batch, lines = anthropic_batch(owner, [message(0), message(1)])

    with caplog.at_level(logging.WARNING, logger="batches.forward"):
        assert forward.launch(batch, lines) is False

    batch.refresh_from_db()
    assert (batch.forwarded_to, batch.upstream_id, batch.runner, batch.runner_until) == (None, "", "", None)
    assert queued == [(RUN, batch.pk, None)]
    assert f"batch {batch.pk}: not forwarded to server gcp" in caplog.text and failure[2] in caplog.text
    assert len(seen(fake_google, "POST", JOBS)) == (operation == "create")
    assert runner.run_batch(batch.pk) == runner.Outcome.ENDED and statuses(batch) == ["succeeded"] * 2


def test_a_job_vertex_ai_failed_whole_runs_here(gcp, fake_google, owner, queued):  # noqa: F811
    fake_google.configure(batch_job_failed="Quota exceeded for batch prediction jobs.")
    batch, lines = anthropic_batch(owner, [message(0)])
    forward.launch(batch, lines)

    assert tasks.poll_forwarded_batch(batch.pk) == "local"

    batch.refresh_from_db()
    assert (batch.forwarded_to, batch.upstream_id, statuses(batch)) == (None, "", ["queued"])
    assert queued[-1] == (RUN, batch.pk, None)
    assert runner.run_batch(batch.pk) == runner.Outcome.ENDED and statuses(batch) == ["succeeded"]
    assert Batch.objects.get(pk=batch.pk).status == "completed"
