"""`/v1/messages` to an Anthropic server: the client's request as it came (only `model` replaced
and `stream` set, so a reply cut midway can still be returned in part), its beta and version
headers and query string with it; the server's events come back as they are, parsed."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from gateway.registry.snapshot import Target
from gateway.upstream.http_client import build_request
from gateway.upstream.providers.base import broken, missing_key, secrets_of, server_events, timeouts

API_VERSION = "2023-06-01"  # when the client sent none


async def message_events(target: Target, body: dict[str, Any], headers: dict[str, str],
                         query: str) -> AsyncIterator[dict[str, Any]]:
    """The server's Messages stream events (dicts with `type`). Raises UpstreamError before the
    first event, StreamCut after (an `error` event, a malformed or an unfinished stream)."""
    if failure := missing_key(target.server):
        raise failure
    sent = {"anthropic-version": API_VERSION, **headers}
    if target.server.api_key:
        sent["x-api-key"] = target.server.api_key
    url = f"{target.server.base_url}/v1/messages" + (f"?{query}" if query else "")
    request = build_request("POST", url, json={**body, "model": target.name, "stream": True}, headers=sent,
                            timeouts=timeouts(target.server))
    secrets = secrets_of(request, target.server)
    started = finished = False
    async for _event, data in server_events(request, target.server):
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
