"""A fake of AWS Bedrock's batch inference control plane on loopback, for the tests of batches forwarded to it
(tests/batches/test_forward_bedrock*.py), its jobs reading and writing a fake S3 (moto's server) as Bedrock's
read and write the operator's bucket.

- CreateModelInvocationJob (`POST /model-invocation-job`) takes a body of the keys, types, lengths and patterns
  Bedrock's API gives (botocore's own model of it: the validation boto3 does before it sends, and the patterns),
  else a 400 ValidationException; the same `clientRequestToken` again is the same job.
- GetModelInvocationJob (`GET /model-invocation-job/{ARN or id}`) answers `InProgress` for `pending_reads` reads,
  then runs the job: reads its input file from the bucket, answers each record with the reference upstream's
  Messages reply (tests/upstream/anthropic_wire.py: an echo) as InvokeModel gives it to Claude, or with Bedrock's
  error object (a record at `failing_positions`, or one whose body InvokeModel would refuse), writes
  `<input name>.out` and `manifest.json.out` under `<output>/<job id>/`, and is `Completed`; a job of fewer than
  100 records, or with `fail_job` set, is `Failed` with its message.
- StopModelInvocationJob (`POST .../stop`) makes a running job `Stopping`, and the next read `Stopped`, the first
  `answered_before_stop` records written.

Every request is recorded and must be signed for the service `bedrock` (SigV4, verified by botocore from the
credentials the fake knows: tests/gateway/upstream/bedrock/sigv4.py), else a 403 in Bedrock's shape."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import re
import threading
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote

import boto3
import botocore.session
from botocore.validate import ParamValidator

from tests.gateway.upstream.bedrock import sigv4
from tests.gateway.upstream.bedrock.fake import ACCESS_KEY, REGION, SECRET_KEY
from tests.servers import serving
from tests.upstream.anthropic_wire import messages_create
from tests.upstream.core import DEFAULTS as REFERENCE_DEFAULTS
from tests.upstream.core import ClientError

ACCOUNT = "123456789012"
MINIMUM = 100  # Bedrock's quota: the fewest records of a job
SERVICE = botocore.session.get_session().get_service_model("bedrock")
DEFAULTS: dict[str, Any] = {
    "credentials": {ACCESS_KEY: (SECRET_KEY, None)},
    "region": REGION,
    "pending_reads": 1,  # reads answered InProgress before the job runs
    "failing_positions": [],  # the records (by position in the input file) answered with an error object
    "answered_before_stop": 0,  # of a stopped job, the records written before it stopped
    "fail_create": None,  # (status, x-amzn-ErrorType, message): CreateModelInvocationJob refused
    "fail_job": None,  # a message: the job Failed when it runs
}


@dataclass
class Recorded:
    method: str
    raw_path: str  # as sent (percent-encoding kept)
    headers: dict[str, str]  # lower-case names
    body: bytes
    json: Any
    problem: str | None  # why its signature was refused; None when it verified

    @property
    def signed(self) -> list[str] | None:
        return sigv4.signed_names(self.headers)


class Refused(Exception):
    def __init__(self, status: int, error_type: str, message: str):
        super().__init__(message)
        self.status, self.error_type, self.message = status, error_type, message


@dataclass
class Job:
    request: dict[str, Any]
    job_id: str
    status: str = "Submitted"
    reads: int = 0
    message: str = ""
    submitted: str = field(default_factory=lambda: _now())
    ended: str | None = None

    @property
    def arn(self) -> str:
        return f"arn:aws:bedrock:{REGION}:{ACCOUNT}:model-invocation-job/{self.job_id}"

    def answer(self) -> dict[str, Any]:
        body = {**{key: self.request[key] for key in ("jobName", "roleArn", "modelId", "clientRequestToken",
                                                      "inputDataConfig", "outputDataConfig",
                                                      "timeoutDurationInHours") if key in self.request},
                "jobArn": self.arn, "status": self.status, "submitTime": self.submitted, "lastModifiedTime": _now()}
        return {**body, **({"message": self.message} if self.message else {}),
                **({"endTime": self.ended} if self.ended else {})}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _pattern_mismatch(value: Any, shape, where: str) -> str | None:
    """The first string of `value` that does not match its shape's pattern (botocore's validator checks types and
    lengths; the service checks the patterns too)."""
    if shape.type_name == "structure" and isinstance(value, dict):
        return next((found for name, member in shape.members.items() if name in value
                     if (found := _pattern_mismatch(value[name], member, f"{where}.{name}"))), None)
    pattern = shape.metadata.get("pattern")
    if shape.type_name == "string" and pattern and not re.fullmatch(pattern, value):
        return f"Value '{value}' at '{where}' failed to satisfy constraint: Member must satisfy regular expression " \
               f"pattern: {pattern}"
    return None


def _split(uri: str) -> tuple[str, str]:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bucket, key


class Plane:
    """The control plane's state: its knobs, the requests it received, its jobs by id."""

    def __init__(self, s3_endpoint: str) -> None:
        self.s3_endpoint = s3_endpoint
        self.knobs = copy.deepcopy(DEFAULTS)
        self.requests: list[Recorded] = []
        self.jobs: dict[str, Job] = {}
        self.lock = threading.Lock()

    def s3(self):
        """The bucket as Bedrock's job reads and writes it, as the job's role (moto takes any key)."""
        return boto3.client("s3", endpoint_url=self.s3_endpoint, region_name=REGION, aws_access_key_id="role-key",
                            aws_secret_access_key="role-secret")

    def create(self, body: Any) -> dict[str, Any]:
        if self.knobs["fail_create"]:
            raise Refused(*self.knobs["fail_create"])
        shape = SERVICE.operation_model("CreateModelInvocationJob").input_shape
        report = ParamValidator().validate(body if isinstance(body, dict) else {}, shape)
        if report.has_errors() or not isinstance(body, dict):
            raise Refused(400, "ValidationException", report.generate_report() or "The body is not a JSON object.")
        if mismatch := _pattern_mismatch(body, shape, "body"):
            raise Refused(400, "ValidationException", f"1 validation error detected: {mismatch}")
        token = body.get("clientRequestToken")
        with self.lock:
            same = next((job for job in self.jobs.values() if token and job.request.get("clientRequestToken") == token),
                        None)
            job = same or Job(body, uuid.uuid4().hex[:12])
            self.jobs[job.job_id] = job
        return {"jobArn": job.arn}

    def job(self, identifier: str) -> Job:
        found = self.jobs.get(unquote(identifier).rpartition("/")[2])
        if found is None:
            raise Refused(404, "ResourceNotFoundException", f"Could not find job {unquote(identifier)}")
        return found

    def read(self, job: Job) -> dict[str, Any]:
        job.reads += 1
        if job.status == "Stopping":
            self.run(job, stopped=True)
        elif job.status in ("Submitted", "InProgress"):
            if job.reads <= self.knobs["pending_reads"]:
                job.status = "InProgress"
            else:
                self.run(job)
        return job.answer()

    def stop(self, job: Job) -> dict[str, Any]:
        if job.status not in ("Submitted", "Validating", "Scheduled", "InProgress"):
            raise Refused(400, "ValidationException", f"The job is {job.status}: it cannot be stopped.")
        job.status = "Stopping"
        return {}

    def run(self, job: Job, stopped: bool = False) -> None:
        """The job's records answered and written where Bedrock writes them; its end."""
        client = self.s3()
        bucket, key = _split(job.request["inputDataConfig"]["s3InputDataConfig"]["s3Uri"])
        records = [json.loads(raw) for raw in client.get_object(Bucket=bucket, Key=key)["Body"].read().splitlines()
                   if raw.strip()]
        job.ended = _now()
        if not stopped and (self.knobs["fail_job"] or len(records) < MINIMUM):
            job.status, job.message = "Failed", self.knobs["fail_job"] or (
                f"The number of records ({len(records)}) is below the minimum of {MINIMUM} per batch inference job.")
            return
        answered = records[:self.knobs["answered_before_stop"]] if stopped else records
        lines = [self.answer(index, record, job.request["modelId"]) for index, record in enumerate(answered)]
        out_bucket, prefix = _split(job.request["outputDataConfig"]["s3OutputDataConfig"]["s3Uri"])
        folder = f"{prefix.rstrip('/')}/{job.job_id}"
        client.put_object(Bucket=out_bucket, Key=f"{folder}/{key.rpartition('/')[2]}.out",
                          Body=b"".join(json.dumps(line).encode() + b"\n" for line in lines))
        errors = sum(1 for line in lines if "error" in line)
        manifest = {"totalRecordCount": len(records), "processedRecordCount": len(lines),
                    "successRecordCount": len(lines) - errors, "errorRecordCount": errors}
        client.put_object(Bucket=out_bucket, Key=f"{folder}/manifest.json.out", Body=json.dumps(manifest).encode())
        job.status = "Stopped" if stopped else "Completed"

    def answer(self, index: int, record: dict[str, Any], model: str) -> dict[str, Any]:
        """A record's line of the output: its modelOutput as InvokeModel answers Claude, or an error object."""
        line = {"recordId": record.get("recordId"), "modelInput": record.get("modelInput")}
        body = record.get("modelInput")
        if index in self.knobs["failing_positions"]:
            return {**line, "error": {"errorCode": 500, "errorMessage": "The model failed this record "
                                                                        "(failing_positions)."}}
        problem = None
        if not isinstance(body, dict) or body.get("anthropic_version") != "bedrock-2023-05-31":
            problem = "anthropic_version: bedrock-2023-05-31 is required"
        elif extraneous := [key for key in ("model", "stream") if key in body]:
            problem = f"extraneous key [{extraneous[0]}] is not permitted"
        if problem is None:
            try:
                reply = messages_create({**body, "model": model, "stream": False}, REFERENCE_DEFAULTS)
                return {**line, "modelOutput": json.loads(reply.body)}
            except ClientError as exc:
                problem = exc.message
        return {**line, "error": {"errorCode": 400, "errorMessage": f"Malformed input request: {problem}"}}


def route(plane: Plane, method: str, raw_path: str, body: Any) -> dict[str, Any]:
    parts = raw_path.split("/")  # "", "model-invocation-job", the job's quoted ARN or id, maybe "stop"
    if parts[:2] != ["", "model-invocation-job"] or len(parts) > 4:
        raise Refused(404, "UnknownOperationException", f"Unknown operation {method} {raw_path}")
    if len(parts) == 2 and method == "POST":
        return plane.create(body)
    if len(parts) == 3 and method == "GET":
        return plane.read(plane.job(parts[2]))
    if len(parts) == 4 and parts[3] == "stop" and method == "POST":
        return plane.stop(plane.job(parts[2]))
    raise Refused(404, "UnknownOperationException", f"Unknown operation {method} {raw_path}")


class PlaneApp:
    def __init__(self, plane: Plane):
        self.plane = plane

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        raw_path = (scope.get("raw_path") or scope["path"].encode()).decode("latin-1").partition("?")[0]
        try:
            data = json.loads(body) if body else None
        except ValueError:
            data = None
        plane = self.plane
        knobs = plane.knobs
        problem = sigv4.problem(scope["method"], raw_path, scope.get("query_string", b"").decode("latin-1"), headers,
                                body, knobs["credentials"], knobs["region"])
        plane.requests.append(Recorded(scope["method"], raw_path, headers, body, data, problem))
        try:
            if problem is not None:
                raise Refused(403, "InvalidSignatureException", f"The request signature is not valid: {problem}")
            answer, status, extra = await asyncio.to_thread(route, plane, scope["method"], raw_path, data), 200, []
        except Refused as exc:
            answer, status = {"message": exc.message}, exc.status
            extra = [(b"x-amzn-errortype", f"{exc.error_type}:http://internal.amazon.com/coral/".encode())]
        content = json.dumps(answer).encode()
        await send({"type": "http.response.start", "status": status, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(content)).encode()),
            (b"x-amzn-requestid", str(uuid.uuid4()).encode()), *extra]})
        await send({"type": "http.response.body", "body": content})


class FakeBedrockJobs:
    """A PlaneApp under uvicorn in a daemon thread on a free loopback port (tests/servers.py `serving`)."""

    def __init__(self, s3_endpoint: str) -> None:
        self.plane = Plane(s3_endpoint)
        self.running = contextlib.ExitStack()
        self.url = ""

    def start(self) -> FakeBedrockJobs:
        self.url = self.running.enter_context(serving(PlaneApp(self.plane), name="bedrock-jobs"))
        return self

    def stop(self) -> None:
        self.running.close()

    def configure(self, **knobs: Any) -> FakeBedrockJobs:
        unknown = set(knobs) - DEFAULTS.keys()
        if unknown:
            raise TypeError(f"unknown knob(s) of the fake Bedrock control plane: {sorted(unknown)}")
        self.plane.knobs.update(copy.deepcopy(knobs))
        return self

    def reset(self) -> FakeBedrockJobs:
        self.plane.knobs = copy.deepcopy(DEFAULTS)
        self.plane.requests.clear()
        self.plane.jobs.clear()
        return self

    @property
    def requests(self) -> list[Recorded]:
        return self.plane.requests
