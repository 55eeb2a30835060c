"""POST /v1/chat/completions, streamed and not. The chat form is this surface's own, so the
request goes to the chain as it came (model and stream settings aside)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from accounts.endpoints import endpoint
from compat.proxy import Call
from gateway import ratelimit
from gateway.errors import ApiError
from gateway.http import read_json_object
from gateway.sse import SSE_DONE, sse_data

DROPPED = ("stream", "stream_options", "n")


@endpoint("POST", limit=ratelimit.V1)
async def chat_completions(request):
    body = read_json_object(request)
    stream = _flag(body, "stream")
    include_usage = stream and bool((body.get("stream_options") or {}).get("include_usage"))
    if body.get("n", 1) not in (1, None):
        raise ApiError(400, "Only n=1 is supported.", code="invalid_request_error", param="n")
    call = Call(request, {k: v for k, v in body.items() if k not in DROPPED}, surface="chat.completions")
    await call.open()
    completion_id = f"chatcmpl-{call.inference_id}"
    if stream:
        return call.stream_response(_frames(call, completion_id, include_usage))
    reply = await call.collect()
    completion = reply.completion(completion_id=completion_id, model=call.model, created=call.created,
                                  usage=call.usage())
    if call.cut:
        return call.cut_response(completion)
    return call.json_response(completion)


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
