"""boto3's `bedrock` client as the oracle of Bedrock's batch inference control plane: the requests the gateway
makes when it forwards a batch to Bedrock, reads its job and stops one (batches/clouds_bedrock.py) are the ones
boto3 makes for CreateModelInvocationJob, GetModelInvocationJob and StopModelInvocationJob with the same
arguments (method, path, JSON body, a SigV4 signature for the service `bedrock` in the server's region over the
same headers, verified by the fake), and boto3 reads the fake's answers (tests/batches/bedrock_jobs.py) as
Bedrock's own."""

import re

import boto3
import pytest
from botocore.config import Config

from batches import finish, forward, tasks
from batches.clouds_bedrock import MIN_RECORDS
from tests.batches.bedrock_cloud import _bucket, _plane, bedrock_cloud, bucket, jobs, message, s3_endpoint
from tests.batches.forwarding import anthropic_batch, queued
from tests.gateway.upstream.bedrock.fake import ACCESS_KEY, REGION, SECRET_KEY

pytestmark = pytest.mark.django_db(transaction=True)
_ = queued, _bucket, _plane, bucket, jobs, s3_endpoint  # the fixtures
JOB = re.compile(r"arn%3Aaws%3Abedrock%3A[a-z0-9-]+%3A\d{12}%3Amodel-invocation-job%2F[a-z0-9]{12}")
SCOPE = re.compile(r"^AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/\d{8}/(?P<region>[^/]+)/(?P<service>[^/]+)/")


def requests_of(jobs) -> list[tuple]:
    """Each request: its method, its path with the job's ARN made general, its JSON body, who signed it for which
    region and service, the headers it signed, and whether the signature verified (None: it did)."""
    found = []
    for request in jobs.requests:
        scope = SCOPE.match(request.headers.get("authorization", ""))
        found.append((request.method, JOB.sub("ARN", request.raw_path), request.json,
                      scope.group("key", "region", "service") if scope else None, request.signed, request.problem))
    return found


def test_the_gateways_requests_to_bedrocks_batch_jobs_are_boto3s(jobs, s3_endpoint, bucket, owner, queued,
                                                                 settings):
    settings.BATCH_FORWARD_POLL_SECONDS = 1
    bedrock_cloud(jobs, s3_endpoint)
    jobs.configure(pending_reads=0)
    done, lines = anthropic_batch(owner, [message(i) for i in range(MIN_RECORDS)])
    assert forward.launch(done, lines) is True
    assert tasks.poll_forwarded_batch(done.pk) == "completed"
    jobs.configure(pending_reads=100)
    stopped, lines = anthropic_batch(owner, [message(i) for i in range(MIN_RECORDS)])
    forward.launch(stopped, lines)
    stopped.refresh_from_db()
    finish.cancel(stopped)
    ours = requests_of(jobs)
    made = [request.json for request in jobs.requests if request.raw_path == "/model-invocation-job"]
    jobs.reset().configure(pending_reads=0)  # the same idempotency tokens make new jobs again

    client = boto3.client("bedrock", endpoint_url=jobs.url, region_name=REGION, aws_access_key_id=ACCESS_KEY,
                          aws_secret_access_key=SECRET_KEY, config=Config(retries={"max_attempts": 1}))
    arn = client.create_model_invocation_job(**made[0])["jobArn"]
    read = client.get_model_invocation_job(jobIdentifier=arn)
    assert (read["status"], read["jobArn"], read["modelId"], read["roleArn"]) == (
        "Completed", arn, made[0]["modelId"], made[0]["roleArn"])
    assert read["outputDataConfig"] == made[0]["outputDataConfig"]
    jobs.configure(pending_reads=100)
    arn = client.create_model_invocation_job(**made[1])["jobArn"]
    client.stop_model_invocation_job(jobIdentifier=arn)
    sdk = requests_of(jobs)

    assert ours == sdk
    assert [(method, path) for method, path, *_ in ours] == [
        ("POST", "/model-invocation-job"), ("GET", "/model-invocation-job/ARN"), ("POST", "/model-invocation-job"),
        ("POST", "/model-invocation-job/ARN/stop")]
    assert {(scope, problem) for *_, scope, _, problem in ours} == {((ACCESS_KEY, REGION, "bedrock"), None)}
