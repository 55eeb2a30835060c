"""POST /api/v1/chat: one turn of a conversation, streamed as Server-Sent Events (the default)
or answered as one JSON object (`stream: false`).

Refusals found before the reply (bad input 422, model or profile not allowed 403, unknown
conversation or collection 404) are plain HTTP errors in `{detail}`; from then on the answer
is a 200 stream that reports a used-up quota or a failure in an `error` event, then `done`
(spec 6.2, 8.4). Without streaming the same failures are HTTP errors carrying `codigo`,
`request_id` and, for a reply cut midway, what arrived in `partial` (spec 7.2).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from django.http import HttpResponse, StreamingHttpResponse

from accounts.endpoints import endpoint
from gateway.calls.cuts import cut_error
from gateway.limits import ratelimit
from gateway.upstream.sse import sse_event
from gateway.web.errors import ApiError
from gateway.web.output import respond
from native.chat_reply import GUARDED, INTERRUPTED, ChatReply
from native.chat_turn import chat_turn_prepare
from native.retrieval import retrieve


@endpoint("POST", limit=ratelimit.CHAT, prepare=chat_turn_prepare, idempotent=True)
async def chat(request):
    turn = request.prepared
    hits = []
    if turn.collections and turn.refusal is None:
        hits = await retrieve(turn.collections, turn.message, account=request.principal.account,
                              request_id=request.request_id)
    reply = ChatReply(request, turn)
    await reply.start(hits)
    if turn.stream:
        response = StreamingHttpResponse(_frames(reply.events()), content_type="text/event-stream")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
    else:
        response = await _whole(reply)
    response["X-Inference-Request-Id"] = reply.request_id
    for name, value in reply.cache_headers().items():
        response[name] = value
    return response


async def _frames(events: AsyncIterator[tuple[str, dict[str, Any]]]) -> AsyncIterator[bytes]:
    async for name, payload in events:
        yield sse_event(name, payload)


async def _whole(reply: ChatReply) -> HttpResponse:
    """The events gathered into one object; a failure is raised as the HTTP error it stands for."""
    text: list[str] = []
    error: dict[str, Any] | None = None
    done: dict[str, Any] = {}
    async for name, payload in reply.events():
        if name == "delta":
            text.append(payload["text"])
        elif name == "error":
            error = payload
        elif name == "done":
            done = payload
    whole = {"request_id": reply.request_id, "conversation_id": reply.conversation_id, "model": reply.model,
             "message_id": done.get("message_id"), "text": "".join(text), "citations": reply.citations,
             "usage": done.get("usage")}
    if error is None:
        return respond(whole)
    found = {"codigo": error["codigo"], "request_id": reply.request_id, "conversation_id": reply.conversation_id}
    headers = {"X-Inference-Request-Id": reply.request_id, **reply.cache_headers()}
    if error["codigo"] == GUARDED:  # the reply stopped by the group's guardrails: a refusal, nothing of it
        raise ApiError(400, error["message"], code=GUARDED, headers=headers, extra=found)
    if error["codigo"] == INTERRUPTED:
        raise ApiError(cut_error(reply.cut).status, error["message"], headers=headers,
                       extra={**found, "partial": whole})
    failure = reply.failure
    if getattr(failure, "retry_after", None):
        found["retry_after"] = failure.retry_after
    raise ApiError(failure.status, failure.message, headers={**failure.headers, **headers}, extra=found)
