"""The fake Google's batch prediction and Cloud Storage (fake.py routes them here): Vertex AI's
`batchPredictionJobs` (create, get, `:cancel`, under `/v1/projects/{project}/locations/{location}/`) and Cloud
Storage's JSON API (a media upload, a listing by prefix, a media download), the objects kept in memory.

A job of a Claude model (`publishers/anthropic/models/…`) reads its JSON lines input from the fake's storage
when it runs and writes `predictions_0001.jsonl`, … (`batch_lines_per_file` lines each) into a folder
`prediction-model-<time>` of its `outputUriPrefix`: each line the request's `custom_id` and `request`, with the
`response` the reference upstream's Messages reply gives it (tests/upstream/anthropic_wire.py) and an empty
`status`, or, failed, no response: a `batch_failing_ids` one with the failure's words in `status` (Google's
error object in them), one the Messages API refuses (or not in Vertex AI's form) with Google's `error` object.
Knobs: `batch_pending_polls` reads report it running first; `batch_job_failed` fails it whole (its `error`),
nothing run; `batch_fail` makes an operation (`upload`, `list`, `download`, `create`, `get`, `cancel`) answer
an error. A cancel ends a job not yet ended at its next read, cancelled, with no output. Jobs are named with the
project's number, as Vertex AI names them, and found by their id under either the number or the id."""

from __future__ import annotations

import itertools
import json
import time
from typing import Any
from urllib.parse import parse_qs, unquote

from tests.upstream.anthropic_wire import messages_create
from tests.upstream.core import ClientError, Reply

PROJECT_NUMBER = "123456789012"
VERTEX_VERSION = "vertex-2023-10-16"
ENDED = ("JOB_STATE_SUCCEEDED", "JOB_STATE_PARTIALLY_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED",
         "JOB_STATE_EXPIRED")
_ids = itertools.count(4_000_000_000_000_000_001)


class Refused(Exception):
    """An error answered in Google's shape: `status` is Vertex AI's status name, None for Cloud Storage's."""

    def __init__(self, code: int, message: str, status: str | None = None):
        super().__init__(message)
        self.code, self.message, self.status = code, message, status

    def reply(self) -> Reply:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.status:
            error["status"] = self.status
        else:  # Cloud Storage's JSON API: its `errors` list, no status name
            error["errors"] = [{"message": self.message, "domain": "global", "reason": "notFound"
                                if self.code == 404 else "invalid"}]
        return Reply(json.dumps({"error": error}).encode(), status=self.code)


def handles(parts: list[str]) -> bool:
    return (parts[:1] == ["storage"] or parts[:2] == ["upload", "storage"]
            or (len(parts) >= 6 and parts[0] == "v1" and parts[1] == "projects" and parts[5] == "batchPredictionJobs"))


def route(req, state) -> Reply:
    store, knobs = state.store, state.knobs
    try:
        parts = req.raw_path.strip("/").split("/")
        if parts[0] in ("storage", "upload"):
            return _storage(req, parts, store, knobs)
        return _jobs(req, parts, store, knobs)
    except Refused as exc:
        return exc.reply()


def _fail(knobs: dict[str, Any], operation: str) -> None:
    failure = knobs["batch_fail"].get(operation)
    if failure:
        code, status, message = failure
        raise Refused(code, message, status)


def _json_reply(data: Any) -> Reply:
    return Reply(json.dumps(data).encode())


# ---- Cloud Storage's JSON API -------------------------------------------------------------------

def _storage(req, parts: list[str], store: dict[str, Any], knobs: dict[str, Any]) -> Reply:
    objects = store.setdefault("objects", {})
    query = {key: values[0] for key, values in parse_qs(req.query).items()}
    if req.method == "POST" and len(parts) == 6 and parts[:4] == ["upload", "storage", "v1", "b"] and parts[5] == "o":
        _fail(knobs, "upload")
        if query.get("uploadType") != "media" or not query.get("name"):
            raise Refused(400, "Upload requests must include an uploadType of media and an object name.")
        bucket, name = unquote(parts[4]), query["name"]
        objects[(bucket, name)] = {"content": req.body, "contentType": req.headers.get("content-type", "")}
        return _json_reply({"kind": "storage#object", "id": f"{bucket}/{name}/1", "name": name, "bucket": bucket,
                            "generation": "1", "contentType": objects[(bucket, name)]["contentType"],
                            "size": str(len(req.body))})
    if req.method != "GET" or parts[:3] != ["storage", "v1", "b"] or len(parts) < 5 or parts[4] != "o":
        raise Refused(404, f"Not Found: {req.method} {req.raw_path}")
    bucket = unquote(parts[3])
    if len(parts) == 5:  # a listing, page by page
        _fail(knobs, "list")
        prefix, start = query.get("prefix", ""), int(query.get("pageToken") or 0)
        names = sorted(name for held, name in objects if held == bucket and name.startswith(prefix))
        page = names[start:start + knobs["page_size"]]
        body: dict[str, Any] = {"kind": "storage#objects", "items": [
            {"kind": "storage#object", "name": name, "bucket": bucket, "size": str(len(objects[(bucket, name)][
                "content"]))} for name in page]}
        if start + knobs["page_size"] < len(names):
            body["nextPageToken"] = str(start + knobs["page_size"])
        return _json_reply(body)
    _fail(knobs, "download")
    name = unquote("/".join(parts[5:]))
    if query.get("alt") != "media" or (bucket, name) not in objects:
        raise Refused(404, f"No such object: {bucket}/{name}")
    return Reply(objects[(bucket, name)]["content"], content_type=b"application/octet-stream")


# ---- Vertex AI's batch prediction jobs ----------------------------------------------------------

def _jobs(req, parts: list[str], store: dict[str, Any], knobs: dict[str, Any]) -> Reply:
    jobs = store.setdefault("jobs", {})
    location, rest = parts[4], parts[6:]
    if req.method == "POST" and not rest:
        _fail(knobs, "create")
        return _json_reply(_public(_create(req.json, location, store)))
    job_id, _, verb = rest[0].partition(":") if len(rest) == 1 else ("", "", "")
    job = jobs.get(job_id)
    if job is None:
        raise Refused(404, f"The BatchPredictionJob does not exist: {job_id}", "NOT_FOUND")
    if req.method == "GET" and not verb:
        _fail(knobs, "get")
        return _json_reply(_public(_read(job, store, knobs)))
    if req.method == "POST" and verb == "cancel":
        _fail(knobs, "cancel")
        if job["state"] in ENDED:
            raise Refused(400, f"The BatchPredictionJob is in state {job['state']} and cannot be cancelled.",
                          "FAILED_PRECONDITION")
        job["state"] = "JOB_STATE_CANCELLING"
        return _json_reply({})
    raise Refused(404, f"The requested URL {req.raw_path} was not found on this server.", "NOT_FOUND")


def _gs(uri: Any) -> tuple[str, str]:
    if not isinstance(uri, str) or not uri.startswith("gs://") or "/" not in uri[5:]:
        raise Refused(400, f"Invalid Cloud Storage URI: {uri!r}", "INVALID_ARGUMENT")
    bucket, _, name = uri[5:].partition("/")
    return bucket, name


def _create(body: Any, location: str, store: dict[str, Any]) -> dict[str, Any]:
    body = body if isinstance(body, dict) else {}
    source = ((body.get("inputConfig") or {}).get("gcsSource") or {}).get("uris")
    destination = ((body.get("outputConfig") or {}).get("gcsDestination") or {}).get("outputUriPrefix")
    if not isinstance(body.get("displayName"), str) or not str(body.get("model", "")).startswith("publishers/"):
        raise Refused(400, "displayName and a publisher model are required.", "INVALID_ARGUMENT")
    if (body["inputConfig"].get("instancesFormat") != "jsonl" or not isinstance(source, list) or len(source) != 1
            or body["outputConfig"].get("predictionsFormat") != "jsonl"):
        raise Refused(400, "A JSON lines input of one Cloud Storage object and a JSON lines output are required.",
                      "INVALID_ARGUMENT")
    if _gs(source[0]) not in store.setdefault("objects", {}):
        raise Refused(400, f"Failed to read the input file {source[0]}: it does not exist.", "INVALID_ARGUMENT")
    _gs(destination + "/")
    job_id = str(next(_ids))
    now = _moment(time.time())
    job = {"name": f"projects/{PROJECT_NUMBER}/locations/{location}/batchPredictionJobs/{job_id}",
           "displayName": body["displayName"], "model": body["model"], "inputConfig": body["inputConfig"],
           "outputConfig": body["outputConfig"], "state": "JOB_STATE_PENDING", "createTime": now,
           "updateTime": now, "reads": 0}
    store["jobs"][job_id] = job
    return job


def _public(job: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in job.items() if key != "reads"}


def _moment(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime(seconds))


def _read(job: dict[str, Any], store: dict[str, Any], knobs: dict[str, Any]) -> dict[str, Any]:
    job["reads"] += 1
    now = _moment(time.time())
    if job["state"] in ENDED:
        return job
    if job["state"] == "JOB_STATE_CANCELLING":
        job.update(state="JOB_STATE_CANCELLED", endTime=now, updateTime=now)
        return job
    if job["reads"] <= knobs["batch_pending_polls"]:
        job.update(state="JOB_STATE_RUNNING", startTime=job.get("startTime", now), updateTime=now)
        return job
    if knobs["batch_job_failed"]:
        job.update(state="JOB_STATE_FAILED", endTime=now, updateTime=now,
                   error={"code": 3, "message": knobs["batch_job_failed"]})
        return job
    objects = store["objects"]
    source = _gs(job["inputConfig"]["gcsSource"]["uris"][0])
    lines = [json.loads(raw) for raw in objects[source]["content"].splitlines() if raw.strip()]
    model = job["model"].rsplit("/", 1)[-1]
    entries = [_predict(line, model, knobs) for line in lines]
    bucket, prefix = _gs(job["outputConfig"]["gcsDestination"]["outputUriPrefix"] + "/")
    folder = f"{prefix.rstrip('/')}/prediction-model-{now}"
    size = knobs["batch_lines_per_file"]
    for number, start in enumerate(range(0, len(entries), size), 1):
        content = b"".join(json.dumps(entry).encode() + b"\n" for entry in entries[start:start + size])
        objects[(bucket, f"{folder}/predictions_{number:04d}.jsonl")] = {"content": content,
                                                                         "contentType": "application/jsonl"}
    failed = sum(1 for entry in entries if entry["status"])
    job.update(state="JOB_STATE_PARTIALLY_SUCCEEDED" if failed else "JOB_STATE_SUCCEEDED", endTime=now,
               updateTime=now, outputInfo={"gcsOutputDirectory": f"gs://{bucket}/{folder}"},
               completionStats={"successfulCount": str(len(entries) - failed), "failedCount": str(failed)})
    return job


def _predict(line: dict[str, Any], model: str, knobs: dict[str, Any]) -> dict[str, Any]:
    """One request's output line: the Messages reply, or the failure's words (Google's error object in them)."""
    request = line.get("request") if isinstance(line.get("request"), dict) else {}
    entry = {"custom_id": line.get("custom_id"), "request": request}
    try:
        if line.get("custom_id") in knobs["batch_failing_ids"]:
            raise ClientError(500, "The model crashed (batch_failing_ids).")
        if request.get("anthropic_version") != VERTEX_VERSION or "model" in request:
            raise ClientError(400, f"anthropic_version {VERTEX_VERSION} is required and model is not permitted.")
        params = {key: value for key, value in request.items() if key != "anthropic_version"}
        reply = messages_create({**params, "model": model, "stream": False}, knobs)
        return {**entry, "response": json.loads(reply.body), "status": ""}
    except ClientError as exc:
        if exc.status == 500:
            error = {"error": {"code": 500, "message": exc.message, "status": "INTERNAL"}}
            return {**entry, "status": f"Internal Error: {json.dumps(error)}"}
        return {**entry, "status": "", "error": {"code": exc.status, "message": exc.message}}
