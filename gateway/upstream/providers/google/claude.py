"""Claude models on Vertex AI (publisher `anthropic`): the Anthropic Messages API through `streamRawPredict`
(`…/publishers/anthropic/models/{model}:streamRawPredict`), as `anthropic.AnthropicVertex` calls it.

The request body is the Messages request without `model` (it is in the path), with `stream: true` and Vertex's
`anthropic_version`; the client's `anthropic-beta` values go on as the `anthropic-beta` header, as the SDK sends
them, only those the server carries (`betas`: as Claude Code sends Vertex AI its own). The reply is the
Messages API's own SSE stream, so `/v1/messages` is a same-format pass-through and the chat form is the
Anthropic kind's own translation (gateway/formats/anthropic/). The client's query string
(Claude Code's `?beta=true`) is the Anthropic API's and is not sent: Vertex AI's path has none."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from gateway.formats import StreamError
from gateway.formats.anthropic.from_chat import chat_to_messages_request, output_tool_name
from gateway.formats.anthropic.streams import MessagesToChatStream
from gateway.registry.snapshot import Target
from gateway.upstream.providers.anthropic_native import well_formed
from gateway.upstream.providers.base import broken, secrets_of, server_events, uncarried
from gateway.upstream.providers.claude_betas import gated
from gateway.upstream.providers.google import betas, transport
from gateway.upstream.replies import chunk_problem

VERTEX_VERSION = "vertex-2023-10-16"  # the `anthropic_version` Vertex AI takes for the Messages API
STREAM = "streamRawPredict"


def vertex_body(target: Target, body: dict[str, Any],
                headers: dict[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """The streamRawPredict body of a Messages request, and the `anthropic-beta` header to send with it."""
    sent = {key: value for key, value in body.items() if key != "model"}
    sent.update(stream=True, anthropic_version=VERTEX_VERSION)
    carried = betas.carried(target.server, sent, headers)
    return gated(sent, carried), ({"anthropic-beta": ",".join(carried)} if carried else {})


async def _events(target: Target, shaped: tuple[dict[str, Any], dict[str, str]]) -> AsyncIterator[dict[str, Any]]:
    """The model's Messages events for a `vertex_body`. Raises UpstreamError before the first one is passed on,
    StreamCut after (an `error` event, a malformed or an unfinished stream)."""
    payload, beta_header = shaped
    request = await transport.request(target, STREAM, payload, headers=beta_header)
    secrets = secrets_of(request, target.server)
    started = finished = False
    async for _event, data in server_events(request, target.server, transport.answered_failure):
        if finished:
            continue  # read to the end of the body, so the connection is kept for the next call
        try:
            event = json.loads(data)
        except ValueError:
            raise broken(started, "The model server sent a malformed stream.") from None
        kind = event.get("type") if isinstance(event, dict) else None
        if not isinstance(kind, str) or not well_formed(event):
            raise broken(started, "The model server sent a malformed stream.")
        if kind == "error":
            error = event.get("error") if isinstance(event.get("error"), dict) else {}
            message = error.get("message") if isinstance(error.get("message"), str) else None
            raise broken(started, message or "The model server reported an error.", cut="upstream_error",
                         secrets=secrets)
        if kind == "ping" and not started:
            continue  # nothing of the reply yet: a failure after it can still fall through
        finished = kind == "message_stop"
        started = True
        yield event
    if not finished:
        raise broken(started, "The model server ended the reply early.")


def message_events(target: Target, body: dict[str, Any], headers: dict[str, str],
                   query: str) -> AsyncIterator[dict[str, Any]]:
    """`/v1/messages` as the client sent it: the server's own Messages events."""
    return _events(target, vertex_body(target, body, headers))


async def chat_stream(target: Target, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    """The chat form to a Claude model on Vertex AI, as the Anthropic kind translates it
    (gateway/upstream/providers/anthropic.py), a field the Messages form cannot carry refused by name."""
    structured = target.server.structured_output
    lost: list[str] = []
    request = chat_to_messages_request(body, structured_output=structured, lost=lost)
    if refusal := uncarried(target.server, lost):
        raise refusal
    translator = MessagesToChatStream(
        completion_id=f"chatcmpl-{uuid.uuid4().hex}", model=target.name, created=int(time.time()),
        include_usage=True, output_tool=output_tool_name(body, structured),
    )
    started = False
    async for event in _events(target, vertex_body(target, request, {})):
        if translator.finished:
            continue
        try:
            chunks = translator.feed(event)
        except StreamError as exc:
            raise broken(started, exc.message or "The model server reported an error.", cut="upstream_error") from None
        for chunk in chunks:
            if problem := chunk_problem(chunk):
                raise broken(started, f"The model server sent a malformed reply: {problem}.", cut="upstream_error")
            started = True
            yield chunk
    if not translator.finished:
        raise broken(started, "The model server ended the reply early.")
