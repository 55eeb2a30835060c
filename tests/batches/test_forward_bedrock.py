"""An Anthropic message batch of a Claude model on an AWS Bedrock server, forwarded to Bedrock's batch inference
(batches/clouds_bedrock.py): its records written to the server's S3 location, a job made of them, read until it
ends, its output records read back from the bucket and each line filled and metered once at the batch price;
below Bedrock's minimum of 100 records, of a model that is not Claude, of two models, or on a server without its
bucket or role, it runs here; a job Bedrock failed runs here; a cancel stops the job."""

import logging

import pytest

from batches import finish, forward, tasks
from batches.clouds_bedrock import MIN_RECORDS, record_id
from batches.models import Batch, BatchLine
from batches.queue import POLL, RUN
from gateway.models import CallRecord, ModelServer, UsageRecord
from gateway.registry.snapshot import registry
from gateway.usage.call_log import call_log
from gateway.usage.writer import usage_writer
from tests.batches.bedrock_cloud import (
    BUCKET,
    LLAMA,
    PREFIX,
    ROLE,
    _bucket,
    _plane,
    bedrock_cloud,
    bucket,
    jobs,
    keys_in,
    message,
    records_at,
    s3_endpoint,
)
from tests.batches.forwarding import anthropic_batch, queued, statuses
from tests.gateway.upstream.bedrock.fake import CLAUDE

pytestmark = pytest.mark.django_db(transaction=True)
_ = queued, _bucket, _plane, bucket, jobs, s3_endpoint  # the fixtures
PUBLIC = f"aws/{CLAUDE}"


@pytest.fixture
def cloud(jobs, s3_endpoint, bucket, settings):
    settings.BATCH_FORWARD_POLL_SECONDS = 1  # due at once (batches/forward.py DUE_SLACK_SECONDS)
    return bedrock_cloud(jobs, s3_endpoint)


def control(jobs) -> list[tuple[str, str]]:
    return [(r.method, r.raw_path) for r in jobs.requests]


def test_a_batch_of_claude_is_written_to_s3_run_as_a_job_and_its_lines_filled_and_metered_once(
        cloud, jobs, bucket, owner, queued):
    jobs.configure(pending_reads=1, failing_positions=[2])
    batch, lines = anthropic_batch(owner, [message(i) for i in range(MIN_RECORDS)])

    assert forward.launch(batch, lines) is True

    batch.refresh_from_db()
    assert batch.forwarded_to_id == cloud.pk and queued == [(POLL, batch.pk, 1)]
    [made] = jobs.requests
    job_id = batch.upstream_id.rpartition("/")[2]
    assert batch.upstream_id == f"arn:aws:bedrock:us-east-1:123456789012:model-invocation-job/{job_id}"
    assert (made.method, made.raw_path, made.problem, made.signed) == (
        "POST", "/model-invocation-job", None, ["content-type", "host", "x-amz-date"])
    folder = f"s3://{BUCKET}/{PREFIX}/{batch.pk}"
    name = batch.pk.replace("_", "-")
    assert made.json == {"jobName": name, "roleArn": ROLE, "clientRequestToken": name, "modelId": CLAUDE,
                         "inputDataConfig": {"s3InputDataConfig": {"s3Uri": f"{folder}/{batch.pk}.jsonl"}},
                         "outputDataConfig": {"s3OutputDataConfig": {"s3Uri": f"{folder}/output/"}},
                         "timeoutDurationInHours": 24}
    sent = records_at(bucket, f"{PREFIX}/{batch.pk}/{batch.pk}.jsonl")
    assert sent == [{"recordId": record_id(f"msg-{i}"), "modelInput": {
        "max_tokens": 64, "messages": [{"role": "user", "content": f"line {i}"}],
        "anthropic_version": "bedrock-2023-05-31"}} for i in range(MIN_RECORDS)]
    assert record_id("msg-0") == "6d73672d30"  # alphanumeric, as Bedrock's record ids are

    assert tasks.poll_forwarded_batch(batch.pk) == "waiting"
    assert statuses(batch) == ["running"] * MIN_RECORDS
    assert tasks.poll_forwarded_batch(batch.pk) == "completed"

    arn = batch.upstream_id.replace(":", "%3A").replace("/", "%2F")
    assert control(jobs) == [("POST", "/model-invocation-job"), ("GET", f"/model-invocation-job/{arn}"),
                             ("GET", f"/model-invocation-job/{arn}")]
    assert {r.problem for r in jobs.requests} == {None}
    assert keys_in(bucket) == [f"{PREFIX}/{batch.pk}/{batch.pk}.jsonl",
                               f"{PREFIX}/{batch.pk}/output/{job_id}/manifest.json.out",
                               f"{PREFIX}/{batch.pk}/output/{job_id}/{batch.pk}.jsonl.out"]
    batch.refresh_from_db()
    assert (batch.status, batch.runner, batch.runner_until) == ("completed", "", None)
    assert statuses(batch) == ["succeeded"] * 2 + ["errored"] + ["succeeded"] * (MIN_RECORDS - 3)
    first = BatchLine.objects.get(batch=batch, index=0)
    assert (first.status_code, first.result["type"], first.result["model"]) == (200, "message", PUBLIC)
    assert first.result["content"][0]["text"] == "Echo: line 0" and first.request_id
    failed = BatchLine.objects.get(batch=batch, index=2)
    assert (failed.status_code, failed.result) == (500, {"type": "error", "error": {
        "type": "api_error", "message": "The model failed this record (failing_positions)."}})

    usage_writer.flush()
    call_log.flush()
    price = registry().by_public_id[PUBLIC].price
    usage = first.result["usage"]
    cost = price.batch_cost_units(price.cost_units(input_tokens=usage["input_tokens"],
                                                   output_tokens=usage["output_tokens"]))
    assert cost > 0
    records = UsageRecord.objects.filter(account=owner)
    answered = BatchLine.objects.filter(batch=batch, status="succeeded")
    assert sorted(records.values_list("key", "model", "surface", "input_tokens", "output_tokens", "cost_units",
                                      "batch_id")) == sorted(
        (line.usage_key, PUBLIC, "messages", usage["input_tokens"], usage["output_tokens"], cost, batch.pk)
        for line in answered)
    assert not UsageRecord.objects.exclude(account=owner).exists()  # the batch's account's, no one else's
    rows = CallRecord.objects.filter(account_id=owner.pk)
    assert rows.count() == MIN_RECORDS and {(row.tags["batch"], row.model) for row in rows} == {(batch.pk, PUBLIC)}
    assert sorted(row.status for row in rows) == [200] * (MIN_RECORDS - 1) + [500]

    assert tasks.poll_forwarded_batch(batch.pk) == "held"  # ended: a poll run again reads and meters nothing
    usage_writer.flush()
    assert UsageRecord.objects.filter(account=owner).count() == MIN_RECORDS - 1 and len(jobs.requests) == 3


@pytest.mark.parametrize("case", ["99 requests", "not claude", "two models", "no bucket", "no role"])
def test_a_batch_bedrock_would_not_take_runs_here_with_nothing_written_or_sent(cloud, jobs, bucket, owner,
                                                                            queued, caplog, s3_endpoint, case):
    bodies = [message(i) for i in range(MIN_RECORDS)]
    why = "not forwarded to server aws"
    if case == "99 requests":
        bodies, why = bodies[:-1], "takes 100 requests or more; this batch has 99"
    elif case == "not claude":
        llama = bedrock_cloud(jobs, s3_endpoint, name="meta", model=LLAMA)
        bodies, why = [message(i, f"{llama.name}/{LLAMA}") for i in range(MIN_RECORDS)], f"{LLAMA} is not a Claude"
    elif case == "two models":
        from tests.factories import ModelFactory

        ModelFactory(server=cloud, name="anthropic.claude-haiku-4-5-20251001-v1:0")
        bodies[1] = message(1, "aws/anthropic.claude-haiku-4-5-20251001-v1:0")
        why = "runs one model; this batch names 2"
    else:  # a row written around ModelServer.clean, which refuses it
        field = "batch_s3_uri" if case == "no bucket" else "batch_role_arn"
        ModelServer.objects.filter(pk=cloud.pk).update(**{field: ""})
        why = "server aws has no batch S3 location or IAM role"
    batch, lines = anthropic_batch(owner, bodies)

    with caplog.at_level(logging.WARNING, logger="batches.forward"):
        assert forward.launch(batch, lines) is False

    assert why in caplog.text
    assert queued == [(RUN, batch.pk, None)]
    batch.refresh_from_db()
    assert (batch.forwarded_to, batch.upstream_id, batch.runner, batch.runner_until) == (None, "", "", None)
    assert statuses(batch) == ["queued"] * len(bodies)
    assert jobs.requests == [] and keys_in(bucket) == []


@pytest.mark.parametrize("case", ["no such bucket", "job refused"])
def test_a_submit_s3_or_bedrock_refuses_runs_here(cloud, jobs, bucket, owner, queued, caplog, case):
    if case == "no such bucket":
        ModelServer.objects.filter(pk=cloud.pk).update(batch_s3_uri="s3://no-such-bucket/batches")
        why = "S3 write to s3://no-such-bucket/batches: NoSuchBucket"
    else:
        jobs.configure(fail_create=(403, "AccessDeniedException", "User is not authorized to perform iam:PassRole"))
        why = "AccessDeniedException: User is not authorized to perform iam:PassRole"
    batch, lines = anthropic_batch(owner, [message(i) for i in range(MIN_RECORDS)])

    with caplog.at_level(logging.WARNING, logger="batches.forward"):
        assert forward.launch(batch, lines) is False

    assert f"batch {batch.pk}: not forwarded to server aws" in caplog.text and why in caplog.text
    assert queued == [(RUN, batch.pk, None)] and statuses(batch) == ["queued"] * MIN_RECORDS
    assert control(jobs) == ([] if case == "no such bucket" else [("POST", "/model-invocation-job")])


def test_a_job_bedrock_failed_runs_here(cloud, jobs, bucket, owner, queued):
    jobs.configure(pending_reads=0, fail_job="The role cannot read s3://gateway-bedrock-batches.")
    batch, lines = anthropic_batch(owner, [message(i) for i in range(MIN_RECORDS)])
    assert forward.launch(batch, lines) is True

    assert tasks.poll_forwarded_batch(batch.pk) == "local"

    batch.refresh_from_db()
    assert (batch.forwarded_to, batch.upstream_id, batch.status) == (None, "", "in_progress")
    assert queued[-1] == (RUN, batch.pk, None) and statuses(batch) == ["queued"] * MIN_RECORDS


def test_a_cancel_stops_the_job_and_the_lines_it_did_not_answer_are_cancelled(cloud, jobs, bucket, owner, queued):
    jobs.configure(pending_reads=100, answered_before_stop=3)
    batch, lines = anthropic_batch(owner, [message(i) for i in range(MIN_RECORDS)])
    forward.launch(batch, lines)
    batch.refresh_from_db()

    assert finish.cancel(batch).status == "cancelling"

    arn = batch.upstream_id.replace(":", "%3A").replace("/", "%2F")
    assert control(jobs)[-1] == ("POST", f"/model-invocation-job/{arn}/stop")
    assert jobs.requests[-1].body == b"" and jobs.requests[-1].problem is None
    assert queued == [(POLL, batch.pk, 1)]
    assert tasks.poll_forwarded_batch(batch.pk) == "cancelled"
    assert [method for method, _ in control(jobs)] == ["POST", "POST", "GET"]  # stopped once: not asked again

    batch.refresh_from_db()
    assert batch.status == "cancelled" and batch.cancelled_at is not None
    assert statuses(batch) == ["succeeded"] * 3 + ["cancelled"] * (MIN_RECORDS - 3)
    assert BatchLine.objects.get(batch=batch, index=3).result is None
    usage_writer.flush()
    assert sorted(UsageRecord.objects.filter(account=owner).values_list("key", flat=True)) == sorted(
        line.usage_key for line in BatchLine.objects.filter(batch=batch, index__lt=3))
    assert Batch.objects.get(pk=batch.pk).upstream_id == batch.upstream_id
