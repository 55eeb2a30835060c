"""One proxied chat call on a /v1 surface: open the chain, pass the chunks on while gathering
them, and meter the usage after the reply has gone out.

Each surface (chat completions, messages, responses) translates the request to the chat form,
then either streams its own frames from `Call.chunks()` or answers with `Call.collect()`."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse

from gateway.calls import call_plan, check_chat_size
from gateway.dispatch import open_reply
from gateway.errors import ApiError, render_error
from gateway.http import read_json_object
from gateway.metering import AfterSendResponse, meter, meter_async, usage_of
from gateway.output import respond
from gateway.providers.base import StreamCut
from gateway.replies import ReplyAccumulator
from gateway.routing import Target


@dataclass(frozen=True)
class Prepared:
    body: dict[str, Any]  # the request as the client sent it
    chat: dict[str, Any]  # its chat-completions form, sent to the chain
    chain: list[Target]


def chat_call(to_chat: Callable[[dict[str, Any]], dict[str, Any]]) -> Callable[[HttpRequest], Prepared]:
    """The `prepare` step of a chat surface (run by the endpoint wrapper in its worker hop):
    read the body, translate it, check its size, plan the chain and check the quota."""

    def prepare(request: HttpRequest) -> Prepared:
        body = read_json_object(request)
        chat = to_chat(body)
        check_chat_size(chat)
        chain = call_plan(account=request.principal.account, model_id=chat.get("model"),
                          quota_used=request.quota_used)
        return Prepared(body=body, chat=chat, chain=chain)

    return prepare


class Call:
    def __init__(self, request: HttpRequest, *, surface: str) -> None:
        prepared: Prepared = request.prepared
        self.request = request
        self.body = prepared.chat
        self.chain = prepared.chain
        self.surface = surface
        self.inference_id = uuid.uuid4().hex
        self.created = int(time.time())
        self.reply = ReplyAccumulator()
        self.cut: StreamCut | None = None
        self.target: Target | None = None
        self._chunks: AsyncIterator[dict[str, Any]] | None = None
        self._ended = False
        self._usage: dict[str, int] | None = None
        self._meter_done = False

    @property
    def model(self) -> str:
        return self.target.public_id if self.target else str(self.body.get("model"))

    async def open(self) -> None:
        """Wait for the first chunk of the chain: every failure so far is an HTTP error."""
        opened = await open_reply(self.chain, self.body, refusals_fall_through=True)
        self.target, self._chunks = opened.target, opened.chunks

    async def chunks(self) -> AsyncIterator[dict[str, Any]]:
        """The reply's chunks; a stop midway ends the iteration and is kept in `self.cut`."""
        try:
            async for chunk in self._chunks:
                self.reply.feed(chunk)
                yield chunk
        except StreamCut as cut:
            self.cut = cut
        finally:
            self._ended = True

    async def whole_reply(self, reply_id: str, shape: Callable[[dict[str, Any]], dict[str, Any]] | None = None):
        """Gather the reply into one chat.completion, put it in the surface's `shape`, and answer
        with it, or with the error of a reply that stopped midway carrying it as `partial`."""
        async for _ in self.chunks():
            pass
        completion = self.reply.completion(completion_id=reply_id, model=self.model, created=self.created,
                                           usage=self.usage())
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

    def meter_now(self) -> None:
        if (fields := self._meter_fields()) is not None:
            meter(**fields)

    async def meter_now_async(self) -> None:
        if (fields := self._meter_fields()) is not None:
            await meter_async(**fields)

    def _meter_fields(self) -> dict[str, Any] | None:
        """What to meter, the first time only."""
        if self._meter_done or self.target is None:
            return None
        self._meter_done = True
        usage = self.usage()
        return {"account_id": self.request.principal.account.pk, "model": self.target.public_id,
                "surface": self.surface, "input_tokens": usage["prompt_tokens"],
                "output_tokens": usage["completion_tokens"], "request_id": self.request.request_id}

    def headers(self) -> dict[str, str]:
        return {"X-Inference-Request-Id": self.inference_id}

    def json_response(self, payload: dict[str, Any], status: int = 200) -> HttpResponse:
        """A whole reply; usage is metered once the body has been sent."""
        return self._metered(respond(payload, status=status))

    def cut_response(self, partial: dict[str, Any]) -> HttpResponse:
        """A reply that stopped midway: 504 (`read_timeout`) or 502, with what had arrived in
        `partial` (spec 6.2, 7.2). What arrived is metered."""
        reason = self.cut.reason
        if reason == "read_timeout":
            error = ApiError(504, "The model stopped answering mid-reply.", code="read_timeout")
        elif reason == "upstream_error":
            error = ApiError(502, f"The model server failed mid-reply: {self.cut.message}", code="upstream_error")
        else:
            error = ApiError(502, "The model server closed the connection mid-reply.", code="upstream_disconnected")
        error.extra["partial"] = partial
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
