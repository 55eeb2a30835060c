"""/v1/audio/transcriptions, /v1/audio/translations and /v1/audio/speech, passed to a model
with the audio capability (its fallbacks and the default tried in turn, as for chat)."""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.http.multipartparser import MultiPartParserError

from accounts.endpoints import endpoint
from gateway.calls.chain import try_chain
from gateway.calls.metering import AfterSendResponse, meter
from gateway.calls.plan import call_plan
from gateway.calls.screened import screened_texts, screening_for
from gateway.calls.tokens import count_text
from gateway.limits import ratelimit
from gateway.registry.snapshot import Target
from gateway.telemetry import call_facts
from gateway.upstream import providers
from gateway.web.body import read_json_object
from gateway.web.errors import ApiError

_plan = sync_to_async(call_plan)
PASSED_THROUGH = ("content-type",)
AUDIO = "audio"  # the attempts' operation (gen_ai.operation.name)


@endpoint("POST", limit=ratelimit.V1, idempotent=True)
async def transcriptions(request):
    return await _upload(request, "/audio/transcriptions", surface="audio.transcriptions")


@endpoint("POST", limit=ratelimit.V1, idempotent=True)
async def translations(request):
    return await _upload(request, "/audio/translations", surface="audio.translations")


@endpoint("POST", limit=ratelimit.V1, idempotent=True)
async def speech(request):
    body = read_json_object(request)
    text = body.get("input")
    if not isinstance(text, str) or not text:
        raise ApiError(400, "'input' must be a non-empty string.", code="invalid_request_error", param="input")
    if (screening := screening_for(request.principal.account.group, request.request_id)) is not None:
        [text] = await screened_texts(screening, [text])  # the text to speak passes the group's input checks
        body = {**body, "input": text}
    target, response = await _forward(request, body.get("model"), "/audio/speech",
                                      lambda t: {"json": {**body, "model": t.name}})
    return _reply(request, target, response, "audio.speech", input_tokens=count_text(text), output_tokens=0)


async def _upload(request: HttpRequest, path: str, *, surface: str) -> HttpResponse:
    limit = settings.MAX_AUDIO_UPLOAD_BYTES
    if int(request.META.get("CONTENT_LENGTH") or 0) > limit:
        raise ApiError(413, f"The upload is larger than {limit} bytes.", code="request_too_large")
    if not (request.content_type or "").startswith("multipart/form-data"):
        raise ApiError(400, "Send the audio as multipart/form-data.", code="invalid_request_error")
    try:
        fields, files = request.POST, request.FILES
    except MultiPartParserError:
        raise ApiError(400, "The multipart body is malformed.", code="invalid_request_error") from None
    upload = files.get("file")
    if upload is None:
        raise ApiError(400, "'file' is required.", code="invalid_request_error", param="file")
    if upload.size > limit:
        raise ApiError(413, f"The upload is larger than {limit} bytes.", code="request_too_large")
    content = upload.read()
    form = {k: v for k, v in fields.items() if k != "model"}

    def payload(target: Target) -> dict[str, Any]:
        return {"data": {**form, "model": target.name},
                "files": {"file": (upload.name, content, upload.content_type or "application/octet-stream")}}

    target, response = await _forward(request, fields.get("model"), path, payload)
    text = _text_of(response)
    call_facts.reply_text(text)  # kept by the calls log only for a group that keeps its calls' text
    return _reply(request, target, response, surface, input_tokens=0, output_tokens=count_text(text))


async def _forward(request, model_id, path, payload) -> tuple[Target, Any]:
    chain = await _plan(account=request.principal.account, model_id=model_id, capability="audio",
                        quota_used=request.quota_used)

    async def ask(target: Target):
        return await providers.forward(target, path, **payload(target))

    answered = await try_chain(chain, AUDIO, ask, refusals_fall_through=True)
    answered.land()
    return answered.target, answered.result


def _text_of(response) -> str:
    if response.headers.get("content-type", "").startswith("application/json"):
        try:
            return str(json.loads(response.content).get("text", ""))
        except (ValueError, AttributeError):
            return ""
    return response.text


def _reply(request, target: Target, upstream, surface: str, *, input_tokens: int, output_tokens: int):
    account_id = request.principal.account.pk

    def record() -> None:
        meter(account_id=account_id, model=target.public_id, surface=surface, input_tokens=input_tokens,
              output_tokens=output_tokens, request_id=request.request_id, price=target.price)

    response = AfterSendResponse(upstream.content, after_send=record,
                                 content_type=upstream.headers.get("content-type", "application/octet-stream"))
    return response
