"""POST /v1/chat/completions, streamed and not. The chat form is this surface's own, so the
request goes to the chain as it came (model and stream settings aside)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from accounts.endpoints import endpoint
from compat.proxy import Call, WireFormat, chat_call
from gateway.calls.cuts import GUARDED
from gateway.limits import ratelimit
from gateway.upstream.sse import SSE_DONE, sse_data
from gateway.web.errors import ApiError
from gateway.web.validation import check_field_types, check_items, check_tags

DROPPED = ("stream", "stream_options")

# The types of the request's fields (OpenAI's API reference); a wrong one is a 400 naming it.
FIELDS = {
    "model": "string", "messages": "array", "stream": "boolean", "stream_options": {"include_usage": "boolean"},
    "n": "integer", "max_tokens": "integer", "max_completion_tokens": "integer", "temperature": "number",
    "top_p": "number", "presence_penalty": "number", "frequency_penalty": "number", "seed": "integer",
    "stop": "string|array<string>", "tools": "array<object>", "tool_choice": "string|object",
    "parallel_tool_calls": "boolean", "user": "string", "response_format": "object", "logit_bias": "object",
    "logprobs": "boolean", "top_logprobs": "integer", "metadata": "object", "reasoning_effort": "string",
}
MESSAGE_FIELDS = {"role": "string", "content": "string|array", "name": "string", "tool_call_id": "string",
                  "tool_calls": "array<object>"}
TOOL_FIELDS = {"type": "string", "function": {"name": "string", "description": "string", "parameters": "object"}}


def chat_form(body: dict[str, Any]) -> dict[str, Any]:
    check_field_types(body, FIELDS)
    check_items(body.get("messages"), MESSAGE_FIELDS, name="messages")
    check_items(body.get("tools"), TOOL_FIELDS, name="tools")
    check_tags(body.get("metadata"))  # the call's tags (gateway/web/validation.py), sent on as they came
    if (n := body.get("n")) is not None and n < 1:  # typed above; more than one: the server's to answer
        raise ApiError(400, "'n' must be at least 1.", code="invalid_request_error", param="n")
    return {k: v for k, v in body.items() if k not in DROPPED}


# The chat form is this surface's own: an OpenAI-compatible server gets it with the client's
# OpenAI-Beta header; an Anthropic server gets it translated (docs/compatibility.md).
OPENAI_WIRE = WireFormat(kind="openai", headers=("openai-beta",))


@endpoint("POST", limit=ratelimit.V1, prepare=chat_call(chat_form, OPENAI_WIRE), prepare_in_loop=True,
          idempotent=True)
async def chat_completions(request):
    body = request.prepared.body
    stream = bool(body.get("stream"))
    include_usage = stream and bool((body.get("stream_options") or {}).get("include_usage"))  # typed in chat_form
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
        kind = "invalid_request_error" if call.cut.reason == GUARDED else "server_error"
        yield sse_data({"error": {"message": call.cut.message, "type": kind, "param": None, "code": call.cut.reason}})
    elif include_usage:
        yield sse_data({"id": completion_id, "object": "chat.completion.chunk", "created": call.created,
                        "model": model, "choices": [], "usage": call.reply_usage()})  # as a whole reply's
    yield SSE_DONE

