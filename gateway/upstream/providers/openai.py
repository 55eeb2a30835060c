"""OpenAI-compatible model servers (vLLM, Ollama, llama.cpp, OpenAI). `base_url` ends in /v1.

Chat is always streamed from the server, also for a non-streamed client request, so a reply
that stops midway can still be returned in part (spec 6.2) and every failure before the first
byte can fall through to the next model.

Another kind that speaks this wire format at its own addresses, with its own credentials (Azure
OpenAI), passes its `Endpoint` to the same calls: the stream loop and the failures are told once."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx

from gateway.registry.snapshot import Target
from gateway.upstream.http_client import Response, build_request
from gateway.upstream.providers.base import (
    answered_failure,
    broken,
    missing_key,
    secrets_of,
    send,
    server_events,
    timeouts,
)
from gateway.upstream.replies import chunk_problem

# (target, path of the OpenAI API such as "/chat/completions") -> (URL, credential headers), or UpstreamError
Endpoint = Callable[[Target, str], Awaitable[tuple[str, dict[str, str]]]]


def wire(target: Target) -> str:
    return "openai"


async def endpoint(target: Target, path: str) -> tuple[str, dict[str, str]]:
    """An OpenAI-compatible server: its base URL and path, its key as a bearer token."""
    if failure := missing_key(target.server):
        raise failure
    key = target.server.api_key
    return f"{target.server.base_url}{path}", {"Authorization": f"Bearer {key}"} if key else {}


async def chat_stream(target: Target, body: dict[str, Any], headers: dict[str, str] | None = None, *,
                      at: Endpoint = endpoint) -> AsyncIterator[dict[str, Any]]:
    """The server's chat chunks. Raises UpstreamError before the first chunk, StreamCut after.
    `headers`: the client's own `OpenAI-Beta`, sent on when the client spoke this format."""
    url, credentials = await at(target, "/chat/completions")
    payload = {**body, "model": target.name, "stream": True, "stream_options": {"include_usage": True}}
    sent = {**headers, **credentials} if headers else credentials
    request = build_request("POST", url, json=payload, headers=sent, timeouts=timeouts(target.server))
    secrets = secrets_of(request, target.server)
    started = finished = done = False
    async for _event, data in server_events(request, target.server):
        if done:
            continue  # read to the end of the body, so the connection is kept for the next call
        if data.startswith("[DONE]"):
            done = True
            continue
        try:
            chunk = json.loads(data)
        except ValueError:
            raise broken(started, "The model server sent a malformed stream.") from None
        if not isinstance(chunk, dict) or not (started or chunk.get("choices") or chunk.get("usage")):
            continue  # nothing of the reply (Azure's first chunk: its prompt's filter results): not begun yet
        if error := chunk.get("error"):
            message = error.get("message") if isinstance(error, dict) else str(error)
            raise broken(started, message or "The model server reported an error.", cut="upstream_error",
                         secrets=secrets)
        if problem := chunk_problem(chunk):
            raise broken(started, f"The model server sent a malformed reply: {problem}.", cut="upstream_error")
        if any(choice.get("finish_reason") for choice in chunk.get("choices") or ()):
            finished = True
        started = True
        yield chunk
    if not (done or finished):
        raise broken(started, "The model server ended the reply early.")


async def forward(target: Target, path: str, *, json: Any = None, data: dict[str, str] | None = None,
                  files: dict[str, Any] | None = None, at: Endpoint = endpoint) -> Response:
    """A plain request to the server (audio, embeddings): the whole response (`content`, `text`,
    `headers` with lower-case names), or UpstreamError. `data` and `files` make a multipart form."""
    url, headers = await at(target, path)
    if data is not None or files is not None:  # httpx only writes the multipart body here
        form = httpx.Request("POST", url, data=data, files=files)
        request = build_request("POST", url, content=form.read(), timeouts=timeouts(target.server),
                                headers={**headers, "Content-Type": form.headers["Content-Type"]})
    else:
        request = build_request("POST", url, json=json, headers=headers, timeouts=timeouts(target.server))
    response = await send(request, stream=False)
    if response.status_code != 200:
        raise answered_failure(response, response.content, request, target.server)
    return response


async def fetch(target: Target, path: str, *, at: Endpoint = endpoint) -> Response:
    """A GET of the server (a batch's state, a file's content): the whole response, or UpstreamError."""
    url, headers = await at(target, path)
    request = build_request("GET", url, headers=headers, timeouts=timeouts(target.server))
    response = await send(request, stream=False)
    if response.status_code != 200:
        raise answered_failure(response, response.content, request, target.server)
    return response


async def embeddings(target: Target, texts: list[str], *, at: Endpoint = endpoint) -> Any:
    """The server's embeddings reply (parsed JSON; None when it is not JSON)."""
    response = await forward(target, "/embeddings", json={"model": target.name, "input": texts}, at=at)
    try:
        return json.loads(response.content)
    except ValueError:
        return None
