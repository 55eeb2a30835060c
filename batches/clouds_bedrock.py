"""AWS Bedrock's batch inference, for an Anthropic message batch of Claude models on a Bedrock server
(batches/forward.py; batches/cloud_apis.py puts it beside OpenAI's and Anthropic's APIs).

- `submit`: the requests written as one JSONL file of records `{"recordId", "modelInput"}` to the server's S3
  location (`batch_s3_uri`), at `<location>/<batch id>/<batch id>.jsonl`, each `modelInput` the InvokeModel body
  the runtime sends for the same request (bedrock/claude.py `bedrock_body`: no `model`, Bedrock's
  `anthropic_version`, the betas the server carries); then a job of it (CreateModelInvocationJob,
  `POST /model-invocation-job`), run as the server's `batch_role_arn`, writing to `<location>/<batch id>/output/`,
  24 hours at most (Bedrock's shortest timeout; the batch's own window). The job's ARN is the batch's id there.
- `read`: GetModelInvocationJob (`GET /model-invocation-job/{ARN}`): Submitted, Validating, Scheduled and
  InProgress run (a cancel may be asked); Stopping waits; Completed and PartiallyCompleted end it completed,
  Stopped cancelled, Expired expired; Failed is the whole job refused (it runs here).
- `results`: Bedrock writes `<input name>.out` under `<output>/<job id>/` (beside its `manifest.json.out`): per
  record its `modelOutput` (the InvokeModel reply: an Anthropic message, succeeded with 200) or its `error`
  (`errorCode`, `errorMessage`: errored, in Anthropic's error shape). A stopped or expired job's records that were
  not answered are cancelled or expired, their ids read back from the input file.
- `cancel`: StopModelInvocationJob (`POST /model-invocation-job/{ARN}/stop`).

A record's `recordId` is its `custom_id` in hexadecimal: Bedrock documents record ids as alphanumeric, and an
Anthropic custom_id may hold `_` and `-`; the hex reads back to the custom_id exactly, with nothing stored.

What is not sent (a ValueError before anything is written: the batch runs on the gateway's workers): fewer than
MIN_RECORDS requests (Bedrock's quota "minimum number of records per batch inference job" refuses the job), a
batch naming more than one model (a job runs one), a model that is not Claude (its InvokeModel body is not
Anthropic's), a server without its S3 location or role (a row written around ModelServer.clean).

Two clients, chosen by what each call needs:
- S3 by boto3's S3 client (its uploads, listings and streamed reads), run in a thread, made for each call with the
  credentials the model calls are signed with (gateway/registry/aws_auth.py: the server's access key pair, else
  AWS's credential chain of the process), in the server's region, through `batch_s3_endpoint_url` when set (an S3
  VPC endpoint; the tests' fake S3). A Bedrock API key does not open S3: such a server's S3 calls take the chain's
  credentials.
- The control plane through the gateway's own HTTP client, signed by botocore as the runtime's calls are
  (bedrock/transport.py `signed_request`: SigV4 for the service `bedrock`, or the Bedrock API key as a bearer
  token, which the control plane takes too), at the runtime's address with `bedrock-runtime` made `bedrock`, as
  model discovery reaches it (gateway/registry/discovery.py `bedrock_control_plane`; any other address, a proxy or
  a fake of one's own, serves both). So its egress proxy, timeouts and Bedrock's error names are the model calls'
  (a throttled read is read again later; a job Bedrock no longer knows runs here), where boto3's `bedrock` client
  would be a second HTTP stack with its own retries and no per-server API key."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any
from urllib.parse import quote

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from django.db import connection

from batches.clouds import ANTHROPIC_STATUS, Result, State
from batches.models import Batch, BatchLine
from gateway.models import ModelServer
from gateway.registry import aws_auth
from gateway.registry.discovery import bedrock_control_plane
from gateway.registry.snapshot import Server, Target
from gateway.upstream.providers import bedrock
from gateway.upstream.providers.base import UNAVAILABLE, UpstreamError, send
from gateway.upstream.providers.bedrock.claude import bedrock_body
from gateway.upstream.providers.bedrock.transport import answered_failure, signed_request

Status, Line = Batch.Status, BatchLine.Status
MIN_RECORDS = 100  # Bedrock's quota: the fewest records a batch inference job takes
TIMEOUT_HOURS = 24  # the shortest timeoutDurationInHours Bedrock takes: the batch's own window
JOBS = "/model-invocation-job"
ERROR_TYPES = {status: kind for kind, status in ANTHROPIC_STATUS.items()}
_S3_URI = re.compile(r"^s3://(?P<bucket>[^/]+)/?(?P<prefix>.*?)/?$")


def record_id(custom_id: str) -> str:
    return custom_id.encode().hex()


def custom_id_of(record: Any) -> str | None:
    try:
        return bytes.fromhex(record).decode() if isinstance(record, str) and record else None
    except ValueError:  # UnicodeDecodeError is one
        return None


def _job_name(name: str) -> str:
    """A batch id as a job name and an idempotency token take it: letters, digits and dashes."""
    return re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-")[:63]


def _split(uri: str) -> tuple[str, str]:
    found = _S3_URI.match(uri)
    if found is None:
        raise ValueError(f"not an S3 location: {uri!r}")
    return found["bucket"], found["prefix"]


def _key(prefix: str, *parts: str) -> str:
    return "/".join(part for part in (prefix, *parts) if part)


class BedrockBatches:
    """Bedrock's batch inference (the module's docstring)."""

    FORMAT = Batch.Kind.ANTHROPIC  # the Messages requests of Claude models, as InvokeModel takes them

    RUNNING = ("Submitted", "Validating", "Scheduled", "InProgress")
    ENDED = {"Completed": Status.COMPLETED, "PartiallyCompleted": Status.COMPLETED, "Stopped": Status.CANCELLED,
             "Expired": Status.EXPIRED}
    UNANSWERED = {"Stopped": Line.CANCELLED, "Expired": Line.EXPIRED}  # a record such a job left without output

    @staticmethod
    async def submit(target: Target, *, name: str, endpoint: str, requests: list[tuple[str, dict]]) -> str:
        server = target.server
        if len(requests) < MIN_RECORDS:
            raise ValueError(f"Bedrock's batch inference takes {MIN_RECORDS} requests or more; this batch has "
                             f"{len(requests)}")
        models = {body.get("model") for _, body in requests}
        if models != {target.name}:
            raise ValueError(f"a Bedrock batch inference job runs one model; this batch names {len(models)}")
        if bedrock.wire(target) != "anthropic":
            raise ValueError(f"{target.name} is not a Claude model: only Claude's requests are Anthropic's on Bedrock")
        records = b"".join(json.dumps({"recordId": record_id(custom_id),
                                       "modelInput": bedrock_body(target, body, {})[0]},
                                      ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
                           for custom_id, body in requests)
        location, role = await asyncio.to_thread(_upload, server, name, records)
        job = _job_name(name)
        made = await _call(server, "POST", JOBS, {
            "jobName": job, "roleArn": role, "clientRequestToken": job, "modelId": target.name,
            "inputDataConfig": {"s3InputDataConfig": {"s3Uri": f"{location}/{name}.jsonl"}},
            "outputDataConfig": {"s3OutputDataConfig": {"s3Uri": f"{location}/output/"}},
            "timeoutDurationInHours": TIMEOUT_HOURS})
        arn = made.get("jobArn")
        if not isinstance(arn, str) or not arn.startswith("arn:"):
            raise ValueError("the answer has no jobArn")
        return arn

    @classmethod
    async def read(cls, target: Target, upstream_id: str) -> State:
        data = await _call(target.server, "GET", f"{JOBS}/{quote(upstream_id, safe='')}")
        status = str(data.get("status"))
        if status == "Failed":
            return State(status, ended=True, failed=str(data.get("message") or "no reason given"), answer=data)
        if status in cls.ENDED:
            return State(status, ended=True, end_as=cls.ENDED[status], answer=data)
        return State(status, running=status in cls.RUNNING, answer=data)

    @classmethod
    async def results(cls, target: Target, state: State) -> dict[str, Result]:
        """Each record's result by custom_id (the module's docstring)."""
        answer = state.answer
        arn, output, source = (answer.get("jobArn"),
                               ((answer.get("outputDataConfig") or {}).get("s3OutputDataConfig") or {}).get("s3Uri"),
                               ((answer.get("inputDataConfig") or {}).get("s3InputDataConfig") or {}).get("s3Uri"))
        if not (isinstance(arn, str) and isinstance(output, str) and isinstance(source, str)):
            raise ValueError("the job's answer has no ARN, output or input location")
        records = await asyncio.to_thread(_read_output, target.server, output, arn.rpartition("/")[2],
                                          source if state.status in cls.UNANSWERED else None)
        found: dict[str, Result] = {}
        for entry in records.get("output", ()):
            custom_id = custom_id_of(entry.get("recordId"))
            if custom_id is not None:
                found[custom_id] = _result(entry)
        for record in records.get("input", ()):
            custom_id = custom_id_of(record)
            if custom_id is not None and custom_id not in found:
                found[custom_id] = Result(cls.UNANSWERED[state.status])
        return found

    @staticmethod
    async def cancel(target: Target, upstream_id: str) -> None:
        await _call(target.server, "POST", f"{JOBS}/{quote(upstream_id, safe='')}/stop", answer=False)


def _result(entry: dict[str, Any]) -> Result:
    output, error = entry.get("modelOutput"), entry.get("error")
    if isinstance(output, dict) and error is None:
        return Result(Line.SUCCEEDED, 200, output)
    error = error if isinstance(error, dict) else {}
    code = error.get("errorCode")
    status = code if isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599 else 500
    message = error.get("errorMessage")
    message = message if isinstance(message, str) and message else "Bedrock's batch job gave no answer for it."
    kind = ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "api_error")
    return Result(Line.ERRORED, status, {"type": "error", "error": {"type": kind, "message": message}})


async def _call(server: Server, method: str, path: str, payload: dict | None = None, *,
                answer: bool = True) -> dict[str, Any]:
    """One control-plane call, its JSON answer (UpstreamError when it is not a 200, ValueError when not JSON)."""
    content = json.dumps(payload, separators=(",", ":")).encode() if payload is not None else None
    request = await signed_request(server, method, f"{bedrock_control_plane(server.base_url)}{path}", content)
    response = await send(request, stream=False)
    if response.status_code != 200:
        raise answered_failure(response, response.content, request, server)
    if not answer:
        return {}
    data = json.loads(response.content)
    if not isinstance(data, dict):
        raise ValueError("the answer is not a JSON object")
    return data


# ------------------------------------------------------------------ S3 (boto3, in a thread of its own)

def _settings(server_id: int) -> tuple[str, str, str]:
    """The server's batch settings, from its row (the registry's server carries what a call needs; a batch is
    launched once): its S3 location, its role, its S3 endpoint."""
    try:
        found = ModelServer.objects.filter(pk=server_id).values_list(
            "batch_s3_uri", "batch_role_arn", "batch_s3_endpoint_url").first()
    finally:
        connection.close()  # this thread's, which ends with the call
    return found or ("", "", "")


def _s3(server: Server, endpoint: str):
    credentials = aws_auth.frozen(server.cloud)
    if credentials is None:
        raise ValueError(f"no AWS credentials to reach server {server.name}'s S3 location: give the server an access "
                         "key, or give the gateway's processes AWS credentials")
    return boto3.session.Session().client(
        "s3", region_name=server.cloud.region or None, endpoint_url=endpoint or None,
        aws_access_key_id=credentials.access_key, aws_secret_access_key=credentials.secret_key,
        aws_session_token=credentials.token,
        config=Config(connect_timeout=server.connect_timeout, read_timeout=server.read_timeout,
                      retries={"mode": "standard", "max_attempts": 3}))


def _s3_failure(exc: Exception, what: str) -> UpstreamError:
    if isinstance(exc, ClientError):
        error = exc.response.get("Error") or {}
        words = f"{error.get('Code') or 'error'}: {error.get('Message') or 'no message'}"
    else:
        words = str(exc)
    return UpstreamError(UNAVAILABLE, 502, f"S3 {what}: {words}")


def _upload(server: Server, name: str, records: bytes) -> tuple[str, str]:
    """The records written to the server's S3 location: the batch's folder there, and the role the job runs as."""
    uri, role, endpoint = _settings(server.id)
    if not uri or not role:
        raise ValueError(f"server {server.name} has no batch S3 location or IAM role")
    bucket, prefix = _split(uri)
    try:
        _s3(server, endpoint).put_object(Bucket=bucket, Key=_key(prefix, name, f"{name}.jsonl"), Body=records,
                                         ContentType="application/jsonl")
    except (BotoCoreError, ClientError) as exc:
        raise _s3_failure(exc, f"write to {uri}") from None
    return f"s3://{bucket}/{_key(prefix, name)}", role


def _read_output(server: Server, output: str, job_id: str, source: str | None) -> dict[str, list]:
    """The job's output records (every `*.jsonl.out` under `<output>/<job id>/`) and, given its input file, the
    record ids it holds."""
    _, _, endpoint = _settings(server.id)
    bucket, prefix = _split(output)
    client = _s3(server, endpoint)
    found: dict[str, list] = {"output": [], "input": []}
    try:
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=_key(prefix, job_id) + "/")
        keys = [item["Key"] for page in pages for item in page.get("Contents", ())
                if item["Key"].endswith(".jsonl.out")]
        for key in keys:
            found["output"] += [entry for entry in _lines(client, bucket, key) if isinstance(entry, dict)]
        if source is not None:
            bucket, key = _split(source)
            found["input"] = [entry.get("recordId") for entry in _lines(client, bucket, key) if isinstance(entry, dict)]
    except (BotoCoreError, ClientError) as exc:
        raise _s3_failure(exc, f"read of {output}") from None
    return found


def _lines(client, bucket: str, key: str):
    """An object's JSON lines, read as they arrive; a line that is not JSON is skipped (its record left out)."""
    for raw in client.get_object(Bucket=bucket, Key=key)["Body"].iter_lines():
        if raw.strip():
            try:
                yield json.loads(raw)
            except ValueError:
                continue
