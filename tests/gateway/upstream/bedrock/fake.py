"""A fake AWS Bedrock on loopback for the tests: its runtime (InvokeModel, InvokeModelWithResponseStream,
ConverseStream) and its control plane's listings (foundation models, inference profiles), on one address.

Every request is recorded and must authenticate as Bedrock asks: a SigV4 signature that botocore verifies from
the credentials the fake knows (`sigv4.py`), or the Bedrock API key as a bearer token; else a 403 in Bedrock's
own shape. A Claude model's reply is the reference upstream's Messages reply (tests/upstream/anthropic_wire.py:
echo, scripted tool calls, usage and cache reads) in Bedrock's binary event stream, one chunk per event, with
Bedrock's invocation metrics in the last; another model's (ConverseStream) echoes too, or calls a tool it is
offered with the same knobs, and stops at its maxTokens. Knobs make it fail as Bedrock does (an HTTP error with
x-amzn-ErrorType, an exception frame midway) or cut the connection midway."""

from __future__ import annotations

import asyncio
import copy
import json
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from tests.faults.services import wait_for
from tests.gateway.upstream.bedrock import eventstream, sigv4
from tests.upstream.anthropic_wire import messages_create
from tests.upstream.core import DEFAULTS as REFERENCE_DEFAULTS
from tests.upstream.core import ClientError, Reply, Stream, limit_tokens, split_arguments, split_tokens, tool_arguments

ACCESS_KEY, SECRET_KEY = "AKIAFAKEBEDROCK00001", "fake-bedrock-secret-key-0001"
REGION = "us-east-1"
CLAUDE = "anthropic.claude-sonnet-4-5-20250929-v1:0"
PROFILE = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
EVENTSTREAM = b"application/vnd.amazon.eventstream"

FOUNDATION_MODELS = [
    {"modelId": CLAUDE, "providerName": "Anthropic", "inputModalities": ["TEXT", "IMAGE"],
     "outputModalities": ["TEXT"], "inferenceTypesSupported": ["ON_DEMAND"], "responseStreamingSupported": True},
    {"modelId": "anthropic.claude-opus-4-1-20250805-v1:0", "providerName": "Anthropic",
     "outputModalities": ["TEXT"], "inferenceTypesSupported": ["INFERENCE_PROFILE"]},
    {"modelId": "amazon.titan-embed-text-v2:0", "providerName": "Amazon", "outputModalities": ["EMBEDDING"],
     "inferenceTypesSupported": ["ON_DEMAND"]},
    {"modelId": "cohere.embed-english-v3", "providerName": "Cohere", "outputModalities": ["EMBEDDING"],
     "inferenceTypesSupported": ["ON_DEMAND"]},
    {"modelId": "amazon.nova-canvas-v1:0", "providerName": "Amazon", "outputModalities": ["IMAGE"],
     "inferenceTypesSupported": ["ON_DEMAND"]},
    {"modelId": "meta.llama3-8b-instruct-v1:0", "providerName": "Meta", "outputModalities": ["TEXT"],
     "inferenceTypesSupported": ["ON_DEMAND"]},
]
PROFILES = [
    {"inferenceProfileId": PROFILE, "status": "ACTIVE", "type": "SYSTEM_DEFINED"},
    {"inferenceProfileId": "us.anthropic.claude-opus-4-1-20250805-v1:0", "status": "ACTIVE", "type": "SYSTEM_DEFINED"},
    {"inferenceProfileId": "global.anthropic.claude-haiku-4-5-20251001-v1:0", "status": "ACTIVE"},
]

DEFAULTS: dict[str, Any] = {
    **{name: REFERENCE_DEFAULTS[name] for name in ("reply", "usage", "cached_tokens", "tool_name", "tool_arguments")},
    "cache_write_tokens": 0,  # of the prompt's tokens, this many written to the prompt cache (usage says so)
    "credentials": {ACCESS_KEY: (SECRET_KEY, None)},  # access key id -> (secret, session token or None)
    "api_key": None,  # a Bedrock API key taken as a bearer token
    "require_auth": True,  # False: take unauthenticated requests (Claude Code with CLAUDE_CODE_SKIP_BEDROCK_AUTH)
    "region": REGION,
    "fail_error": None,  # answer with this x-amzn-ErrorType (ThrottlingException, ...) and `fail_status`
    "fail_status": 400,
    "fail_message": "Too many requests, please wait before trying again.",
    "fail_times": -1,  # -1: every model call fails; N: the next N
    "retry_after": None,  # a retry-after header on the failure
    "exception_after_tokens": None,  # streams: an exception frame of `exception_type` after N tokens (-3: first)
    "exception_type": "modelStreamErrorException",
    "cut_after_tokens": None,  # streams: the connection dropped after N tokens
    "models": FOUNDATION_MODELS,
    "profiles": PROFILES,
    "page_size": 2,  # listings: this many per page, then a nextToken
}


@dataclass
class Recorded:
    method: str
    path: str  # as decoded
    raw_path: str  # as sent (percent-encoding kept)
    query: str
    headers: dict[str, str]  # lower-case names
    body: bytes
    json: Any
    auth: str | None  # "sigv4", "bearer" or None
    problem: str | None  # why its credentials were refused; None when accepted

    @property
    def signed(self) -> list[str] | None:
        return sigv4.signed_names(self.headers)


@dataclass
class State:
    knobs: dict[str, Any] = field(default_factory=lambda: copy.deepcopy(DEFAULTS))
    requests: list[Recorded] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def configure(self, **knobs: Any) -> None:
        unknown = set(knobs) - DEFAULTS.keys()
        if unknown:
            raise TypeError(f"unknown fake Bedrock knob(s): {sorted(unknown)}")
        with self.lock:
            self.knobs = {**self.knobs, **copy.deepcopy(knobs)}

    def reset(self) -> None:
        with self.lock:
            self.knobs = copy.deepcopy(DEFAULTS)
            self.requests.clear()

    def take_failure(self) -> bool:
        with self.lock:
            knobs = self.knobs
            if knobs["fail_error"] is None or knobs["fail_times"] == 0:
                return False
            if knobs["fail_times"] > 0:
                knobs["fail_times"] -= 1
            return True


class BedrockError(Exception):
    def __init__(self, status: int, error_type: str, message: str, retry_after: str | None = None):
        super().__init__(message)
        self.status, self.error_type, self.message, self.retry_after = status, error_type, message, retry_after


def _authenticate(req: Recorded, knobs: dict[str, Any]) -> None:
    authorization = req.headers.get("authorization", "")
    if authorization.startswith("Bearer "):
        req.auth = "bearer"
        if knobs["api_key"] is None or authorization != f"Bearer {knobs['api_key']}":
            req.problem = "wrong API key"
    elif authorization:
        req.auth = "sigv4"
        req.problem = sigv4.problem(req.method, req.raw_path, req.query, req.headers, req.body,
                                    knobs["credentials"], knobs["region"])
    elif knobs["require_auth"]:
        req.problem = "no credentials"
    if req.problem is not None:
        kind = "UnrecognizedClientException" if req.problem.startswith(("unknown", "wrong")) else \
            "InvalidSignatureException"
        raise BedrockError(403, kind, "The request signature we calculated does not match the signature you "
                                      "provided. Check your AWS Secret Access Key and signing method.")


def _listing(req: Recorded, knobs: dict[str, Any], items: list[dict], key: str) -> Reply:
    start = int(req.query.partition("nextToken=")[2].partition("&")[0] or 0) if "nextToken=" in req.query else 0
    size = knobs["page_size"]
    body: dict[str, Any] = {key: items[start:start + size]}
    if start + size < len(items):
        body["nextToken"] = str(start + size)
    return Reply(json.dumps(body).encode())


@dataclass
class Frames:
    frames: list[bytes]
    head: int  # how many come before the first token (the cut and exception knobs count tokens)


def embedding(text: str) -> list[float]:
    """The fake's vector of a text: its length and two fixed numbers (so a test can tell texts apart)."""
    return [float(len(text)), 0.5, -0.25]


def _embed(body: dict, model: str) -> Reply:
    """Titan Text Embeddings (one text, its token count in the body) and Cohere Embed (up to 96 texts, the
    count in X-Amzn-Bedrock-Input-Token-Count), as Bedrock answers them: one token per word here."""
    if "titan-embed" in model:
        text = body.get("inputText")
        if not isinstance(text, str) or set(body) - {"inputText", "dimensions", "normalize"}:
            raise BedrockError(400, "ValidationException", "Malformed input request: inputText is required.")
        return Reply(json.dumps({"embedding": embedding(text), "inputTextTokenCount": len(text.split())}).encode())
    texts = body.get("texts")
    if not isinstance(texts, list) or not 1 <= len(texts) <= 96 or body.get("input_type") is None:
        raise BedrockError(400, "ValidationException", "Malformed input request: texts and input_type are required.")
    reply = {"id": uuid.uuid4().hex, "texts": texts, "embeddings": [embedding(text) for text in texts],
             "response_type": "embeddings_floats"}
    tokens = str(sum(len(text.split()) for text in texts)).encode()
    return Reply(json.dumps(reply).encode(), headers=((b"x-amzn-bedrock-input-token-count", tokens),))


def _invoke(req: Recorded, knobs: dict[str, Any], model: str, stream: bool) -> Reply | Frames:
    body = req.json
    if not isinstance(body, dict):
        raise BedrockError(400, "ValidationException", "Malformed input request, please reformat your input.")
    if not stream and ("titan-embed" in model or "cohere.embed" in model):
        return _embed(body, model)
    for extraneous in ("model", "stream"):
        if extraneous in body:
            raise BedrockError(400, "ValidationException", f"extraneous key [{extraneous}] is not permitted")
    if body.get("anthropic_version") != "bedrock-2023-05-31":
        raise BedrockError(400, "ValidationException", "anthropic_version: bedrock-2023-05-31 is required")
    try:
        result = messages_create({**body, "model": model, "stream": stream}, knobs)
    except ClientError as exc:
        raise BedrockError(400, "ValidationException", exc.message) from None
    if isinstance(result, Reply):
        return result
    return Frames(_frames(result, knobs), len(result.head))


def _frames(stream: Stream, knobs: dict[str, Any]) -> list[bytes]:
    frames = []
    for sse in [*stream.head, *stream.tokens, *stream.tail]:
        data = json.loads(sse.decode().split("data: ", 1)[1])
        if data["type"] == "message_start" and knobs["cache_write_tokens"] and "usage" in data["message"]:
            usage = data["message"]["usage"]
            written = min(knobs["cache_write_tokens"], usage["input_tokens"])
            usage.update(input_tokens=usage["input_tokens"] - written, cache_creation_input_tokens=written)
        if data["type"] == "message_stop":
            data["amazon-bedrock-invocationMetrics"] = {"inputTokenCount": 3, "outputTokenCount": len(stream.tokens),
                                                        "invocationLatency": 120, "firstByteLatency": 40}
        frames.append(eventstream.chunk(data))
    return frames


def _converse_tool(body: dict[str, Any], knobs: dict[str, Any]) -> str | None:
    """The tool the model calls: with tools offered, the `tool_name` knob, else the tool `toolChoice` names,
    else the first offered (Converse has no "none": a request that may call no tool offers none)."""
    config = body.get("toolConfig") if isinstance(body.get("toolConfig"), dict) else {}
    specs = [tool["toolSpec"] for tool in config.get("tools") or [] if isinstance(tool, dict) and "toolSpec" in tool]
    if not specs:
        return None
    named = ((config.get("toolChoice") or {}).get("tool") or {}).get("name")
    return knobs["tool_name"] or named or specs[0].get("name") or "tool"


def _converse(req: Recorded, knobs: dict[str, Any]) -> Frames:
    """ConverseStream's events for a reply that echoes the last user text, cut at `inferenceConfig.maxTokens`
    (stopReason max_tokens); or, with tools offered, a call of one (its input streamed as JSON text in two
    pieces, stopReason tool_use), as the service streams them: a toolUse block opens with contentBlockStart, a
    text block with its first delta."""
    body = req.json if isinstance(req.json, dict) else {}
    messages = body.get("messages") or [{}]
    text = " ".join(part.get("text", "") for part in messages[-1].get("content") or [] if isinstance(part, dict))
    usage = {"inputTokens": 4, "outputTokens": 0, "totalTokens": 4}
    if tool := _converse_tool(body, knobs):
        pieces = split_arguments(tool_arguments(knobs))
        head = [eventstream.event("messageStart", {"role": "assistant"}),
                eventstream.event("contentBlockStart", {"contentBlockIndex": 0, "start": {"toolUse": {
                    "toolUseId": "tooluse_" + uuid.uuid4().hex[:22], "name": tool}}})]
        deltas = [{"toolUse": {"input": piece}} for piece in pieces]
        stop, count = "tool_use", 1 + len(pieces)
    else:
        head = [eventstream.event("messageStart", {"role": "assistant"})]
        limit = (body.get("inferenceConfig") or {}).get("maxTokens")
        tokens, truncated = limit_tokens(split_tokens(knobs["reply"] if knobs["reply"] is not None
                                                      else f"Echo: {text}"), limit)
        deltas = [{"text": token} for token in tokens]
        stop, count = "max_tokens" if truncated else "end_turn", len(tokens)
    usage.update(outputTokens=count, totalTokens=4 + count)
    return Frames([*head, *(eventstream.event("contentBlockDelta", {"contentBlockIndex": 0, "delta": delta})
                            for delta in deltas),
                   eventstream.event("contentBlockStop", {"contentBlockIndex": 0}),
                   eventstream.event("messageStop", {"stopReason": stop}),
                   eventstream.event("metadata", {"usage": usage, "metrics": {"latencyMs": 5}})], len(head))


def route(req: Recorded, knobs: dict[str, Any], state: State) -> Reply | Frames:
    if req.method == "GET" and req.path == "/foundation-models":
        return _listing(req, knobs, knobs["models"], "modelSummaries")
    if req.method == "GET" and req.path == "/inference-profiles":
        return _listing(req, knobs, knobs["profiles"], "inferenceProfileSummaries")
    model, _, action = req.path.removeprefix("/model/").rpartition("/")
    if req.method != "POST" or not req.path.startswith("/model/") or action not in (
            "invoke", "invoke-with-response-stream", "converse-stream"):
        raise BedrockError(404, "UnknownOperationException", f"Unknown operation {req.method} {req.path}")
    if state.take_failure():
        raise BedrockError(knobs["fail_status"], knobs["fail_error"], knobs["fail_message"], knobs["retry_after"])
    if action == "converse-stream":
        return _converse(req, knobs)
    return _invoke(req, knobs, model, stream=action != "invoke")


class BedrockApp:
    def __init__(self, state: State):
        self.state = state

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body, more = b"", True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            data = json.loads(body) if body else None
        except ValueError:
            data = None
        raw_path = (scope.get("raw_path") or scope["path"].encode()).decode("latin-1").partition("?")[0]
        req = Recorded(scope["method"], scope["path"], raw_path, scope.get("query_string", b"").decode("latin-1"),
                       headers, body, data, None, None)
        state = self.state
        knobs = state.knobs
        state.requests.append(req)
        try:
            _authenticate(req, knobs)
            result = route(req, knobs, state)
        except BedrockError as exc:
            extra = [(b"retry-after", exc.retry_after.encode())] if exc.retry_after else []
            result = Reply(json.dumps({"message": exc.message}).encode(), status=exc.status, headers=(
                (b"x-amzn-errortype", f"{exc.error_type}:http://internal.amazon.com/coral/com.amazon.bedrock/".encode()),
                *extra))
        request_id = (b"x-amzn-requestid", str(uuid.uuid4()).encode())
        if isinstance(result, Reply):
            await send({"type": "http.response.start", "status": result.status, "headers": [
                (b"content-type", result.content_type), (b"content-length", str(len(result.body)).encode()),
                *result.headers, request_id]})
            await send({"type": "http.response.body", "body": result.body})
            return
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", EVENTSTREAM), (b"x-amzn-bedrock-content-type", b"application/json"), request_id]})
        await self._stream(result, knobs, send, receive)

    async def _stream(self, result: Frames, knobs: dict[str, Any], send: Any, receive: Any) -> None:
        cut, fail = knobs["cut_after_tokens"], knobs["exception_after_tokens"]
        for index, frame in enumerate(result.frames):
            token = index - result.head
            if cut is not None and token == cut:
                transport = getattr(getattr(send, "__self__", None), "transport", None)
                transport.close()
                await asyncio.wait_for(receive(), timeout=1)
                return
            if fail is not None and token == fail:
                frame = eventstream.exception(knobs["exception_type"], "The model stream failed midway.")
                await send({"type": "http.response.body", "body": frame, "more_body": False})
                return
            await send({"type": "http.response.body", "body": frame, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


class FakeBedrock:
    """uvicorn serving a BedrockApp from a daemon thread on a free loopback port."""

    def __init__(self) -> None:
        self.state = State()
        self.server: Any = None
        self.thread: threading.Thread | None = None
        self.url = ""

    def start(self) -> FakeBedrock:
        import uvicorn

        from tests.servers import free_port

        port = free_port()
        config = uvicorn.Config(BedrockApp(self.state), host="127.0.0.1", port=port, log_level="warning",
                                lifespan="off", log_config=None, access_log=False)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name=f"bedrock-{port}", daemon=True)
        self.thread.start()
        wait_for(lambda: self.server.started or not self.thread.is_alive(), 10, "the fake Bedrock starting",
                 interval=0.005)
        assert self.server.started, "the fake Bedrock did not start"
        self.url = f"http://127.0.0.1:{port}"
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.should_exit = self.server.force_exit = True
        if self.thread is not None:
            self.thread.join(timeout=5)

    @property
    def alive(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def configure(self, **knobs: Any) -> FakeBedrock:
        self.state.configure(**knobs)
        return self

    def reset(self) -> FakeBedrock:
        self.state.reset()
        return self

    @property
    def requests(self) -> list[Recorded]:
        return self.state.requests

    def calls(self) -> list[Recorded]:
        """The model calls received (not the listings)."""
        return [r for r in self.state.requests if r.path.startswith("/model/")]
