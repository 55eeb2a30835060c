"""The raw ASGI application: request log, control endpoints, auth, injected failures, routing, SSE pacing."""

from __future__ import annotations

import asyncio
import http
import itertools
import json
from typing import Any

from . import anthropic_wire, batch_wire, extras, openai_wire
from .core import ClientError, RecordedRequest, Reply, State, Stream, dumps, json_reply

# (method, path) -> handler(parsed JSON body, knobs)
JSON_ROUTES = {
    ("POST", "/v1/chat/completions"): openai_wire.chat_completions,
    ("POST", "/v1/embeddings"): extras.embeddings,
    ("POST", "/v1/audio/speech"): extras.speech,
    ("POST", "/v1/messages"): anthropic_wire.messages_create,
    ("POST", "/v1/messages/count_tokens"): anthropic_wire.count_tokens,
}
AUDIO_TASKS = {"/v1/audio/transcriptions": "transcribe", "/v1/audio/translations": "translate"}
SSE_HEADERS = [(b"content-type", b"text/event-stream; charset=utf-8"), (b"cache-control", b"no-cache")]
RETRY_STATUSES = (429, 503, 529)


def route(req: RecordedRequest, knobs: dict[str, Any], anthropic: bool, store: dict[str, Any]) -> Reply | Stream:
    handler = JSON_ROUTES.get((req.method, req.path))
    if handler is not None:
        return handler(req.json, knobs)
    if req.path.startswith(batch_wire.PREFIXES):
        return batch_wire.route(req, knobs, store)
    if req.method == "POST" and req.path in AUDIO_TASKS:
        return extras.transcription(req.headers.get("content-type", ""), req.body, AUDIO_TASKS[req.path])
    if req.method == "GET":
        if knobs["ollama_only"] and req.path.startswith("/v1/models"):
            raise ClientError(404, "404 page not found")
        if req.path == "/v1/models":
            return extras.anthropic_models(knobs) if anthropic else extras.openai_models(knobs)
        if req.path.startswith("/v1/models/"):
            return extras.openai_model(knobs, req.path[len("/v1/models/"):])
        if req.path == "/api/tags":
            return extras.ollama_tags(knobs)
    raise ClientError(404, f"Unknown request URL: {req.method} {req.path}.")


class UpstreamApp:
    """ASGI 3 app. All mutable state lives in `state`, which a controller in another thread may change."""

    def __init__(self, state: State | None = None):
        self.state = state or State()
        self._ids = itertools.count(1)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            if scope["type"] == "lifespan":
                await _lifespan(receive, send)
            return
        try:
            await self._handle(scope, receive, send)
        except asyncio.CancelledError:
            # Only a stopping server cancels a request (e.g. one stalled by stall_after_tokens): hang up
            # on the client and end quietly rather than have uvicorn log a traceback.
            await _drop_connection(send, receive)

    async def _handle(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        body = b""
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
        method, path = scope["method"], scope["path"]
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        if path.startswith("/_control"):
            await _send_reply(send, self._control(method, path, body))
            return

        data = None
        if body and not headers.get("content-type", "").startswith("multipart/"):
            try:
                data = json.loads(body)
            except ValueError:
                pass
        req = RecordedRequest(method, path, scope.get("query_string", b"").decode("latin-1"), headers, body, data,
                              tuple(scope["client"]) if scope.get("client") else None)
        state = self.state
        knobs = state.knobs
        if knobs["record"]:
            state.requests.append(req)
        # Anthropic error shapes on /v1/messages*, and on /v1/models when an Anthropic SDK asks
        anthropic = path.startswith("/v1/messages") or (
            path.startswith("/v1/models") and "anthropic-version" in headers)
        request_id = f"req_{next(self._ids):012x}"
        id_header = (b"request-id" if anthropic else b"x-request-id", request_id.encode())

        if knobs["latency_ms"]:
            await asyncio.sleep(knobs["latency_ms"] / 1000)
        try:
            if knobs["kind"] not in ("both", "anthropic" if anthropic else "openai"):
                raise ClientError(404, f"This upstream serves only the {knobs['kind']} API.")
            key = knobs["require_key"]
            if key is not None and headers.get("x-api-key") != key and headers.get("authorization") != f"Bearer {key}":
                raise ClientError(401, "invalid x-api-key" if anthropic else "Incorrect API key provided.")
            status = state.take_failure(path)
            if status is not None:
                raise ClientError(status, _phrase(status) + " (injected by the test upstream)")
            result = route(req, knobs, anthropic, state.store)
        except ClientError as exc:
            if knobs["leak_credentials"]:
                exc.message = leaky(exc.message, headers)
            result = _error_reply(exc, anthropic, request_id)

        if isinstance(result, Stream):
            error = None
            if knobs["error_after_tokens"] is not None:
                message = "The model crashed mid-reply."
                error = stream_error(leaky(message, headers) if knobs["leak_credentials"] else message, anthropic,
                                     request_id)
            await self._stream(result, knobs, send, receive, id_header, error)
        elif method == "POST" and knobs["cut_after_tokens"] is not None and result.status < 400:
            await _drop_connection(send, receive)
        else:
            await _send_reply(send, result, id_header)

    async def _stream(self, stream: Stream, knobs: dict[str, Any], send: Any, receive: Any,
                      id_header: tuple[bytes, bytes], error: bytes | None = None) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": [*SSE_HEADERS, id_header]})
        await send({"type": "http.response.body", "body": b"".join(stream.head), "more_body": True})
        tokens = stream.tokens
        cut, stall = knobs["cut_after_tokens"], knobs["stall_after_tokens"]
        fail = None if error is None else min(knobs["error_after_tokens"], len(tokens))
        cut = None if cut is None else min(cut, len(tokens))
        stall = None if stall is None else min(stall, len(tokens))
        delay = 1 / knobs["tokens_per_second"] if knobs["tokens_per_second"] else 0
        # Paced or stalled streams watch for the client leaving, so they stop instead of writing into the void.
        watcher = asyncio.ensure_future(receive()) if delay or stall is not None else None
        try:
            for i in range(len(tokens) + 1):
                if i == cut:
                    await _drop_connection(send, receive, watcher)
                    return
                if i == fail:
                    await send({"type": "http.response.body", "body": error, "more_body": False})
                    return
                if i == stall:
                    await asyncio.wait((watcher,), timeout=knobs["stall_seconds"])
                if i == len(tokens):
                    break
                if delay:
                    await asyncio.sleep(delay)
                if watcher is not None and watcher.done():
                    return
                await send({"type": "http.response.body", "body": tokens[i], "more_body": True})
            if watcher is None or not watcher.done():
                if knobs["end_delay_ms"]:  # the last events first, the end of the body a moment later
                    await send({"type": "http.response.body", "body": b"".join(stream.tail), "more_body": True})
                    await asyncio.sleep(knobs["end_delay_ms"] / 1000)
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                else:
                    await send({"type": "http.response.body", "body": b"".join(stream.tail), "more_body": False})
        finally:
            if watcher is not None:
                watcher.cancel()

    def _control(self, method: str, path: str, body: bytes) -> Reply:
        state = self.state
        if method == "POST" and path == "/_control/reset":
            state.reset()
            return json_reply({"knobs": state.knobs})
        if method == "GET" and path == "/_control/requests":
            return json_reply([{"method": r.method, "path": r.path, "query": r.query, "headers": r.headers,
                                "json": r.json} for r in list(state.requests)])
        if path == "/_control" and method == "GET":
            return json_reply({"knobs": state.knobs, "requests": len(state.requests)})
        if path == "/_control" and method == "POST":
            try:
                knobs = json.loads(body or b"{}")
                if not isinstance(knobs, dict):
                    raise ValueError("POST /_control takes a JSON object of knobs")
                state.configure(**knobs)
            except (ValueError, TypeError) as exc:
                return json_reply({"error": str(exc)}, status=400)
            return json_reply({"knobs": state.knobs})
        return json_reply({"error": f"unknown control request {method} {path}"}, status=404)


def _phrase(status: int) -> str:
    if status == 529:
        return "Overloaded"
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return f"Error {status}"


def leaky(message: str, headers: dict[str, str]) -> str:
    """`message` as a careless server words it: with the credentials the request carried."""
    authorization, api_key = headers.get("authorization", ""), headers.get("x-api-key", "")
    key = api_key or authorization.partition(" ")[2]
    return (f"{message} Incorrect API key provided: {key}. You sent Authorization: {authorization!r}, "
            f"x-api-key: {api_key!r} (raw headers: {dumps(headers)}).")


def stream_error(message: str, anthropic: bool, request_id: str) -> bytes:
    """An error event inside a stream, in the wire format's shape."""
    if anthropic:
        return f"event: error\ndata: {dumps(anthropic_wire.error_body(500, message, request_id))}\n\n".encode()
    return f"data: {dumps(openai_wire.error_body(500, message))}\n\n".encode()


def _error_reply(exc: ClientError, anthropic: bool, request_id: str) -> Reply:
    if anthropic:
        body = anthropic_wire.error_body(exc.status, exc.message, request_id)
    else:
        body = openai_wire.error_body(exc.status, exc.message, exc.param)
    headers = ((b"retry-after", b"1"),) if exc.status in RETRY_STATUSES else ()
    return Reply(dumps(body).encode(), status=exc.status, headers=headers)


async def _send_reply(send: Any, reply: Reply, *extra: tuple[bytes, bytes]) -> None:
    headers = [(b"content-type", reply.content_type), (b"content-length", str(len(reply.body)).encode()),
               *reply.headers, *extra]
    await send({"type": "http.response.start", "status": reply.status, "headers": headers})
    await send({"type": "http.response.body", "body": reply.body})


async def _drop_connection(send: Any, receive: Any, watcher: asyncio.Future | None = None) -> None:
    """Close the TCP connection now, mid-response or before any response.

    ASGI has no message for this, so reach the transport behind uvicorn's `send` (its
    RequestResponseCycle). Then wait for the server to notice the disconnect, so it neither logs
    "returned without completing response" nor sends a 500 of its own."""
    transport = getattr(getattr(send, "__self__", None), "transport", None)
    if transport is None:  # another server: an exception makes it drop the connection (and log it)
        raise ConnectionAbortedError("the test upstream cut this response (cut_after_tokens)")
    transport.close()
    try:
        await asyncio.wait_for(watcher if watcher is not None else receive(), timeout=1)
    except asyncio.TimeoutError:
        pass


async def _lifespan(receive: Any, send: Any) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
