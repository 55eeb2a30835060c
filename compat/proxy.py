"""One proxied chat call on a /v1 surface: the model call itself (gateway/calls/model_call.py: the
chain or, when the account group caches replies, a kept reply; the chunks gathered; the usage metered
once) and its HTTP answers, metered after the reply has gone out.

Each surface (chat completions, messages, responses) translates the request to the chat form,
then either streams its own frames from `Call.chunks()` or answers with `Call.whole_reply()`; a
cached reply goes the same way, so it comes in the surface's own events, whole or streamed."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse

from gateway.cache.reply_cache import ReplyCache, reply_cache
from gateway.calls.cuts import cut_error
from gateway.calls.metering import AfterSendResponse
from gateway.calls.model_call import ModelCall
from gateway.calls.plan import affinity_of, call_plan, check_chat_size
from gateway.calls.screened import screening_for
from gateway.registry.snapshot import Target
from gateway.telemetry import call_facts
from gateway.upstream.providers import Native
from gateway.web.body import read_json_object
from gateway.web.errors import ApiError, render_error
from gateway.web.output import respond


@dataclass(frozen=True)
class Prepared:
    body: dict[str, Any]  # the request as the client sent it
    chat: dict[str, Any]  # its chat-completions form, sent to the chain
    chain: list[Target]
    native: Native | None = None  # the request in its own wire format, for a server that speaks it


@dataclass(frozen=True)
class WireFormat:
    """A surface that speaks a model server's wire format: such a server gets the request as it came."""

    kind: str  # the server kind: "openai" or "anthropic"
    headers: tuple[str, ...]  # the client's headers sent on with it (beta features, API version)
    lossy: bool = False  # its `to_chat` names what the chat form cannot carry (`lost=`), for the other kind
    with_query: bool = False  # the query string too (Anthropic's ?beta=true)


def metadata_tags(body: dict[str, Any]) -> dict[str, str]:
    """A call's tags: OpenAI's `metadata`, checked by the surface's `to_chat` (gateway/web/validation.py)."""
    return body.get("metadata") or {}


def chat_call(to_chat: Callable[..., dict[str, Any]],
              wire: WireFormat | None = None,
              tags: Callable[[dict[str, Any]], dict[str, str]] = metadata_tags,
              path_model: Callable[[HttpRequest], str] | None = None) -> Callable[[HttpRequest], Prepared]:
    """The `prepare` step of a chat surface (run by the endpoint wrapper in its worker hop):
    read the body, translate it, note its `tags` (kept with the call: the calls log, the usage
    records), check its size, plan the chain and check the quota. `path_model`: the model the
    request's path names (Google's API), given to `to_chat` beside the body."""

    def prepare(request: HttpRequest) -> Prepared:
        body = read_json_object(request)
        lost: list[str] = []
        args = (body, path_model(request)) if path_model is not None else (body,)
        chat = to_chat(*args, lost=lost) if wire is not None and wire.lossy else to_chat(*args)
        call_facts.tagged(tags(body))
        check_chat_size(chat)
        chain = call_plan(account=request.principal.account, model_id=chat.get("model"),
                          quota_used=request.quota_used, affinity=affinity_of(request, body))
        native = None
        if wire is not None:
            headers = {name: value for name in wire.headers if (value := request.headers.get(name)) is not None}
            native = Native(kind=wire.kind, body=body, headers=headers,
                            query=request.META.get("QUERY_STRING", "") if wire.with_query else "",
                            uncarried=tuple(lost))
        return Prepared(body=body, chat=chat, chain=chain, native=native)

    return prepare


class Call(ModelCall):
    """A /v1 surface's model call (gateway/calls/model_call.py) with its HTTP answers: the whole reply,
    the error of a reply cut midway, or the stream; each metered once after it has gone out."""

    def __init__(self, request: HttpRequest, *, surface: str) -> None:
        prepared: Prepared = request.prepared
        super().__init__(prepared.chain, prepared.chat, account_id=request.principal.account.pk, surface=surface,
                         request_id=request.request_id, cache=_cache_of(request, prepared, surface),
                         native=prepared.native, screening=screening_for(request.principal.account.group,
                                                                         request.request_id))
        self.request = request
        self.inference_id = uuid.uuid4().hex
        self.created = int(time.time())

    async def open(self) -> None:
        """A failure before the first byte is an HTTP error, with the cache's headers when it was asked."""
        try:
            await super().open()
        except ApiError as exc:
            if self.cache is not None:
                exc.headers = {**exc.headers, **self.cache.headers()}
            raise

    async def whole_reply(self, reply_id: str, shape: Callable[[dict[str, Any]], dict[str, Any]] | None = None):
        """Gather the reply into one chat.completion, put it in the surface's `shape`, and answer
        with it, or with the error of a reply that stopped midway carrying it as `partial`. A
        reply in the client's own format (`native`) is answered as the server gave it."""
        async for _ in self.chunks():
            pass
        if self.native:  # a server that gave no usage: the counted one, in the format's shape
            result = self.reply.message(message_id=reply_id, model=self.model, usage=self.usage())
        else:
            completion = self.reply.completion(completion_id=reply_id, model=self.model, created=self.created,
                                               usage=self.reply_usage())
            result = shape(completion) if shape else completion
        return self.cut_response(result) if self.cut else self.json_response(result)

    def reply_usage(self) -> dict[str, Any]:
        """The usage a whole reply gives: the counts metered, with the details the server's usage had
        beside them (`prompt_tokens_details.cached_tokens`, `completion_tokens_details`...)."""
        server = self.reply.usage if isinstance(self.reply.usage, dict) and self.entry is None else {}
        return {**server, **self.usage()}

    def headers(self) -> dict[str, str]:
        headers = {"X-Inference-Request-Id": self.inference_id}
        if self.cache is not None:
            headers.update(self.cache.headers())
        return headers

    def json_response(self, payload: dict[str, Any], status: int = 200) -> HttpResponse:
        """A whole reply; usage is metered once the body has been sent."""
        return self._metered(respond(payload, status=status))

    def cut_response(self, partial: dict[str, Any]) -> HttpResponse:
        """A reply that stopped midway: 504 (`read_timeout`) or 502, with what had arrived in
        `partial` (spec 6.2, 7.2). What arrived is metered."""
        error = cut_error(self.cut, partial)
        return self._metered(render_error(self.request, error))

    def _metered(self, rendered: HttpResponse) -> HttpResponse:
        response = AfterSendResponse(rendered.content, status=rendered.status_code,
                                     content_type=rendered["Content-Type"], after_send=self.meter,
                                     after_send_async=self.meter_async)
        for name, value in self.headers().items():
            response[name] = value
        return response

    def stream_response(self, frames: AsyncIterator[bytes]) -> StreamingHttpResponse:
        response = StreamingHttpResponse(self._metered_frames(frames), content_type="text/event-stream")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
        for name, value in self.headers().items():
            response[name] = value
        return response

    async def _metered_frames(self, frames: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        try:
            async for frame in frames:
                yield frame
        finally:
            await asyncio.shield(self.meter_async())


def _cache_of(request: HttpRequest, prepared: Prepared, surface: str) -> ReplyCache | None:
    """The call's response cache (None when its group keeps no replies), keyed on the request as the
    client sent it and, for a request passed through untranslated, the headers and query string sent
    on with it. A group that keeps no replies costs the call one attribute read."""
    if request.principal.account.group.response_cache_ttl <= 0:
        return None
    native = prepared.native
    extra = {"headers": native.headers, "query": native.query} if native is not None else None
    requested_model = prepared.body.get("model", prepared.chat.get("model"))  # Google's API: the path names it
    return reply_cache(group=request.principal.account.group, surface=surface,
                       requested_model=requested_model, chain=prepared.chain, body=prepared.body,
                       cache_control_header=request.headers.get("Cache-Control"), extra=extra)
