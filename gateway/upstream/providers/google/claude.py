"""Claude models on Vertex AI (publisher `anthropic`): the Anthropic Messages API through `streamRawPredict`
(`…/publishers/anthropic/models/{model}:streamRawPredict`), as `anthropic.AnthropicVertex` calls it.

The request body is the Messages request without `model` (it is in the path), with `stream: true` and Vertex's
`anthropic_version`; the client's `anthropic-beta` values go on as the `anthropic-beta` header, as the SDK sends
them, only those the server carries (`betas`: as Claude Code sends Vertex AI its own). The reply is the
Messages API's own SSE stream, so `/v1/messages` is a same-format pass-through and the chat form is the
Anthropic kind's own translation (gateway/formats/anthropic/). The client's query string
(Claude Code's `?beta=true`) is the Anthropic API's and is not sent: Vertex AI's path has none."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from gateway.registry.snapshot import Target
from gateway.upstream.providers.anthropic_native import chat_through_messages, read_events
from gateway.upstream.providers.base import secrets_of, server_events
from gateway.upstream.providers.claude_betas import gated
from gateway.upstream.providers.google import betas, transport

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
    """The model's Messages events for a `vertex_body`, read as Anthropic's own stream is."""
    payload, beta_header = shaped
    request = await transport.request(target, STREAM, payload, headers=beta_header)
    async for event in read_events(server_events(request, target.server, transport.answered_failure),
                                   secrets_of(request, target.server)):
        yield event


def message_events(target: Target, body: dict[str, Any], headers: dict[str, str],
                   query: str) -> AsyncIterator[dict[str, Any]]:
    """`/v1/messages` as the client sent it: the server's own Messages events."""
    return _events(target, vertex_body(target, body, headers))


def chat_stream(target: Target, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    """The chat form to a Claude model on Vertex AI, as the Anthropic kind translates it."""
    return chat_through_messages(target, body, lambda request: _events(target, vertex_body(target, request, {})))
