"""Every model on Bedrock that is not Claude (Amazon Nova and Titan, Meta Llama, Mistral, Cohere, ...)
through Bedrock's own chat API, ConverseStream (`POST /model/{model id}/converse-stream`): the chat form
becomes a Converse request and Converse's events become chat chunks by gateway/formats/converse/
(`chat_to_converse_request`, `ConverseToChatStream`); this module is only the transport around them.

Converse's events come as event-stream frames whose `:event-type` names them (messageStart,
contentBlockDelta, ..., metadata) and whose payload is the event's JSON, as botocore parses them."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from gateway.formats import StreamError
from gateway.registry.snapshot import Target
from gateway.upstream.providers.base import REFUSED, UpstreamError, broken, uncarried
from gateway.upstream.providers.bedrock.claude import invoke_url
from gateway.upstream.providers.bedrock.transport import frame_failure, frames, secrets, signed_request
from gateway.upstream.replies import chunk_problem

try:  # the Converse translation is its own part of gateway/formats/
    from gateway.formats.converse import ConverseToChatStream, chat_to_converse_request
except ImportError:  # until it is there, such a model is refused by name
    ConverseToChatStream = chat_to_converse_request = None


async def converse_stream(target: Target, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    """The chat chunks of a non-Claude model's reply. Raises UpstreamError before the first chunk,
    StreamCut after."""
    if chat_to_converse_request is None or ConverseToChatStream is None:
        raise UpstreamError(REFUSED, 400, f"The model '{target.name}' on server '{target.server.name}' is not a "
                                          "Claude model: Bedrock's Converse models are not served yet.")
    lost: list[str] = []
    payload = chat_to_converse_request(body, lost=lost)
    if refusal := uncarried(target.server, lost):
        raise refusal
    translator = ConverseToChatStream(completion_id=f"chatcmpl-{uuid.uuid4().hex}", model=target.name,
                                      created=int(time.time()), include_usage=True)
    content = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
    request = await signed_request(target.server, "POST", invoke_url(target, "converse-stream"), content)
    secret_values = secrets(request, target.server)
    started = False
    async for frame in frames(request, target.server):
        if translator.finished:
            continue  # read to the end of the body, so the connection is kept for the next call
        if frame.message_type != "event":
            raise frame_failure(frame, started, secret_values)
        try:
            event = json.loads(frame.payload) if frame.payload else {}
        except ValueError:
            raise broken(started, "The model server sent a malformed stream.") from None
        if not isinstance(event, dict):
            raise broken(started, "The model server sent a malformed stream.")
        try:
            chunks = translator.feed(frame.event_type, event)
        except StreamError as exc:
            raise broken(started, exc.message or "The model server reported an error.", cut="upstream_error",
                         secrets=secret_values) from None
        for chunk in chunks:
            if problem := chunk_problem(chunk):
                raise broken(started, f"The model server sent a malformed reply: {problem}.", cut="upstream_error")
            started = True
            yield chunk
    if not translator.finished:
        raise broken(started, "The model server ended the reply early.")
