"""A fake Google on loopback for the tests: the Gemini API (`/v1beta/models/{model}:{method}`, its model
listing), Vertex AI (`/v1/projects/{project}/locations/{location}/publishers/{publisher}/models/{model}:{method}`,
and `/v1beta1/` as google-genai calls it by default) and an OAuth token endpoint, on one address.

Every request is recorded. The token endpoint takes a service account's JWT assertion (the grant google-auth
sends) only when it verifies with the public key the fake knows for that account (`keys.py`), and gives out
access tokens the Vertex AI paths then require; the Gemini API's paths require the API key in `x-goog-api-key`.
A Claude model's `streamRawPredict` answers the reference upstream's Messages events (tests/upstream/
anthropic_wire.py); `streamGenerateContent?alt=sse` answers GenerateContentResponse chunks that echo the last
user text word by word (or call an offered function), then a chunk with the finish reason and usage metadata.
Knobs make it fail as Google does (`{"error": {"code", "message", "status"}}`), send an error chunk midway, or
cut the connection midway. Vertex AI's batch prediction jobs and Cloud Storage's JSON API: batch_jobs.py."""

from __future__ import annotations

import copy
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from tests.gateway.upstream.google import batch_jobs, keys, wire
from tests.upstream.anthropic_wire import messages_create
from tests.upstream.core import DEFAULTS as REFERENCE_DEFAULTS
from tests.upstream.core import ClientError, Reply, Stream

API_KEY = "AIzaFakeGeminiKey0000000000000000000001"
PROJECT, REGION = "my-project", "us-east5"
CLAUDE = "claude-sonnet-4-5@20250929"
GEMINI = "gemini-2.5-flash"

DEFAULTS: dict[str, Any] = {
    **{name: REFERENCE_DEFAULTS[name] for name in ("reply", "usage", "cached_tokens", "cache_write_tokens",
                                                    "tool_name", "tool_arguments")},
    "api_key": API_KEY,
    "accounts": {},  # service account email -> its public key (PEM): whose assertions verify
    "token_lifetime": 3600,  # seconds an access token the fake gives lives
    "require_auth": True,  # False: take requests without credentials (Claude Code with auth skipped)
    "fail_status": None,  # answer model calls with this Google status name (RESOURCE_EXHAUSTED, ...)
    "fail_code": 429,
    "fail_message": "Resource has been exhausted (e.g. check quota).",
    "fail_times": -1,  # -1: every model call fails; N: the next N
    "retry_after": None,  # a retry-after header on the failure
    "fail_details": [],  # the failure's `details` (RetryInfo, ErrorInfo, ...)
    "error_after_tokens": None,  # streams: an error in place of the chunk after N tokens
    "block_reason": None,  # the prompt blocked whole with this blockReason (SAFETY, ...): no candidate
    "cut_after_tokens": None,  # streams: the connection dropped after N tokens
    "models": wire.GEMINI_API_MODELS,
    "publisher_models": wire.VERTEX_GOOGLE_MODELS,
    "page_size": 2,  # listings: this many per page, then a nextPageToken
    # batch prediction and Cloud Storage (batch_jobs.py): reads of a job that report it running before it runs,
    # the custom_ids that fail, a job failed whole (its message), an operation's error ([code, status, message]),
    # and the lines of each output file
    "batch_pending_polls": 0,
    "batch_failing_ids": [],
    "batch_job_failed": None,
    "batch_fail": {},
    "batch_lines_per_file": 2,
}


@dataclass
class Recorded:
    method: str
    path: str
    raw_path: str  # as sent (percent-encoding kept)
    query: str
    headers: dict[str, str]  # lower-case names
    body: bytes
    json: Any
    problem: str | None = None  # why its credentials were refused; None when accepted


@dataclass
class State:
    knobs: dict[str, Any] = field(default_factory=lambda: copy.deepcopy(DEFAULTS))
    requests: list[Recorded] = field(default_factory=list)
    tokens: dict[str, float] = field(default_factory=dict)  # access token -> when it expires
    store: dict[str, Any] = field(default_factory=dict)  # batch_jobs.py's objects and jobs
    lock: threading.Lock = field(default_factory=threading.Lock)

    def configure(self, **knobs: Any) -> None:
        unknown = set(knobs) - DEFAULTS.keys()
        if unknown:
            raise TypeError(f"unknown fake Google knob(s): {sorted(unknown)}")
        with self.lock:
            self.knobs = {**self.knobs, **copy.deepcopy(knobs)}

    def reset(self) -> None:
        with self.lock:
            self.knobs = copy.deepcopy(DEFAULTS)
            self.requests.clear()
            self.tokens.clear()
            self.store.clear()

    def take_failure(self) -> bool:
        with self.lock:
            knobs = self.knobs
            if knobs["fail_status"] is None or knobs["fail_times"] == 0:
                return False
            if knobs["fail_times"] > 0:
                knobs["fail_times"] -= 1
            return True


class GoogleError(Exception):
    def __init__(self, code: int, status: str, message: str, retry_after: str | None = None,
                 details: list | None = None):
        super().__init__(message)
        self.code, self.status, self.message, self.retry_after = code, status, message, retry_after
        self.details = details or []


def _token(req: Recorded, state: State) -> Reply:
    """The OAuth token endpoint: a JWT bearer grant whose assertion the account's key signed."""
    form = parse_qs(req.body.decode())
    assertion = (form.get("assertion") or [""])[0]
    if form.get("grant_type") != ["urn:ietf:params:oauth:grant-type:jwt-bearer"]:
        req.problem = "not a JWT bearer grant"
    else:
        req.problem = keys.problem(assertion, state.knobs["accounts"])
    if req.problem is not None:
        return Reply(json.dumps({"error": "invalid_grant", "error_description": "Invalid JWT Signature."}).encode(),
                     status=400)
    token = "ya29.fake-" + uuid.uuid4().hex
    with state.lock:
        state.tokens[token] = time.time() + state.knobs["token_lifetime"]
    return Reply(json.dumps({"access_token": token, "expires_in": state.knobs["token_lifetime"],
                             "token_type": "Bearer"}).encode())


def _authenticate(req: Recorded, state: State, vertex: bool) -> None:
    knobs = state.knobs
    if vertex:
        authorization = req.headers.get("authorization", "")
        token = authorization.removeprefix("Bearer ")
        if not authorization:
            req.problem = "no credentials" if knobs["require_auth"] else None
        elif not authorization.startswith("Bearer ") or state.tokens.get(token, 0) < time.time():
            req.problem = "an access token the fake did not give, or one expired"
        if req.problem:
            raise GoogleError(401, "UNAUTHENTICATED", "Request had invalid authentication credentials. Expected "
                                                      "OAuth 2 access token, login cookie or other valid "
                                                      "authentication credential.")
        return
    key = req.headers.get("x-goog-api-key")
    if key is None and "key=" in req.query:
        req.problem = "the key in the URL"
    elif key is None:
        req.problem = "no API key"
        raise GoogleError(403, "PERMISSION_DENIED", "Method doesn't allow unregistered callers (callers without "
                                                    "established identity). Please use API Key or other form of "
                                                    "API consumer identity to call this API.")
    elif key != knobs["api_key"]:
        req.problem = "wrong API key"
        raise GoogleError(400, "INVALID_ARGUMENT", "API key not valid. Please pass a valid API key.", details=[
            {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
             "domain": "googleapis.com", "metadata": {"service": "generativelanguage.googleapis.com"}}])


def _listing(req: Recorded, knobs: dict[str, Any], items: list[dict], key: str) -> Reply:
    start = int((parse_qs(req.query).get("pageToken") or ["0"])[0])
    size = knobs["page_size"]
    body: dict[str, Any] = {key: items[start:start + size]}
    if start + size < len(items):
        body["nextPageToken"] = str(start + size)
    return Reply(json.dumps(body).encode())


def _model_call(req: Recorded, knobs: dict[str, Any], model: str, method: str, publisher: str,
                vertex: bool) -> Reply | Stream:
    body = req.json
    if not isinstance(body, dict):
        raise GoogleError(400, "INVALID_ARGUMENT", "Invalid JSON payload received.")
    if publisher == "anthropic":
        if method not in ("rawPredict", "streamRawPredict"):
            raise GoogleError(400, "FAILED_PRECONDITION", f"{method} is not supported for Claude models.")
        if "model" in body:
            raise GoogleError(400, "INVALID_ARGUMENT", "model: Extra inputs are not permitted")
        if body.get("anthropic_version") != "vertex-2023-10-16":
            raise GoogleError(400, "INVALID_ARGUMENT", "anthropic_version: vertex-2023-10-16 is required")
        try:
            return messages_create({**body, "model": model, "stream": method == "streamRawPredict"}, knobs)
        except ClientError as exc:
            raise GoogleError(400, "INVALID_ARGUMENT", exc.message) from None
    if method in ("generateContent", "streamGenerateContent"):
        chunks = wire.generate(body, model, knobs)
        if method == "generateContent":
            return Reply(json.dumps(wire.whole(chunks)).encode())
        if "alt=sse" not in req.query:
            raise GoogleError(400, "INVALID_ARGUMENT", "This fake answers streamGenerateContent as SSE only.")
        return Stream([], [wire.sse(chunk) for chunk in chunks[:-1]], [wire.sse(chunks[-1])])
    if method in ("batchEmbedContents", "predict", "embedContent"):
        return Reply(json.dumps(wire.embed(body, method)).encode())
    raise GoogleError(404, "NOT_FOUND", f"Method {method} is not found for this model.")


def route(req: Recorded, state: State) -> Reply | Stream:
    knobs = state.knobs
    if req.method == "POST" and req.path == "/token":
        return _token(req, state)
    parts = req.path.strip("/").split("/")
    vertex = len(parts) >= 2 and parts[0] in ("v1", "v1beta1") and parts[1] in ("projects", "publishers")
    _authenticate(req, state, vertex or batch_jobs.handles(parts))  # Cloud Storage takes the same token
    if batch_jobs.handles(parts):
        return batch_jobs.route(req, state)
    if req.method == "GET" and req.path == "/v1beta/models":
        return _listing(req, knobs, knobs["models"], "models")
    if req.method == "GET" and req.path == "/v1beta1/publishers/google/models":
        return _listing(req, knobs, knobs["publisher_models"], "publisherModels")
    if vertex and len(parts) == 9 and parts[3] == "locations" and parts[5] == "publishers" and parts[7] == "models":
        publisher, (model, _, method) = parts[6], parts[8].rpartition(":")
    elif not vertex and len(parts) == 3 and parts[:2] == ["v1beta", "models"]:
        publisher, (model, _, method) = "google", parts[2].rpartition(":")
    else:
        raise GoogleError(404, "NOT_FOUND", f"The requested URL {req.path} was not found on this server.")
    if req.method != "POST":
        raise GoogleError(404, "NOT_FOUND", f"{req.method} {req.path} is not a method of this API.")
    if state.take_failure():
        raise GoogleError(knobs["fail_code"], knobs["fail_status"], knobs["fail_message"], knobs["retry_after"],
                          knobs["fail_details"])
    return _model_call(req, knobs, model, method, publisher, vertex)
