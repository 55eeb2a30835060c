"""Google Vertex AI's batch prediction of Anthropic's Claude models, the batch API an Anthropic message batch on a
Vertex AI server is forwarded to (batches/forward.py), as its HTTP shapes are:

- the requests written as a JSON lines object in Cloud Storage, under the server's `batch_gcs_uri`
  (`{folder}/{batch id}/input.jsonl`, each line `{"custom_id", "request"}`, the request the Messages params
  without `model` and with Vertex AI's `anthropic_version`), through Cloud Storage's JSON API (`POST
  /upload/storage/v1/b/{bucket}/o?uploadType=media&name=…`);
- a batch prediction job made of it (`POST /v1/projects/{project}/locations/{location}/batchPredictionJobs`:
  `displayName` the batch's id, `model` `publishers/anthropic/models/{model}`, `inputConfig` of the object,
  `outputConfig` a folder beside it: `{folder}/{batch id}/output`), whose id is the batch's `upstream_id`;
- read until it ends (`GET …/batchPredictionJobs/{id}`: its `state`), then its output read back: the objects
  `predictions*.jsonl` (and `errors*.jsonl`) Vertex AI wrote in the folder its `outputInfo.gcsOutputDirectory`
  names (`GET /storage/v1/b/{bucket}/o?prefix=…`, then each `GET …/o/{object}?alt=media`), each line the
  request's `custom_id` with its `response` (the Messages API's reply) or its `status` (why it failed);
- cancelled by `POST …/batchPredictionJobs/{id}:cancel`.

Paths and bodies are those google-genai's `client.batches` sends Vertex AI (a job named by its id, under the
server's project and location). Every call carries the server's Google access token (the cloud-platform scope
covers Cloud Storage too: gateway/registry/google_auth.py) and goes through the gateway's HTTP client, as the
model calls do (gateway/upstream/providers/google/transport.py); Cloud Storage is at BATCH_GCS_URL. A failure
is an UpstreamError, a malformed answer, or a batch Vertex AI cannot take, a ValueError.

Only a batch of one Claude model goes there: a batch prediction job runs one model, and Vertex AI's batch
prediction of Anthropic's format serves Anthropic's models only; any other runs on the gateway's workers."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import quote, urlencode

from django.conf import settings

from batches.clouds import ANTHROPIC_STATUS, Result, State
from batches.models import Batch, BatchLine
from gateway.registry.snapshot import Server, Target
from gateway.upstream.http_client import Response, build_request
from gateway.upstream.providers.base import send, timeouts
from gateway.upstream.providers.google import transport
from gateway.upstream.providers.google.claude import VERTEX_VERSION

Status, Line = Batch.Status, BatchLine.Status
GCS_URI = re.compile(r"gs://([a-z0-9][a-z0-9._-]{1,61}[a-z0-9])(?:/(.*))?")
OUTPUT = re.compile(r"(?:^|/)(?:predictions|errors)[^/]*\.jsonl$")  # the objects of a job's output folder
JOB_ID = re.compile(r"[0-9]+")  # Vertex AI's job ids, as google-genai takes them
MAX_PAGES = 1000  # of a listing of an output folder (a thousand objects a page)
# an error's status code, where a failed request's words carry Google's error object
CODE_IN_WORDS = re.compile(r'"code"\s*:\s*([1-5][0-9]{2})\b')
ERROR_TYPES = {status: kind for kind, status in ANTHROPIC_STATUS.items()}
NO_ANSWER = "The cloud's batch API gave no answer for this request."


def place_of(uri: str) -> tuple[str, str]:
    """(bucket, folder within it, without a slash at either end) of a gs:// location; ValueError when it is
    not one."""
    found = GCS_URI.fullmatch(uri) if isinstance(uri, str) else None
    if found is None:
        raise ValueError(f"not a Cloud Storage location (gs://bucket/folder): {uri!r}")
    return found.group(1), (found.group(2) or "").strip("/")


async def _call(server: Server, method: str, url: str, *, json_body: Any = None, content: bytes | None = None,
                content_type: str = "") -> Response:
    """A request to Vertex AI or Cloud Storage with the server's access token: the whole answer, or the
    UpstreamError of one other than 200 (Google's error body read as the model calls read it)."""
    headers = await transport.credentials(server)
    if content_type:
        headers["Content-Type"] = content_type
    request = build_request(method, url, json=json_body, content=content, headers=headers, timeouts=timeouts(server))
    response = await send(request, stream=False)
    if response.status_code != 200:
        raise transport.answered_failure(response, response.content, request, server)
    return response


def _json(response: Response) -> dict[str, Any]:
    data = json.loads(response.content)
    if not isinstance(data, dict):
        raise ValueError("the answer is not a JSON object")
    return data


def _within(data: Any, *keys: str) -> Any:
    """`data[keys[0]][keys[1]]…`, or None where one of them is missing or not an object."""
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data


# ----------------------------------------------------------------------------------------- Cloud Storage

def _storage() -> str:
    return settings.BATCH_GCS_URL.rstrip("/")


async def upload(server: Server, bucket: str, name: str, content: bytes) -> None:
    query = urlencode({"uploadType": "media", "name": name})
    await _call(server, "POST", f"{_storage()}/upload/storage/v1/b/{quote(bucket, safe='')}/o?{query}",
                content=content, content_type="application/jsonl")


async def listing(server: Server, bucket: str, prefix: str) -> list[str]:
    """The names of the objects under `prefix`, every page of them."""
    names: list[str] = []
    token = ""
    for _ in range(MAX_PAGES):
        query = urlencode({"prefix": prefix, **({"pageToken": token} if token else {})})
        page = _json(await _call(server, "GET", f"{_storage()}/storage/v1/b/{quote(bucket, safe='')}/o?{query}"))
        items = page.get("items") or []
        names += [item["name"] for item in items if isinstance(item, dict) and isinstance(item.get("name"), str)]
        token = page.get("nextPageToken")
        if not isinstance(token, str) or not token:
            return names
    raise ValueError(f"the listing of gs://{bucket}/{prefix} did not end")


async def download(server: Server, bucket: str, name: str) -> bytes:
    url = f"{_storage()}/storage/v1/b/{quote(bucket, safe='')}/o/{quote(name, safe='')}?alt=media"
    return (await _call(server, "GET", url)).content


# ------------------------------------------------------------------------------------------ the batch API

def _jobs(server: Server) -> str:
    cloud = server.cloud
    return (f"{transport.root(server)}/{transport.VERTEX_VERSION}/projects/{quote(cloud.gcp_project, safe='')}/"
            f"locations/{quote(cloud.region, safe='')}/batchPredictionJobs")


def _job_id(upstream_id: str) -> str:
    if not JOB_ID.fullmatch(upstream_id or ""):
        raise ValueError(f"not a batch prediction job's id: {upstream_id!r}")
    return upstream_id


class VertexClaudeBatches:
    """Vertex AI's batch prediction of Claude; a Vertex AI server's base URL is its location's endpoint."""

    FORMAT = Batch.Kind.ANTHROPIC

    RUNNING = ("JOB_STATE_QUEUED", "JOB_STATE_PENDING", "JOB_STATE_RUNNING", "JOB_STATE_PAUSED",
               "JOB_STATE_UPDATING")
    ENDED = {"JOB_STATE_SUCCEEDED": Status.COMPLETED, "JOB_STATE_PARTIALLY_SUCCEEDED": Status.COMPLETED,
             "JOB_STATE_CANCELLED": Status.CANCELLED, "JOB_STATE_EXPIRED": Status.EXPIRED}
    # of a job ended so, a request it wrote nothing for did not run: cancelled or expired with it
    UNRUN = {Status.CANCELLED: Line.CANCELLED, Status.EXPIRED: Line.EXPIRED}

    @staticmethod
    async def submit(target: Target, *, name: str, endpoint: str, requests: list[tuple[str, dict]]) -> str:
        """Write the requests to Cloud Storage and make a batch prediction job of them; the job's id."""
        server = target.server
        if transport.publisher(target) != "anthropic":
            raise ValueError(f"Vertex AI's batch prediction of the Messages format serves Claude models only, not "
                             f"{target.name}")
        models = {body.get("model") for _, body in requests}
        if models != {target.name}:
            raise ValueError(f"a batch prediction job runs one model; this batch names {len(models)}")
        bucket, folder = place_of(server.cloud.batch_gcs_uri)
        here = f"{folder}/{name}" if folder else name
        content = b"".join(json.dumps({"custom_id": custom_id, "request": {
            **{key: value for key, value in body.items() if key != "model"}, "anthropic_version": VERTEX_VERSION}},
            separators=(",", ":")).encode() + b"\n" for custom_id, body in requests)
        await upload(server, bucket, f"{here}/input.jsonl", content)
        made = _json(await _call(server, "POST", _jobs(server), json_body={
            "displayName": name, "model": f"publishers/anthropic/models/{target.name}",
            "inputConfig": {"instancesFormat": "jsonl", "gcsSource": {"uris": [f"gs://{bucket}/{here}/input.jsonl"]}},
            "outputConfig": {"predictionsFormat": "jsonl",
                             "gcsDestination": {"outputUriPrefix": f"gs://{bucket}/{here}/output"}}}))
        job = made.get("name")
        return _job_id(job.rsplit("/", 1)[-1] if isinstance(job, str) else "")

    @classmethod
    async def read(cls, target: Target, upstream_id: str) -> State:
        data = _json(await _call(target.server, "GET", f"{_jobs(target.server)}/{_job_id(upstream_id)}"))
        state = str(data.get("state"))
        if state == "JOB_STATE_FAILED":
            return State(state, ended=True, failed=str(_within(data, "error", "message") or "no reason given"),
                         answer=data)
        if state in cls.ENDED:
            return State(state, ended=True, end_as=cls.ENDED[state], answer=data)
        return State(state, running=state in cls.RUNNING, answer=data)

    @classmethod
    async def results(cls, target: Target, state: State) -> dict[str, Result]:
        """The output folder's lines by custom_id; of a job cancelled or expired, each request of its input
        it wrote nothing for, cancelled or expired."""
        server, found = target.server, {}
        directory = _within(state.answer, "outputInfo", "gcsOutputDirectory")
        if isinstance(directory, str) and directory:
            bucket, folder = place_of(directory)
            for name in sorted(await listing(server, bucket, f"{folder}/")):
                if OUTPUT.search(name):
                    for entry in _json_lines(await download(server, bucket, name)):
                        found[entry["custom_id"]] = _vertex_result(entry)
        unrun = cls.UNRUN.get(state.end_as)
        if unrun is not None:
            uris = _within(state.answer, "inputConfig", "gcsSource", "uris")
            for uri in uris if isinstance(uris, list) else ():
                bucket, name = place_of(uri)
                for entry in _json_lines(await download(server, bucket, name)):
                    found.setdefault(entry["custom_id"], Result(unrun))
        return found

    @staticmethod
    async def cancel(target: Target, upstream_id: str) -> None:
        # no body, as google-genai's `batches.cancel` sends it
        await _call(target.server, "POST", f"{_jobs(target.server)}/{_job_id(upstream_id)}:cancel")


def _json_lines(content: bytes):
    """The lines that name their request."""
    for raw in content.splitlines():
        if raw.strip():
            entry = json.loads(raw)
            if isinstance(entry, dict) and isinstance(entry.get("custom_id"), str):
                yield entry


def _vertex_result(entry: dict[str, Any]) -> Result:
    """A request's line of the output: the Messages reply it got, or its failure, in its `status` (words) or an
    `error` object (Google's: code and message), as an Anthropic error body with its status code (the error's,
    or the one Google's words carry, else 500)."""
    response, status = entry.get("response"), entry.get("status")
    if isinstance(response, dict) and response.get("type") == "error" and isinstance(response.get("error"), dict):
        return Result(Line.ERRORED, ANTHROPIC_STATUS.get(response["error"].get("type"), 500), response)
    if isinstance(response, dict) and response and not status:
        return Result(Line.SUCCEEDED, 200, response)
    words = status if isinstance(status, str) and status else str(_within(entry, "error", "message") or NO_ANSWER)
    code, found = _within(entry, "error", "code"), CODE_IN_WORDS.search(words)
    if not (isinstance(code, int) and 400 <= code < 600):
        code = int(found.group(1)) if found else 500
    return Result(Line.ERRORED, code, {"type": "error", "error": {"type": ERROR_TYPES.get(code, "api_error"),
                                                                 "message": words}})
