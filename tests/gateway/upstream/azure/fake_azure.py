"""An Azure OpenAI resource of our own: Azure's addresses, credentials, errors and content filter in front
of the reference upstream (tests/upstream), which makes the replies (streamed or not, usage, cut streams).

- `POST /openai/deployments/{deployment}/{operation}?api-version=...`: the dated API (no api-version: 404
  as Azure answers); `POST /openai/v1/{operation}`: the v1 API, the deployment in the body's `model`. An
  unknown deployment is Azure's 404 `DeploymentNotFound`.
- Credentials: `api-key: KEY`; or `Authorization: Bearer <token>` with a token the fake Entra ID tenant
  issued (fake_entra.py); on v1 also `Authorization: Bearer KEY`, as Azure's v1 API takes it. Else 401.
- A prompt holding FILTERED_PROMPT is refused as Azure's content filter refuses it (400, code
  `content_filter`, with its `innererror`); a prompt holding FILTERED_REPLY gets a streamed reply that
  the filter stops (`finish_reason: "content_filter"`).
- `throttle(n)`: the next n requests get Azure's 429 with `retry-after: 7`.
- Every stream starts with Azure's chunk of the prompt's filter results (no choices).

Each request is kept as it came (`requests`), before any check: the tests compare them with the requests
the official SDKs make."""

from __future__ import annotations

import json
import re
import threading
from typing import Any
from urllib.parse import parse_qs

from tests.gateway.upstream.azure.asgi_io import read_body, reply
from tests.upstream.app import UpstreamApp
from tests.upstream.core import RecordedRequest, State, dumps

API_KEY = "azure-key-0123456789abcdef"
FILTERED_PROMPT = "please write something hateful"
FILTERED_REPLY = "tell the filtered story"
FILTER_MESSAGE = ("The response was filtered due to the prompt triggering Azure OpenAI's content management "
                  "policy. Please modify your prompt and retry.")
THROTTLE_MESSAGE = ("Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 "
                    "have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 7 "
                    "seconds.")
SEVERITIES = {"hate": {"filtered": True, "severity": "high"}, "self_harm": {"filtered": False, "severity": "safe"},
              "sexual": {"filtered": False, "severity": "safe"}, "violence": {"filtered": False, "severity": "safe"}}
PROMPT_FILTER_CHUNK = {"choices": [], "created": 0, "id": "", "model": "", "object": "", "prompt_filter_results": [
    {"prompt_index": 0, "content_filter_results": {k: {"filtered": False, "severity": "safe"} for k in SEVERITIES}}]}
DEPLOYMENT = re.compile(r"/openai/deployments/([^/]+)(/.+)")


class FakeAzure:
    def __init__(self, state: State, deployments=("gpt-4o-deployment", "embed-deployment", "whisper-deployment"),
                 tokens: list[str] | None = None) -> None:
        self.upstream = UpstreamApp(state)
        self.deployments = set(deployments)
        self.tokens = tokens if tokens is not None else []  # the Entra tokens it takes (the tenant's `issued`)
        self.requests: list[RecordedRequest] = []
        self.throttled = 0
        self.lock = threading.Lock()

    def throttle(self, times: int) -> None:
        self.throttled = times

    def reset(self) -> None:
        self.requests.clear()
        self.throttled = 0

    async def __call__(self, scope, receive, send) -> None:
        body = await read_body(receive)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        query = scope.get("query_string", b"").decode("latin-1")
        data = None
        if body and headers.get("content-type", "").startswith("application/json"):
            data = json.loads(body)
        self.requests.append(RecordedRequest(scope["method"], scope["path"], query, headers, body, data))
        routed = self.route(scope["path"], parse_qs(query), headers, data, body)
        if isinstance(routed, tuple):
            status, answer, extra = routed
            await reply(send, status, dumps(answer).encode(), b"application/json", extra)
            return
        if data is not None:
            data["model"] = routed  # the reference upstream answers as the deployment's model
            body = dumps(data).encode()
        if data is not None and FILTERED_REPLY in text_of(data):
            if data.get("stream"):
                await reply(send, 200, filtered_stream(routed), b"text/event-stream", ())
            else:
                await reply(send, 200, dumps(filtered_whole(routed)).encode(), b"application/json", ())
            return
        inner = {**scope, "path": DEPLOYMENT.sub(r"/v1\2", scope["path"]).replace("/openai/v1/", "/v1/"),
                 "query_string": b"", "headers": [(k, v) for k, v in scope["headers"] if k != b"content-length"]}
        await self.upstream(inner, once(body, receive), prompt_filter_first(send))

    def route(self, path: str, query: dict, headers: dict, data: Any, body: bytes) -> str | tuple[int, dict, tuple]:
        """The deployment a request is for, or the answer to it (status, body, extra headers)."""
        if match := DEPLOYMENT.fullmatch(path):
            deployment, v1 = match.group(1), False
            if "api-version" not in query:
                return 404, {"error": {"code": "404", "message": "Resource not found"}}, ()
        elif path.startswith("/openai/v1/"):
            deployment, v1 = (data or {}).get("model") if data is not None else form_model(body), True
        else:
            return 404, {"error": {"code": "404", "message": "Resource not found"}}, ()
        if not self.authorized(headers, v1):
            return 401, {"error": {"code": "401", "message": "Access denied due to invalid subscription key or "
                                                             "wrong API endpoint. Make sure to provide a valid "
                                                             "key for an active subscription and use a correct "
                                                             "regional API endpoint for your resource."}}, ()
        if deployment not in self.deployments:
            return 404, {"error": {"code": "DeploymentNotFound", "message": "The API deployment for this "
                                                                             "resource does not exist."}}, ()
        with self.lock:
            if self.throttled:
                self.throttled -= 1
                return 429, {"error": {"code": "429", "message": THROTTLE_MESSAGE}}, ((b"retry-after", b"7"),)
        if data is not None and FILTERED_PROMPT in text_of(data):
            return 400, {"error": {
                "message": FILTER_MESSAGE, "type": None, "param": "prompt", "code": "content_filter", "status": 400,
                "innererror": {"code": "ResponsibleAIPolicyViolation", "content_filter_result": SEVERITIES}}}, ()
        return deployment

    def authorized(self, headers: dict, v1: bool) -> bool:
        if headers.get("api-key") == API_KEY:
            return True
        scheme, _, credential = headers.get("authorization", "").partition(" ")
        return scheme == "Bearer" and (credential in self.tokens or v1 and credential == API_KEY)


def form_model(body: bytes) -> str:
    """The `model` field of a multipart form (audio on the v1 API)."""
    found = re.search(rb'name="model"\r\n\r\n([^\r]*)\r\n', body)
    return found.group(1).decode() if found else ""


def text_of(data: dict) -> str:
    return json.dumps(data.get("messages") or data.get("input") or "")


def once(body: bytes, receive):
    sent = False

    async def replay():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def prompt_filter_first(send):
    """Azure's streams open with the prompt's filter results, a chunk without choices."""
    streaming = False

    async def wrapped(message):
        nonlocal streaming
        if message["type"] == "http.response.start":
            streaming = any(k == b"content-type" and v.startswith(b"text/event-stream") for k, v in message["headers"])
        elif message["type"] == "http.response.body" and streaming:
            streaming = False
            message = {**message, "body": b"data: " + dumps(PROMPT_FILTER_CHUNK).encode() + b"\n\n" + message["body"]}
        await send(message)

    return wrapped


def filtered_stream(model: str) -> bytes:
    """A reply Azure's content filter stops after its first words."""
    def chunk(choices, **more) -> bytes:
        return b"data: " + dumps({"id": "chatcmpl-az1", "object": "chat.completion.chunk", "created": 1700000000,
                                  "model": model, "choices": choices, **more}).encode() + b"\n\n"
    safe = {k: {"filtered": False, "severity": "safe"} for k in SEVERITIES}
    return b"".join([
        b"data: " + dumps(PROMPT_FILTER_CHUNK).encode() + b"\n\n",
        chunk([{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]),
        chunk([{"index": 0, "delta": {"content": "Once upon a time"}, "finish_reason": None,
                "content_filter_results": safe}]),
        chunk([{"index": 0, "delta": {}, "finish_reason": "content_filter", "content_filter_results": SEVERITIES}]),
        chunk([], usage={"prompt_tokens": 5, "completion_tokens": 4, "total_tokens": 9}),
        b"data: [DONE]\n\n",
    ])


def filtered_whole(model: str) -> dict:
    return {"id": "chatcmpl-az1", "object": "chat.completion", "created": 1700000000, "model": model,
            "prompt_filter_results": PROMPT_FILTER_CHUNK["prompt_filter_results"],
            "choices": [{"index": 0, "finish_reason": "content_filter", "content_filter_results": SEVERITIES,
                         "message": {"role": "assistant", "content": "Once upon a time", "refusal": None}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 4, "total_tokens": 9}}
