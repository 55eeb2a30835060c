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

from gateway.cache.reply_cache import reply_cache
from gateway.calls.cuts import GUARDED, cut_error
from gateway.calls.model_call import ModelCall
from gateway.calls.screened import screening_for
from gateway.state.workers import in_worker
from gateway.telemetry import call_facts
from gateway.upstream.providers.base import StreamCut
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
        self.conversation_id: int | None = turn.conversation.pk if turn.conversation else None
        self.citations: list[dict[str, Any]] = []
        self.call: ModelCall | None = None  # the model call (gateway/calls/model_call.py), once the request is built
        self.failure: ApiError | None = None  # a refusal, or the chain failing before the first byte
        self.message: Message | None = None
        self._finished = False

    @property
    def model(self) -> str:
        """The model that answers; before one does, the first of the chain."""
        call = self.call
        return call.model if call is not None and call.answered else self.turn.chain[0].public_id

    @property
    def cut(self) -> StreamCut | None:
        return self.call.cut if self.call is not None else None

    async def start(self, hits: list[dict[str, Any]]) -> None:
        """Build the model request, pass it through the group's input checks (a block is raised, a 400
        `{detail}`, before anything is saved), save the user's message (a used-up quota saves nothing);
        ask the response cache, so that its headers go out with the reply."""
        if self.turn.refusal is None:
            self.citations = citations_of(hits)
            body = await in_worker(self._request)(hits)
            cache = reply_cache(group=self.turn.account.group, surface=SURFACE, requested_model=self.turn.model_id,
                                chain=self.turn.chain, body=body,
                                cache_control_header=self.request.headers.get("Cache-Control"))
            screening = screening_for(self.turn.account.group, self.request.request_id)
            self.call = ModelCall(self.turn.chain, body, account_id=self.turn.account.pk, surface=SURFACE,
                                  request_id=self.request.request_id, cache=cache, refusals_fall_through=False,
                                  cut_code=INTERRUPTED, screening=screening)
            await self.call.screen()
            await in_worker(self._start)()
            await self.call.lookup()

    def cache_headers(self) -> dict[str, str]:
        """`X-Cache` when the group caches replies and the cache was asked."""
        return self.call.cache.headers() if self.call is not None and self.call.cache is not None else {}

    def _request(self, hits: list[dict[str, Any]]) -> dict[str, Any]:
        try:
            return chat_request(self.turn, hits)
        finally:
            close_old_connections()

    def _start(self) -> None:
        try:
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
        call = self.call
        try:
            if call is None:
                self.failure = self.turn.refusal
                call_facts.failed_in_stream(QUOTA_REACHED, call_facts.REFUSED)  # the calls log: inside a 200
                yield self._meta()
                yield self._event("error", codigo=QUOTA_REACHED, message=self.failure.message)
                yield self._event("done", message_id=None, usage=NO_USAGE, citations=[])
                return
            try:
                await call.open()
            except ApiError as exc:
                self.failure = exc
                yield self._meta()
                codigo = UNAVAILABLE if exc.status >= 500 else REFUSED
                call_facts.failed_in_stream(codigo, call_facts.FAILED)
                yield self._event("error", codigo=codigo, message=exc.message)
                yield self._event("done", message_id=None, usage=NO_USAGE, citations=[])
                return
            yield self._meta()
            async for chunk in call.chunks():
                for choice in chunk.get("choices") or ():
                    text = (choice.get("delta") or {}).get("content") if choice.get("index", 0) == 0 else None
                    if text:
                        yield self._event("delta", text=text)
            await self._finish()
            if call.cut is not None:
                codigo = GUARDED if call.cut.reason == GUARDED else INTERRUPTED
                yield self._event("error", codigo=codigo, message=cut_error(call.cut).message)
            yield self._event("done", message_id=self.message.pk if self.message else None, usage=call.usage(),
                              citations=self.citations)
        finally:
            if call is not None and call.answered and not self._finished:  # the client went away: keep what arrived
                call.cut = call.cut or StreamCut("disconnected", "The client closed the connection mid-reply.")
                call_facts.failed_in_stream(None, call_facts.CLIENT_CLOSED)
                await asyncio.shield(self._finish())

    def usage(self) -> dict[str, int]:
        return self.call.usage() if self.call is not None else NO_USAGE

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
                self.call.meter()
        finally:
            close_old_connections()

    def _save(self) -> None:
        """The reply, in the conversation; none (`message` stays None) when the conversation was
        deleted for good mid-reply."""
        call = self.call
        text = call.reply.text
        if call.cut is None or text:
            status = Message.Status.PARTIAL if call.cut is not None else Message.Status.COMPLETE
            self.message = assistant_message_save(
                conversation_id=self.conversation_id, text=text, model=self.model, status=status,
                usage=call.usage(), citations=self.citations, request_id=self.request_id,
            )
