"""One proxied chat call on a /v1 surface: open the chain (or, when the account group caches
replies, replay a kept one: gateway/cache/), pass the chunks on while gathering them, and meter the
usage after the reply has gone out.

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

from gateway.cache.entry import ANTHROPIC, CHAT, Entry, Recorder, replay
from gateway.cache.reply_cache import ReplyCache, reply_cache
from gateway.calls.cuts import cut_error
from gateway.calls.dispatch import open_reply
from gateway.calls.metering import AfterSendResponse, cached_input_of, meter, meter_async, usage_of
from gateway.calls.plan import affinity_of, call_plan, check_chat_size
from gateway.formats.anthropic.events import MessageAccumulator
from gateway.registry.snapshot import Target
from gateway.telemetry import call_facts
from gateway.upstream.providers import Native
from gateway.upstream.providers.base import StreamCut
from gateway.upstream.replies import ReplyAccumulator
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


def chat_call(to_chat: Callable[[dict[str, Any]], dict[str, Any]],
              wire: WireFormat | None = None,
              tags: Callable[[dict[str, Any]], dict[str, str]] = metadata_tags) -> Callable[[HttpRequest], Prepared]:
    """The `prepare` step of a chat surface (run by the endpoint wrapper in its worker hop):
    read the body, translate it, note its `tags` (kept with the call: the calls log, the usage
    records), check its size, plan the chain and check the quota."""

    def prepare(request: HttpRequest) -> Prepared:
        body = read_json_object(request)
        lost: list[str] = []
        chat = to_chat(body, lost=lost) if wire is not None and wire.lossy else to_chat(body)
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


class Call:
    def __init__(self, request: HttpRequest, *, surface: str) -> None:
        prepared: Prepared = request.prepared
        self.request = request
        self.body = prepared.chat
        self.chain = prepared.chain
        self.native_request = prepared.native
        self.native = False  # the reply comes in the client's own format, untranslated
        self.surface = surface
        self.inference_id = uuid.uuid4().hex
        self.created = int(time.time())
        self.reply: ReplyAccumulator | MessageAccumulator = ReplyAccumulator()
        self.cut: StreamCut | None = None
        self.target: Target | None = None
        self.cache: ReplyCache | None = _cache_of(request, prepared, surface)
        self.entry: Entry | None = None  # the kept reply that answers, on a cache hit
        self.recorder: Recorder | None = None  # the reply being recorded for the cache
        self._chunks: AsyncIterator[dict[str, Any]] | None = None
        self._ended = False
        self._usage: dict[str, int] | None = None
        self._meter_done = False

    @property
    def model(self) -> str:
        if self.target:
            return self.target.public_id
        return self.entry.model if self.entry else str(self.body.get("model"))

    async def open(self) -> None:
        """A kept reply, or the first chunk of the chain: every failure so far is an HTTP error."""
        if self.cache is not None and (entry := await self.cache.lookup()) is not None:
            self.entry, self._chunks, self.native = entry, replay(entry), entry.kind == ANTHROPIC
            self._usage = entry.usage  # as metered when it was made
            call_facts.replayed()
        else:
            try:
                opened = await open_reply(self.chain, self.body, refusals_fall_through=True,
                                          native=self.native_request)
            except ApiError as exc:
                if self.cache is not None:
                    exc.headers = {**exc.headers, **self.cache.headers()}
                raise
            self.target, self._chunks, self.native = opened.target, opened.chunks, opened.native
            if self.cache is not None:
                self.recorder = self.cache.record(ANTHROPIC if self.native else CHAT)
        if self.native:
            self.reply = MessageAccumulator()

    async def chunks(self) -> AsyncIterator[dict[str, Any]]:
        """The reply's chunks; a stop midway ends the iteration and is kept in `self.cut`. A reply
        that ended whole is kept for the cache before the surface's last frames go out, so a client
        that has the whole reply finds it there."""
        whole = False
        try:
            async for chunk in self._chunks:
                self.reply.feed(chunk)
                if self.recorder is not None:
                    self.recorder.add(chunk)
                yield chunk
            whole = True
        except StreamCut as cut:
            self.cut = cut
            call_facts.failed_in_stream(cut.reason, call_facts.CUT)
        finally:
            self._ended = True
            if not whole and self.cut is None:  # the client went away mid-reply
                call_facts.failed_in_stream(None, call_facts.CLIENT_CLOSED)
        if whole and self.recorder is not None:
            await self.cache.keep(self.recorder, model=self.model, usage=self.usage())

    async def whole_reply(self, reply_id: str, shape: Callable[[dict[str, Any]], dict[str, Any]] | None = None):
        """Gather the reply into one chat.completion, put it in the surface's `shape`, and answer
        with it, or with the error of a reply that stopped midway carrying it as `partial`. A
        reply in the client's own format (`native`) is answered as the server gave it."""
        async for _ in self.chunks():
            pass
        if self.native:
            result = self.reply.message(message_id=reply_id, model=self.model)
            if "usage" not in result:  # a server that gave none: the counted usage
                usage = self.usage()
                result["usage"] = {"input_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"]}
        else:
            completion = self.reply.completion(completion_id=reply_id, model=self.model, created=self.created,
                                               usage=self.reply_usage())
            result = shape(completion) if shape else completion
        return self.cut_response(result) if self.cut else self.json_response(result)

    def usage(self) -> dict[str, int]:
        """The call's usage; counted once, when the reply has ended (the tokenizer may run)."""
        if self._usage is not None:
            return self._usage
        usage = usage_of(self.reply, self.body)
        if self._ended:
            self._usage = usage
        return usage

    def reply_usage(self) -> dict[str, Any]:
        """The usage a whole reply gives: the counts metered, with the details the server's usage had
        beside them (`prompt_tokens_details.cached_tokens`, `completion_tokens_details`...)."""
        server = self.reply.usage if isinstance(self.reply.usage, dict) and self.entry is None else {}
        return {**server, **self.usage()}

    def meter_now(self) -> None:
        if (fields := self._meter_fields()) is not None:
            meter(**fields)

    async def meter_now_async(self) -> None:
        if (fields := self._meter_fields()) is not None:
            await meter_async(**fields)

    def _meter_fields(self) -> dict[str, Any] | None:
        """What to meter, the first time only."""
        if self._meter_done or (self.target is None and self.entry is None):
            return None
        self._meter_done = True
        call_facts.reply_text(self.reply.delivered_output_text)  # read only when the group keeps its calls' text
        usage = self.usage()
        return {"account_id": self.request.principal.account.pk, "model": self.model,
                "surface": self.surface, "input_tokens": usage["prompt_tokens"],
                "output_tokens": usage["completion_tokens"], "request_id": self.request.request_id,
                "cached": self.entry is not None, "price": self.target.price if self.target else None,
                "cached_input_tokens": cached_input_of(self.reply)}

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
                                     content_type=rendered["Content-Type"], after_send=self.meter_now,
                                     after_send_async=self.meter_now_async)
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
            await asyncio.shield(self.meter_now_async())


def _cache_of(request: HttpRequest, prepared: Prepared, surface: str) -> ReplyCache | None:
    """The call's response cache (None when its group keeps no replies), keyed on the request as the
    client sent it and, for a request passed through untranslated, the headers and query string sent
    on with it. A group that keeps no replies costs the call one attribute read."""
    if request.principal.account.group.response_cache_ttl <= 0:
        return None
    native = prepared.native
    extra = {"headers": native.headers, "query": native.query} if native is not None else None
    return reply_cache(group=request.principal.account.group, surface=surface,
                       requested_model=prepared.body.get("model"), chain=prepared.chain, body=prepared.body,
                       cache_control_header=request.headers.get("Cache-Control"), extra=extra)
