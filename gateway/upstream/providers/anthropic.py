"""Anthropic model servers. `base_url` has no /v1 (as the official SDK): https://api.anthropic.com

The chat body arrives in the neutral (chat-completions) form, goes out as a Messages request,
and the server's events come back as chat chunks. A field the Messages request cannot carry is
refused by name before any call (the chain moves on), or left out when the server drops
unsupported fields (docs/compatibility.md)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from gateway.formats import StreamError
from gateway.formats.anthropic.from_chat import chat_to_messages_request, output_tool_name
from gateway.formats.anthropic.streams import MessagesToChatStream
from gateway.registry.snapshot import Server, Target
from gateway.upstream.http_client import build_request
from gateway.upstream.providers.anthropic_native import message_events  # noqa: F401 — this kind's native call
from gateway.upstream.providers.base import broken, missing_key, secrets_of, server_events, timeouts, uncarried
from gateway.upstream.replies import chunk_problem

API_VERSION = "2023-06-01"


def wire(target: Target) -> str:
    return "anthropic"


def headers(server: Server) -> dict[str, str]:
    """What every request to an Anthropic server carries: the API's version and the server's key."""
    sent = {"anthropic-version": API_VERSION}
    if server.api_key:
        sent["x-api-key"] = server.api_key
    return sent


async def endpoint(target: Target, path: str) -> tuple[str, dict[str, str]]:
    """An Anthropic server as the plain requests of gateway/upstream/providers/openai.py (`forward`, `fetch`)
    take it (its batch API): its base URL and `path` (from /v1), its headers."""
    if failure := missing_key(target.server):
        raise failure
    return f"{target.server.base_url}{path}", headers(target.server)


async def chat_stream(target: Target, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    if failure := missing_key(target.server):
        raise failure
    structured = target.server.structured_output
    lost: list[str] = []
    payload = {**chat_to_messages_request(body, structured_output=structured, lost=lost), "model": target.name,
               "stream": True}
    if refusal := uncarried(target.server, lost):
        raise refusal
    request = build_request("POST", f"{target.server.base_url}/v1/messages", json=payload,
                            headers=headers(target.server), timeouts=timeouts(target.server))
    translator = MessagesToChatStream(
        completion_id=f"chatcmpl-{uuid.uuid4().hex}", model=target.name, created=int(time.time()),
        include_usage=True, output_tool=output_tool_name(body, structured),
    )
    secrets = secrets_of(request, target.server)
    started = False
    async for _event, data in server_events(request, target.server):
        if translator.finished:
            continue  # read to the end of the body, so the connection is kept for the next call
        try:
            chunks = translator.feed(json.loads(data))
        except ValueError:
            raise broken(started, "The model server sent a malformed stream.") from None
        except StreamError as exc:
            raise broken(started, exc.message or "The model server reported an error.", cut="upstream_error",
                         secrets=secrets) from None
        for chunk in chunks:
            if problem := chunk_problem(chunk):  # a tool name that is not a string, passed through
                raise broken(started, f"The model server sent a malformed reply: {problem}.", cut="upstream_error")
            started = True
            yield chunk
    if not translator.finished:
        raise broken(started, "The model server ended the reply early.")
