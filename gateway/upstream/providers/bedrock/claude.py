"""Claude models on Bedrock: the Anthropic Messages API through InvokeModelWithResponseStream
(`POST /model/{model id}/invoke-with-response-stream`).

The request body is the Messages request without `model` (it is in the path) and `stream` (the path
says it), with Bedrock's `anthropic_version` and the client's `anthropic-beta` values as `anthropic_beta`,
only those the server carries (`betas`: as Claude Code sends Bedrock its own). Every chunk of the reply
holds one Messages stream event, base64-encoded JSON, so `/v1/messages` is a same-format pass-through and
the chat form is the Anthropic kind's own translation (gateway/formats/anthropic/). Bedrock's
`amazon-bedrock-invocationMetrics`, added to the last event, is its own bookkeeping and is not passed on."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote

from gateway.registry.snapshot import Target
from gateway.upstream.providers.anthropic_native import chat_through_messages, well_formed
from gateway.upstream.providers.base import broken
from gateway.upstream.providers.bedrock import betas
from gateway.upstream.providers.bedrock.transport import JSON, frame_failure, frames, secrets, signed_request
from gateway.upstream.providers.claude_betas import from_header, gated

BEDROCK_VERSION = "bedrock-2023-05-31"  # the `anthropic_version` Bedrock takes for the Messages API
METRICS = "amazon-bedrock-invocationMetrics"


def invoke_url(target: Target, action: str = "invoke-with-response-stream") -> str:
    """The model's runtime path; its id quoted whole, as boto3 does (an ARN's `:` and `/` too)."""
    return f"{target.server.base_url}/model/{quote(target.name, safe='')}/{action}"


def bedrock_body(target: Target, body: dict[str, Any], headers: dict[str, str]) -> tuple[dict[str, Any], dict]:
    """The InvokeModel body of a Messages request and its headers, and the `anthropic-beta` header to send."""
    sent = {key: value for key, value in body.items() if key not in ("model", "stream", "anthropic_beta")}
    sent["anthropic_version"] = BEDROCK_VERSION
    in_body, in_header = betas.carried(target.server, [*(body.get("anthropic_beta") or ()), *from_header(headers)])
    sent = gated(sent, in_body)
    if in_body:
        sent["anthropic_beta"] = in_body
    return sent, ({"anthropic-beta": ",".join(in_header)} if in_header else {})


async def _events(target: Target, shaped: tuple[dict[str, Any], dict]) -> AsyncIterator[dict[str, Any]]:
    """The model's Messages events for a `bedrock_body`. Raises UpstreamError before the first one is passed
    on, StreamCut after (an exception frame, a malformed or an unfinished stream)."""
    payload, beta_header = shaped
    content = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
    request = await signed_request(target.server, "POST", invoke_url(target), content,
                                   {"X-Amzn-Bedrock-Accept": JSON, **beta_header})
    secret_values = secrets(request, target.server)
    started = finished = False
    async for frame in frames(request, target.server):
        if finished:
            continue  # read to the end of the body, so the connection is kept for the next call
        if frame.message_type != "event":
            raise frame_failure(frame, started, secret_values)
        if frame.event_type != "chunk":
            continue
        event = _chunk_event(frame.payload)
        kind = event.get("type") if isinstance(event, dict) else None
        if not isinstance(kind, str) or not well_formed(event):
            raise broken(started, "The model server sent a malformed stream.")
        if kind == "error":
            error = event.get("error") if isinstance(event.get("error"), dict) else {}
            message = error.get("message") if isinstance(error.get("message"), str) else None
            raise broken(started, message or "The model server reported an error.", cut="upstream_error",
                         secrets=secret_values)
        if kind == "ping" and not started:
            continue
        event.pop(METRICS, None)
        finished = kind == "message_stop"
        started = True
        yield event
    if not finished:
        raise broken(started, "The model server ended the reply early.")


def _chunk_event(payload: bytes) -> Any:
    """The Messages event a chunk carries: `{"bytes": base64 of its JSON}`; None when it is not one."""
    try:
        data = json.loads(payload)
        return json.loads(base64.b64decode(data["bytes"], validate=True))
    except (ValueError, KeyError, TypeError, binascii.Error):
        return None


def message_events(target: Target, body: dict[str, Any], headers: dict[str, str],
                   query: str) -> AsyncIterator[dict[str, Any]]:
    """`/v1/messages` as the client sent it (its query string, Claude Code's `?beta=true`, is the
    Anthropic API's own and is not sent: Bedrock's path has none)."""
    return _events(target, bedrock_body(target, body, headers))


def chat_stream(target: Target, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    """The chat form to a Claude model on Bedrock, as the Anthropic kind translates it."""
    return chat_through_messages(target, body, lambda request: _events(target, bedrock_body(target, request, {})))
