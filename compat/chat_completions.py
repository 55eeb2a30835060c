"""POST /v1/chat/completions, streamed and not. The chat form is this surface's own, so the
request goes to the chain as it came (model and stream settings aside)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from accounts.endpoints import endpoint
from compat.proxy import Call, chat_call
from gateway import ratelimit
from gateway.errors import ApiError
from gateway.sse import SSE_DONE, sse_data

DROPPED = ("stream", "stream_options", "n")


def chat_form(body: dict[str, Any]) -> dict[str, Any]:
    _flag(body, "stream")
    if body.get("n", 1) not in (1, None):
        raise ApiError(400, "Only n=1 is supported.", code="invalid_request_error", param="n")
    return {k: v for k, v in body.items() if k not in DROPPED}


@endpoint("POST", limit=ratelimit.V1, prepare=chat_call(chat_form))
async def chat_completions(request):
    body = request.prepared.body
    stream = bool(body.get("stream"))
    include_usage = stream and bool((body.get("stream_options") or {}).get("include_usage"))
    call = Call(request, surface="chat.completions")
    await call.open()
    completion_id = f"chatcmpl-{call.inference_id}"
    if stream:
        return call.stream_response(_frames(call, completion_id, include_usage))
    return await call.whole_reply(completion_id)


async def _frames(call: Call, completion_id: str, include_usage: bool) -> AsyncIterator[bytes]:
    model = call.model
    async for chunk in call.chunks():
        if not chunk.get("choices"):
            continue  # the server's usage chunk: ours is sent at the end
        chunk["id"], chunk["model"], chunk["created"] = completion_id, model, call.created
        chunk.pop("usage", None)
        if include_usage:
            chunk["usage"] = None
        yield sse_data(chunk)
    if call.cut:
        yield sse_data({"error": {"message": call.cut.message, "type": "server_error", "param": None,
                                  "code": call.cut.reason}})
    elif include_usage:
        yield sse_data({"id": completion_id, "object": "chat.completion.chunk", "created": call.created,
                        "model": model, "choices": [], "usage": call.usage()})
    yield SSE_DONE


def _flag(body: dict[str, Any], name: str) -> bool:
    value = body.get(name, False)
    if not isinstance(value, bool) and value is not None:
        raise ApiError(400, f"'{name}' must be a boolean.", code="invalid_request_error", param=name)
    return bool(value)
