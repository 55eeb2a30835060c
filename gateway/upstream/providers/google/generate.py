"""Gemini models (on the Gemini API, and Google's on Vertex AI) through `streamGenerateContent?alt=sse`: each SSE
`data:` is one GenerateContentResponse chunk (candidates with their parts, `usageMetadata`, at the end a
`finishReason`; or `promptFeedback.blockReason` and no candidate for a prompt refused whole).

`gemini_events` yields the server's own chunks (a Gemini-format request passed through as the client sent it);
`chat_stream` sends the chat form translated by gateway/formats/gemini/ (`chat_to_gemini_request`) and reads
the chunks back as chat chunks (`GeminiToChatStream`); this module is only the transport around them.

A stream ends when its last chunk said so (a `finishReason`, or a blocked prompt); a body that ends before
that is cut (`disconnected`), and an `error` sent in place of a chunk ends it as the server's failure: an
UpstreamError before the first chunk was passed on, a StreamCut after."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from gateway.formats import StreamError, gemini
from gateway.registry.snapshot import Target
from gateway.telemetry.redact import redact
from gateway.upstream.providers.base import UNAVAILABLE, UpstreamError, broken, secrets_of, server_events, uncarried
from gateway.upstream.providers.google import transport
from gateway.upstream.replies import chunk_problem

STREAM = "streamGenerateContent"


def finished(chunk: dict[str, Any]) -> bool:
    """Whether `chunk` is a reply's last: a candidate's `finishReason`, or the prompt blocked."""
    feedback = chunk.get("promptFeedback")
    if isinstance(feedback, dict) and feedback.get("blockReason"):
        return True
    candidates = chunk.get("candidates")
    return isinstance(candidates, list) and any(isinstance(c, dict) and c.get("finishReason") for c in candidates)


async def gemini_events(target: Target, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    """The server's GenerateContentResponse chunks for a generateContent `body` (as parsed JSON). Raises
    UpstreamError before the first chunk, StreamCut after."""
    request = await transport.request(target, STREAM, body, query="alt=sse")
    secrets = secrets_of(request, target.server)
    started = done = False
    async for _event, data in server_events(request, target.server, transport.answered_failure):
        if done:
            continue  # read to the end of the body, so the connection is kept for the next call
        try:
            chunk = json.loads(data)
        except ValueError:
            raise broken(started, "The model server sent a malformed stream.") from None
        if not isinstance(chunk, dict):
            raise broken(started, "The model server sent a malformed stream.")
        if (error := transport.stream_error(chunk)) is not None:
            if not started:
                raise _stream_failure(chunk, error, secrets)
            raise broken(started, error, cut="upstream_error", secrets=secrets)
        done = finished(chunk)
        started = True
        yield chunk
    if not done:
        raise broken(started, "The model server ended the reply early.")


def _stream_failure(chunk: dict[str, Any], words: str, secrets: list[str]) -> UpstreamError:
    """An error sent as the stream's first chunk: the server's failure, by its status name."""
    name = chunk["error"].get("status")
    status, kind = transport.STATUSES.get(name, (502, UNAVAILABLE)) if isinstance(name, str) else (502, UNAVAILABLE)
    failure = UpstreamError(kind, status, redact(words, secrets))
    failure.answered = True
    return failure


async def chat_stream(target: Target, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    """The chat chunks of a Gemini model's reply to the chat form, a field Gemini's cannot carry refused by name.
    Raises UpstreamError before the first chunk, StreamCut after."""
    body = {**body, "model": target.name}  # the model's own name says which of its settings apply (thinking)
    lost: list[str] = []
    request = gemini.chat_to_gemini_request(body, lost=lost)
    if refusal := uncarried(target.server, lost):
        raise refusal
    translator = gemini.GeminiToChatStream(completion_id=f"chatcmpl-{uuid.uuid4().hex}", model=target.name,
                                           created=int(time.time()), include_usage=True,
                                           output_tool=gemini.gemini_output_tool(body))
    started = False
    async for chunk in gemini_events(target, request):
        try:
            chunks = translator.feed(chunk)
        except StreamError as exc:  # an error Gemini sent inside the stream
            raise broken(started, exc.message or "The model server reported an error.", cut="upstream_error") from None
        except ValueError:  # a chunk that is not what Gemini sends
            raise broken(started, "The model server sent a malformed stream.") from None
        for out in chunks:
            if problem := chunk_problem(out):
                raise broken(started, f"The model server sent a malformed reply: {problem}.", cut="upstream_error")
            started = True
            yield out
    for out in translator.end():
        started = True
        yield out
