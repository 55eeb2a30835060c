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
from gateway.formats.anthropic.from_chat import output_tool_name
from gateway.formats.converse.from_chat import chat_to_converse_request
from gateway.formats.converse.streams import ConverseToChatStream
from gateway.registry.snapshot import Target
from gateway.upstream.providers.base import broken, uncarried
from gateway.upstream.providers.bedrock.claude import invoke_url
from gateway.upstream.providers.bedrock.transport import frame_failure, frames, secrets, signed_request
from gateway.upstream.replies import chunk_problem


async def converse_stream(target: Target, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    """The chat chunks of a non-Claude model's reply. Raises UpstreamError before the first chunk,
    StreamCut after."""
    structured = target.server.structured_output
    lost: list[str] = []
    payload = chat_to_converse_request(body, lost=lost, model_id=target.name, structured_output=structured)
    if refusal := uncarried(target.server, lost):
        raise refusal
    translator = ConverseToChatStream(completion_id=f"chatcmpl-{uuid.uuid4().hex}", model=target.name,
                                      created=int(time.time()), include_usage=True,
                                      output_tool=output_tool_name(body, structured))
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
        except ValueError:  # an event that is not what ConverseStream sends
            raise broken(started, "The model server sent a malformed stream.") from None
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
