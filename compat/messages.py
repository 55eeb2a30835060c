"""POST /v1/messages (the Anthropic Messages API), streamed and not, answered by any server kind.
A 401 on this path still uses the chat-completions error shape (spec 7.1.1); every other error
uses the Anthropic shape."""

from __future__ import annotations

from collections.abc import AsyncIterator

from accounts.endpoints import endpoint
from compat.proxy import Call, WireFormat, chat_call
from gateway.calls.plan import check_chat_size
from gateway.calls.tokens import count_chat_request
from gateway.formats.anthropic.replies import chat_to_messages_response
from gateway.formats.anthropic.streams import ChatToMessagesStream
from gateway.formats.anthropic.to_chat import messages_to_chat_request
from gateway.limits import ratelimit
from gateway.registry.routing import plan_chain
from gateway.upstream.sse import sse_event
from gateway.web.body import read_json_object
from gateway.web.output import respond
from gateway.web.validation import MAX_TAG_VALUE

ERROR_TYPES = {"read_timeout": "timeout_error", "upstream_error": "api_error", "disconnected": "api_error",
               "content_policy_violation": "invalid_request_error"}  # stopped by the group's guardrails


# To an Anthropic server the request goes as it came, with these headers and the query string
# (docs/compatibility.md); to an OpenAI-compatible one, in the chat form.
ANTHROPIC_WIRE = WireFormat(kind="anthropic", headers=("anthropic-beta", "anthropic-version"), with_query=True,
                            lossy=True)


def user_tag(body: dict) -> dict[str, str]:
    """The call's tags on this surface: Anthropic's `metadata` holds only `user_id` (typed by
    `messages_to_chat_request`), kept as the tag `user_id`; the request itself goes on unchanged."""
    user = (body.get("metadata") or {}).get("user_id")
    return {"user_id": user[:MAX_TAG_VALUE]} if isinstance(user, str) and user else {}


@endpoint("POST", limit=ratelimit.V1, prepare=chat_call(messages_to_chat_request, ANTHROPIC_WIRE, user_tag),
          prepare_in_loop=True, idempotent=True)
async def messages(request):
    stream = bool(request.prepared.body.get("stream"))
    call = Call(request, surface="messages")
    await call.open()
    message_id = f"msg_{call.inference_id}"
    if stream:
        return call.stream_response(_frames(call, message_id))
    return await call.whole_reply(message_id, chat_to_messages_response)


async def _frames(call: Call, message_id: str) -> AsyncIterator[bytes]:
    if call.native:
        async for frame in _native_frames(call, message_id):
            yield frame
        return
    translator = ChatToMessagesStream(message_id=message_id, model=call.model, request_id=call.request.request_id)
    for event in translator.start():
        yield sse_event(event["type"], event)
    async for chunk in call.chunks():
        for event in translator.feed(chunk):
            yield sse_event(event["type"], event)
    if call.cut:
        event = translator.error(ERROR_TYPES.get(call.cut.reason, "api_error"), call.cut.message)
        yield sse_event("error", event)
        return
    translator.feed({"choices": [], "usage": call.usage()})  # the final count, measured when the server gave none
    for event in translator.finish():
        yield sse_event(event["type"], event)


@endpoint("POST", limit=ratelimit.V1)
def count_tokens(request):
    """POST /v1/messages/count_tokens: `{input_tokens}` of a Messages request (no max_tokens)."""
    body = read_json_object(request)
    chat = messages_to_chat_request({**body, "max_tokens": 1})
    check_chat_size(chat)
    plan_chain(chat.get("model"), group=request.principal.account.group)
    return respond({"input_tokens": count_chat_request(chat)})


async def _native_frames(call: Call, message_id: str) -> AsyncIterator[bytes]:
    """An Anthropic server's own events, passed on: only the message's id and model are the gateway's."""
    async for event in call.chunks():
        kind = event["type"]
        if kind == "message_start":
            event = {**event, "message": {**event.get("message", {}), "id": message_id, "model": call.model}}
        yield sse_event(kind, event)
    if call.cut:
        error = {"type": ERROR_TYPES.get(call.cut.reason, "api_error"), "message": call.cut.message}
        yield sse_event("error", {"type": "error", "error": error, "request_id": call.request.request_id})
