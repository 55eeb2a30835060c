"""POST /v1/responses (text in, text out; function tools when the installation turns
RESPONSES_TOOLS on, otherwise tools answer 501) and POST /v1/responses/input_tokens. The
request's other fields are carried or refused by name (gateway/formats/responses/fields.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from django.conf import settings

from accounts.endpoints import endpoint
from compat.proxy import Call, chat_call
from gateway.calls.plan import check_chat_size
from gateway.calls.tokens import count_chat_request
from gateway.formats.responses.stream import ChatToResponsesStream
from gateway.formats.responses.translate import chat_to_response, cut_error, responses_to_chat_request
from gateway.limits import ratelimit
from gateway.registry.routing import plan_chain
from gateway.upstream.sse import sse_event
from gateway.web.body import read_json_object
from gateway.web.output import respond


def to_chat(body: dict) -> dict:
    """The request in the chat form, tools carried only when the installation allows them."""
    return responses_to_chat_request(body, tools=settings.RESPONSES_TOOLS)


@endpoint("POST", limit=ratelimit.V1, prepare=chat_call(to_chat), prepare_in_loop=True, idempotent=True)
async def responses(request):
    body = request.prepared.body
    stream = bool(body.get("stream"))
    call = Call(request, surface="responses")
    await call.open()
    response_id = f"resp_{call.inference_id}"
    if stream:
        return call.stream_response(_frames(call, response_id, body))
    return await call.whole_reply(response_id, lambda c: chat_to_response(
        c, request=body, response_id=response_id, cut=(call.cut.message, call.cut.reason) if call.cut else None))


async def _frames(call: Call, response_id: str, body: dict) -> AsyncIterator[bytes]:
    translator = ChatToResponsesStream(response_id=response_id, model=call.model, request=body,
                                       created_at=call.created)
    for event in translator.start():
        yield sse_event(event["type"], event)
    async for chunk in call.chunks():
        for event in translator.feed(chunk):
            yield sse_event(event["type"], event)
    if call.cut:
        events = translator.fail(**cut_error(call.cut.message, call.cut.reason))
    else:
        events = translator.finish()
    for event in events:
        yield sse_event(event["type"], event)


@endpoint("POST", limit=ratelimit.V1)
def input_tokens(request):
    body = read_json_object(request)
    chat = to_chat(body)
    check_chat_size(chat)
    plan_chain(chat.get("model"), group=request.principal.account.group)
    return respond({"object": "response.input_tokens", "input_tokens": count_chat_request(chat)})
