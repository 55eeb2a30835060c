"""Google's Gemini API (`generateContent` and the rest), beyond the spec, so that Google's SDKs and
Gemini CLI work through the gateway: `/v1beta/models/{model}:{method}` and the same methods under
`/v1/models/{model}:{method}` (the API version recent google-genai releases use by default; `GET
/v1/models` stays OpenAI's list). `{model}` is the gateway's model id (`server/model`, an alias, a
bare name), with or without Google's `models/` prefix; a `/` in it comes as is or encoded (%2F).

A generateContent request goes to a server that speaks Gemini's format (kind `gemini`, or a Gemini
model on Vertex AI) as it came, its own chunks back (`providers.Native`, kind "gemini"); to any
other kind it is translated to the chat form (gateway/formats/gemini/), what cannot be carried
refused by name. The /v1 ceiling, quotas, budgets, allowed models, pools, the reply cache, the calls
log (surface "gemini") and the traces are the other /v1 surfaces' (compat/proxy.py). Errors are
Google's `{error: {code, message, status}}` (gateway/web/errors.py), except that on /v1 a 401 and the
framework's errors (a ceiling's 429) keep every /v1 path's shape (spec 7.1, 8.3)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from accounts.endpoints import endpoint
from compat import gemini_models
from compat.proxy import Call, WireFormat, chat_call
from gateway.calls.plan import check_chat_size
from gateway.calls.tokens import count_chat_request
from gateway.formats.gemini.replies import ChatToGeminiStream, chat_to_gemini_response
from gateway.formats.gemini.to_chat import bad_request, gemini_to_chat_request, get
from gateway.limits import ratelimit
from gateway.registry.routing import plan_chain
from gateway.web.body import read_json_object
from gateway.web.errors import GOOGLE_STATUS
from gateway.web.output import respond
from gateway.web.validation import check_tags

SURFACE = "gemini"
# A reply cut midway, in its in-stream error; otherwise 502. Stopped by the group's guardrails: 400.
CUT_STATUS = {"read_timeout": 504, "content_policy_violation": 400}

# To a server that speaks Gemini's format the request goes as it came (its model is the URL's);
# to the other kinds, in the chat form.
GEMINI_WIRE = WireFormat(kind="gemini", headers=(), lossy=True)
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def labels(body: dict[str, Any]) -> dict[str, str]:
    """The call's tags: Vertex AI's `labels` (a map of strings), kept with the call."""
    return check_tags(body.get("labels"), name="labels")


_PREPARE = chat_call(gemini_to_chat_request, GEMINI_WIRE, labels, path_model=gemini_models.path_model)


@endpoint("POST", limit=ratelimit.V1, prepare=_PREPARE, prepare_in_loop=True)
async def generate_content(request, model: str):
    call = Call(request, surface=SURFACE)
    await call.open()
    return await call.whole_reply(_response_id(call), chat_to_gemini_response)


@endpoint("POST", limit=ratelimit.V1, prepare=_PREPARE, prepare_in_loop=True)
async def stream_generate_content(request, model: str):
    """`alt=sse`: Server-Sent Events, one GenerateContentResponse per `data:`; without it, as
    Google answers then, one JSON array whose elements come as they are made."""
    call = Call(request, surface=SURFACE)
    await call.open()
    sse = request.GET.get("alt") == "sse"
    response = call.stream_response(_framed(_chunks(call, _response_id(call)), sse))
    if not sse:
        response["Content-Type"] = "application/json"
    return response


def _response_id(call: Call) -> str:
    return call.inference_id[:24]


async def _framed(chunks: AsyncIterator[dict[str, Any]], sse: bool) -> AsyncIterator[bytes]:
    if sse:
        async for chunk in chunks:
            yield b"data: " + _dumps(chunk).encode() + b"\r\n\r\n"
        return
    separator = b"["
    async for chunk in chunks:
        yield separator + _dumps(chunk).encode()
        separator = b"\r\n,"
    yield b"[]" if separator == b"[" else b"]"


async def _chunks(call: Call, response_id: str) -> AsyncIterator[dict[str, Any]]:
    if call.native:  # a Gemini server's own chunks: only the response's id and model are the gateway's
        async for chunk in call.chunks():
            yield {**chunk, "modelVersion": call.model, "responseId": response_id}
    else:
        translator = ChatToGeminiStream(call.model, response_id)
        async for chunk in call.chunks():
            for out in translator.feed(chunk):
                yield out
        if not call.cut:
            for out in translator.finish(call.reply_usage()):
                yield out
    if call.cut:  # Google's error object in the stream, which its SDKs raise
        status = CUT_STATUS.get(call.cut.reason, 502)
        yield {"error": {"code": status, "message": call.cut.message, "status": GOOGLE_STATUS[status]}}


@endpoint("POST", limit=ratelimit.V1)
def count_tokens(request, model: str):
    """`{totalTokens}` of a generateContent request: its `contents` (and the rest of it), or a
    whole `generateContentRequest`."""
    body = read_json_object(request)
    inner = get(body, "generateContentRequest")
    if inner is not None:
        if not isinstance(inner, dict):
            raise bad_request("generateContentRequest: must be an object.")
        body = inner
    chat = gemini_to_chat_request(body, gemini_models.path_model(request), lost=[])
    check_chat_size(chat)
    plan_chain(chat["model"], group=request.principal.account.group)
    return respond({"totalTokens": count_chat_request(chat)})

