"""The reply of one native chat turn, as the events of docs/design.md, "Native chat stream":

    meta  {request_id, conversation_id, model}
    delta {request_id, text}            (any number)
    error {request_id, codigo, message} (a refusal or a failure; at most one)
    done  {request_id, message_id, usage, citations}

`ChatReply.events()` yields them as (name, payload) pairs; the view writes them as Server-Sent
Events or gathers them into one JSON object. The reply is saved in the conversation before
`done` (a reply cut midway as `partial`; nothing, and `message_id` null, when the conversation
was deleted for good meanwhile), and metered once, after the last event (or when the client goes
away), whatever became of the save.

When the account group caches replies (gateway/cache/), a kept reply of the same model request (the
profile's prompt, the retrieved excerpts, the history and the new message: what the model would
read) answers instead of the chain, in the same events, and is saved and metered as a cached one.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

from django.db import close_old_connections

from gateway.cache.entry import CHAT, Entry, Recorder, replay
from gateway.cache.reply_cache import ReplyCache, reply_cache
from gateway.calls.cuts import cut_error
from gateway.calls.dispatch import open_reply
from gateway.calls.metering import cached_input_of, meter, usage_of
from gateway.state.workers import in_worker
from gateway.telemetry import call_facts
from gateway.upstream.providers.base import StreamCut
from gateway.upstream.replies import ReplyAccumulator
from gateway.web.errors import ApiError
from native.chat_turn import Turn, chat_request, citations_of
from native.conversations import assistant_message_save, user_message_save
from native.models import Message

SURFACE = "native_chat"
QUOTA_REACHED = "limite_perfil"  # spec 8.4
UNAVAILABLE = "modelo_indisponivel"  # every model of the chain failed before answering
REFUSED = "requisicao_recusada"  # the model server refused the request as invalid
INTERRUPTED = "resposta_interrompida"  # the reply stopped midway (spec 6.2)
NO_USAGE = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}


class ChatReply:
    def __init__(self, request, turn: Turn) -> None:
        self.request = request
        self.turn = turn
        self.request_id = uuid.uuid4().hex  # also the X-Inference-Request-Id header
        self.body: dict[str, Any] = {}
        self.conversation_id: int | None = turn.conversation.pk if turn.conversation else None
        self.citations: list[dict[str, Any]] = []
        self.reply = ReplyAccumulator()
        self.model = turn.chain[0].public_id
        self.price = None  # the answering model's (issue 25), once one answers
        self.answered = False  # a model began its reply
        self.cut: StreamCut | None = None
        self.failure: ApiError | None = None  # a refusal, or the chain failing before the first byte
        self.message: Message | None = None
        self.cache: ReplyCache | None = None
        self.entry: Entry | None = None  # the kept reply that answers, on a cache hit
        self.recorder: Recorder | None = None  # the reply being recorded for the cache
        self._finished = False
        self._usage: dict[str, int] | None = None

    async def start(self, hits: list[dict[str, Any]]) -> None:
        """Build the model request and save the user's message (a used-up quota saves nothing)."""
        if self.turn.refusal is None:
            self.citations = citations_of(hits)
            await in_worker(self._start)(hits)
            self.cache = reply_cache(group=self.turn.account.group, surface=SURFACE,
                                     requested_model=self.turn.model_id, chain=self.turn.chain, body=self.body,
                                     cache_control_header=self.request.headers.get("Cache-Control"))
            if self.cache is not None:
                self.entry = await self.cache.lookup()
                if self.entry is not None:
                    call_facts.replayed()

    def cache_headers(self) -> dict[str, str]:
        """`X-Cache` when the group caches replies and the cache was asked."""
        return self.cache.headers() if self.cache is not None else {}

    def _start(self, hits: list[dict[str, Any]]) -> None:
        try:
            self.body = chat_request(self.turn, hits)
            message = user_message_save(
                account=self.turn.account, conversation=self.turn.conversation, text=self.turn.message,
                attachments=[a.stored() for a in self.turn.attachments], profile=self.turn.profile,
                request_id=self.request_id,
            )
            self.conversation_id = message.conversation_id
        finally:
            close_old_connections()

    def _event(self, name: str, **fields: Any) -> tuple[str, dict[str, Any]]:
        return name, {"request_id": self.request_id, **fields}

    def _meta(self):
        return self._event("meta", conversation_id=self.conversation_id, model=self.model)

    async def events(self) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        try:
            if self.turn.refusal is not None:
                self.failure = self.turn.refusal
                call_facts.failed_in_stream(QUOTA_REACHED, call_facts.REFUSED)  # the calls log: inside a 200
                yield self._meta()
                yield self._event("error", codigo=QUOTA_REACHED, message=self.failure.message)
                yield self._event("done", message_id=None, usage=NO_USAGE, citations=[])
                return
            if self.entry is not None:
                chunks, self.model, self._usage = replay(self.entry), self.entry.model, self.entry.usage
            else:
                try:
                    opened = await open_reply(self.turn.chain, self.body, refusals_fall_through=False)
                except ApiError as exc:
                    self.failure = exc
                    yield self._meta()
                    codigo = UNAVAILABLE if exc.status >= 500 else REFUSED
                    call_facts.failed_in_stream(codigo, call_facts.FAILED)
                    yield self._event("error", codigo=codigo, message=exc.message)
                    yield self._event("done", message_id=None, usage=NO_USAGE, citations=[])
                    return
                chunks, self.model, self.price = opened.chunks, opened.target.public_id, opened.target.price
                self.recorder = self.cache.record(CHAT) if self.cache is not None else None
            self.answered = True
            yield self._meta()
            whole = False
            try:
                async for chunk in chunks:
                    self.reply.feed(chunk)
                    if self.recorder is not None:
                        self.recorder.add(chunk)
                    for choice in chunk.get("choices") or ():
                        text = (choice.get("delta") or {}).get("content") if choice.get("index", 0) == 0 else None
                        if text:
                            yield self._event("delta", text=text)
                whole = True
            except StreamCut as cut:
                self.cut = cut
            await self._finish()
            if whole and self.recorder is not None:  # kept before `done`: a client with the whole reply finds it
                await self.cache.keep(self.recorder, model=self.model, usage=self.usage())
            if self.cut is not None:
                call_facts.failed_in_stream(INTERRUPTED, call_facts.CUT)
                yield self._event("error", codigo=INTERRUPTED, message=cut_error(self.cut).message)
            yield self._event("done", message_id=self.message.pk if self.message else None, usage=self.usage(),
                              citations=self.citations)
        finally:
            if self.answered and not self._finished:  # the client went away mid-reply: keep what arrived
                self.cut = self.cut or StreamCut("disconnected", "The client closed the connection mid-reply.")
                call_facts.failed_in_stream(None, call_facts.CLIENT_CLOSED)
                await asyncio.shield(self._finish())

    def usage(self) -> dict[str, int]:
        """Counted once, when the reply has ended (the tokenizer may run)."""
        if self._usage is None:
            self._usage = usage_of(self.reply, self.body)
        return self._usage

    async def _finish(self) -> None:
        """Save the reply and meter it, once, in one worker-thread hop."""
        if self._finished:
            return
        self._finished = True
        await in_worker(self._save_and_meter)()

    def _save_and_meter(self) -> None:
        try:
            try:
                self._save()
            finally:  # the reply was made: metered whatever became of the save
                call_facts.reply_text(self.reply.text)  # kept only for a group that keeps its calls' text
                usage = self.usage()
                meter(account_id=self.turn.account.pk, model=self.model, surface=SURFACE,
                      input_tokens=usage["prompt_tokens"], output_tokens=usage["completion_tokens"],
                      request_id=self.request.request_id, cached=self.entry is not None, price=self.price,
                      cached_input_tokens=cached_input_of(self.reply))
        finally:
            close_old_connections()

    def _save(self) -> None:
        """The reply, in the conversation; none (`message` stays None) when the conversation was
        deleted for good mid-reply."""
        text = self.reply.text
        if self.cut is None or text:
            status = Message.Status.PARTIAL if self.cut is not None else Message.Status.COMPLETE
            self.message = assistant_message_save(
                conversation_id=self.conversation_id, text=text, model=self.model, status=status,
                usage=self.usage(), citations=self.citations, request_id=self.request_id,
            )
