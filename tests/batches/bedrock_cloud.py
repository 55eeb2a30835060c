"""What the tests of batches forwarded to AWS Bedrock's batch inference share: a fake S3 (moto's server, in this
process) holding the operator's bucket, the fake control plane whose jobs read and write it
(tests/batches/bedrock_jobs.py), a Bedrock server on both that forwards batches, and its Claude model priced."""

from __future__ import annotations

import json
from decimal import Decimal

import boto3
import pytest
from moto.server import ThreadedMotoServer

from tests.batches.bedrock_jobs import FakeBedrockJobs
from tests.factories import ModelFactory, ModelServerFactory
from tests.gateway.upstream.bedrock.fake import ACCESS_KEY, CLAUDE, REGION, SECRET_KEY
from tests.servers import free_port

BUCKET = "gateway-bedrock-batches"
PREFIX = "team-a/batches"
ROLE = "arn:aws:iam::123456789012:role/BedrockBatch"
LLAMA = "meta.llama3-8b-instruct-v1:0"


@pytest.fixture(scope="module")
def s3_endpoint():
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture(scope="module")
def _bucket(s3_endpoint):
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name=REGION, aws_access_key_id="test-key",
                          aws_secret_access_key="test-secret")
    client.create_bucket(Bucket=BUCKET)
    yield client
    # moto keeps its buckets in the process, across servers: emptied and removed, so a later start begins bare
    for key in keys_in(client):
        client.delete_object(Bucket=BUCKET, Key=key)
    client.delete_bucket(Bucket=BUCKET)


@pytest.fixture
def bucket(_bucket):
    """The bucket, emptied before each test."""
    for key in keys_in(_bucket):
        _bucket.delete_object(Bucket=BUCKET, Key=key)
    return _bucket


@pytest.fixture(scope="module")
def _plane(s3_endpoint):
    fake = FakeBedrockJobs(s3_endpoint).start()
    yield fake
    fake.stop()


@pytest.fixture
def jobs(_plane):
    """The fake control plane, its knobs, requests and jobs reset for each test."""
    yield _plane.reset()
    _plane.reset()


def bedrock_cloud(jobs, s3_endpoint, *, name: str = "aws", model: str = CLAUDE, **fields):
    """A Bedrock server on the fake control plane, signed with the fake's key, forwarding batches through the fake
    S3; its model priced (3 and 15 per million, the default batch discount)."""
    settings = {"kind": "bedrock", "base_url": jobs.url, "region": REGION, "aws_access_key_id": ACCESS_KEY,
                "aws_secret_access_key": SECRET_KEY, "is_remote": True, "read_timeout": 5.0, "forward_batches": True,
                "batch_s3_uri": f"s3://{BUCKET}/{PREFIX}", "batch_role_arn": ROLE,
                "batch_s3_endpoint_url": s3_endpoint, **fields}
    server = ModelServerFactory(name=name, **settings)
    ModelFactory(server=server, name=model, input_price=Decimal("3"), output_price=Decimal("15"))
    return server


def message(index: int, model: str = f"aws/{CLAUDE}") -> dict:
    return {"model": model, "max_tokens": 64, "messages": [{"role": "user", "content": f"line {index}"}]}


def keys_in(client) -> list[str]:
    return sorted(item["Key"] for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
                  for item in page.get("Contents", ()))


def records_at(client, key: str) -> list[dict]:
    return [json.loads(raw) for raw in client.get_object(Bucket=BUCKET, Key=key)["Body"].read().splitlines()]
