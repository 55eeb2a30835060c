"""`/v1/messages` to an Anthropic server: the client's request as it came (only `model` replaced
and `stream` set, so a reply cut midway can still be returned in part), its beta and version
headers and query string with it; the server's events come back as they are, parsed. Also what
every Claude model on a cloud shares: its SSE events read and checked (`read_events`: Vertex AI),
and the chat form through its Messages events (`chat_through_messages`: Bedrock and Vertex AI)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

from gateway.formats import StreamError
from gateway.formats.anthropic.from_chat import chat_to_messages_request, output_tool_name
from gateway.formats.anthropic.streams import MessagesToChatStream
from gateway.registry.snapshot import Target
from gateway.upstream.http_client import build_request
from gateway.upstream.providers.base import broken, missing_key, secrets_of, server_events, timeouts, uncarried
from gateway.upstream.replies import chunk_problem

API_VERSION = "2023-06-01"  # when the client sent none


def message_events(target: Target, body: dict[str, Any], headers: dict[str, str],
                   query: str) -> AsyncIterator[dict[str, Any]]:
    """The server's Messages stream events (dicts with `type`), by `read_events`; a server without its key
    fails at once."""
    if failure := missing_key(target.server):
        raise failure
    sent = {"anthropic-version": API_VERSION, **headers}
    if target.server.api_key:
        sent["x-api-key"] = target.server.api_key
    url = f"{target.server.base_url}/v1/messages" + (f"?{query}" if query else "")
    request = build_request("POST", url, json={**body, "model": target.name, "stream": True}, headers=sent,
                            timeouts=timeouts(target.server))
    return read_events(server_events(request, target.server), secrets_of(request, target.server))


async def read_events(events: AsyncIterator[tuple[str, str]], secrets: list[str]) -> AsyncIterator[dict[str, Any]]:
    """A Messages SSE stream's events, parsed and checked (Anthropic's API, Claude on Vertex AI): an `error`
    event, a malformed or an unfinished stream raise UpstreamError before the first event is passed on and
    StreamCut after; a `ping` before it is not passed on, so a failure after it can still fall through."""
    started = finished = False
    async for _event, data in events:
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


_OBJECTS = ("message", "content_block", "delta", "usage")


def well_formed(event: dict[str, Any]) -> bool:
    """What the gateway reads of an event has the type the Messages API gives it (a block index is
    an integer; message, block, delta and usage are objects)."""
    index = event.get("index", 0)
    if not isinstance(index, int) or isinstance(index, bool):
        return False
    return all(isinstance(event.get(name, {}), dict) for name in _OBJECTS)


async def chat_through_messages(target: Target, body: dict[str, Any],
                                events: Callable[[dict[str, Any]], AsyncIterator[dict[str, Any]]],
                                ) -> AsyncIterator[dict[str, Any]]:
    """The chat form to a Claude model that a cloud serves (Bedrock, Vertex AI), as the Anthropic kind
    translates it: the Messages request made from `body` (a field it cannot carry refused by name), given to
    `events` (the cloud's call, yielding the model's Messages events), and the events read back as chat chunks."""
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
    async for event in events(request):
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
