"""One model call, from its chain to its metering, whatever the surface that shapes it.

    call = ModelCall(chain, chat_body, account_id=..., surface="chat.completions", request_id=...,
                     cache=reply_cache(...), native=Native(...))
    await call.open()                  # a kept reply (the response cache), or the chain's first chunk
    async for chunk in call.chunks():  # accumulated; a whole reply kept for the cache at its end
        ...                            # the surface shapes its frames
    call.cut                           # the StreamCut of a reply that stopped midway (gateway/calls/cuts.py)
                                       # or that an output check stopped (gateway/calls/screened.py)
    call.usage()                       # counted once, when the reply has ended
    await call.meter_async()           # once, whatever asks again

The surfaces (/v1/chat/completions, /v1/messages, /v1/responses through compat/proxy.py, native chat
through native/chat_reply.py) only shape frames around it. Every failure before the first byte is
raised by `open` as the chain raises it (gateway/calls/chain.py); after it, a stop midway ends the
iteration and is kept in `cut`, and the calls log is told (`call_facts`).

With a `screening` (its group's guardrails, gateway/calls/screened.py `screening_for`), the input
checks run before the cache is asked or any model called (a block is a 400 `content_policy_violation`,
a redaction rewrites the chat form and the client's own request alike), and the output checks over
every chunk that carries text, a kept reply's too: the cache keeps the reply as the model gave it, and
each group asking gets it through its own checks. A call blocked is recorded, never metered."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from gateway.cache.entry import ANTHROPIC, CHAT, GEMINI, Entry, Recorder, replay
from gateway.cache.reply_cache import ReplyCache
from gateway.calls.dispatch import open_reply
from gateway.calls.metering import cache_write_of, cached_input_of, meter, meter_async, usage_of
from gateway.calls.screened import CODE, Guard, guard_cut
from gateway.formats.anthropic.events import MessageAccumulator
from gateway.formats.gemini.replies import GeminiAccumulator
from gateway.guard import Blocked, Screening
from gateway.registry.snapshot import Target
from gateway.telemetry import call_facts
from gateway.upstream.providers import Native
from gateway.upstream.providers.base import StreamCut
from gateway.upstream.replies import ReplyAccumulator

# A reply in the client's own wire format (passed through, or kept so by the cache), gathered by
# that format's accumulator: `feed`, `usage` (the chat form's), `delivered_output_text`, `message`.
NATIVE_REPLIES = {ANTHROPIC: MessageAccumulator, GEMINI: GeminiAccumulator}


class ModelCall:
    def __init__(self, chain: list[Target], body: dict[str, Any], *, account_id: int | None = None, surface: str = "",
                 request_id: str = "", cache: ReplyCache | None = None, native: Native | None = None,
                 refusals_fall_through: bool = True, cut_code: str | None = None,
                 screening: Screening | None = None) -> None:
        """`body`: the call in the chat form. `native`: the client's own request, for a server that
        speaks its format. `refusals_fall_through`: on /v1 a provider's refusal moves to the next
        model too (spec 7.3). `cut_code`: the error code the surface gives a reply cut midway, for the
        calls log (by default the cut's reason). `account_id`, `surface`, `request_id`: what `meter`
        records; a call metered by its caller (gateway/calls/completion.py) goes without them.
        `screening`: the guardrails of the caller's group, None when it has none."""
        self.chain = chain
        self.body = body
        self.account_id = account_id
        self.surface = surface
        self.request_id = request_id
        self.cache = cache
        self.native_request = native
        self.refusals_fall_through = refusals_fall_through
        self.cut_code = cut_code
        self.native = False  # the reply comes in the client's own format, untranslated
        self.reply: ReplyAccumulator | MessageAccumulator | GeminiAccumulator = ReplyAccumulator()
        self.cut: StreamCut | None = None
        self.target: Target | None = None  # the model that answers, when the chain does
        self.entry: Entry | None = None  # the kept reply that answers, on a cache hit
        self.recorder: Recorder | None = None  # the reply being recorded for the cache
        self._chunks: AsyncIterator[dict[str, Any]] | None = None
        self._looked_up = False
        self._ended = False
        self._usage: dict[str, int] | None = None
        self._meter_done = False
        self.guard = Guard(screening) if screening is not None else None
        self._kind = CHAT
        self._screened = False

    @property
    def model(self) -> str:
        if self.target:
            return self.target.public_id
        return self.entry.model if self.entry else str(self.body.get("model"))

    @property
    def answered(self) -> bool:
        """A reply began: the chain's first chunk came, or a kept reply answers."""
        return self._chunks is not None

    async def lookup(self) -> Entry | None:
        """The kept reply that answers the call, when its group caches replies (asked once)."""
        if not self._looked_up:
            self._looked_up = True
            await self.screen()
            if self.cache is not None and (entry := await self.cache.lookup()) is not None:
                self.entry = entry
                call_facts.replayed()
        return self.entry

    async def open(self) -> None:
        """A kept reply, or the first chunk of the chain: every failure so far is raised."""
        await self.screen()
        if await self.lookup() is not None:
            self._chunks, kind = replay(self.entry), self.entry.kind
            self._usage = self.entry.usage  # as metered when it was made
        else:
            opened = await open_reply(self.chain, self.body, refusals_fall_through=self.refusals_fall_through,
                                      native=self.native_request)
            self.target, self._chunks = opened.target, opened.chunks
            kind = self.native_request.kind if opened.native else CHAT
            if self.cache is not None:
                self.recorder = self.cache.record(kind)
        self._kind = kind
        self.native = kind != CHAT
        if self.native:
            self.reply = NATIVE_REPLIES[kind]()

    async def screen(self) -> None:
        """The input checks, once, before anything else is asked (nothing without guardrails)."""
        if self.guard is not None and not self._screened:
            self._screened = True
            self.body, self.native_request = await self.guard.request(self.body, self.native_request)

    async def _recorded(self) -> AsyncIterator[dict[str, Any]]:
        """The reply's chunks as they came, recorded for the cache before any check changes them."""
        async for chunk in self._chunks:
            if self.recorder is not None:
                self.recorder.add(chunk)
            yield chunk

    async def chunks(self) -> AsyncIterator[dict[str, Any]]:
        """The reply's chunks; a stop midway ends the iteration and is kept in `cut`. A reply that
        ended whole is kept for the cache before the surface's last frames go out, so a client that
        has the whole reply finds it there."""
        whole = False
        chunks = self._recorded() if self.recorder is not None else self._chunks
        if self.guard is not None and (self.guard.policy.output_checks or self.guard.policy.restores):
            chunks = self.guard.reply(self._kind, chunks)
        try:
            async for chunk in chunks:
                self.reply.feed(chunk)
                yield chunk
            whole = True
        except StreamCut as cut:
            self.cut = cut
            call_facts.failed_in_stream(self.cut_code or cut.reason, call_facts.CUT)
        except Blocked as blocked:  # an output check: the model's stream is let go
            self.cut = guard_cut(blocked)
            call_facts.failed_in_stream(CODE, call_facts.CUT)
            await self._chunks.aclose()
        finally:
            self._ended = True
            if not whole and self.cut is None:  # the client went away mid-reply
                call_facts.failed_in_stream(None, call_facts.CLIENT_CLOSED)
        if whole and self.recorder is not None:
            await self.cache.keep(self.recorder, model=self.model, usage=self.usage())

    def usage(self) -> dict[str, int]:
        """The call's usage; counted once, when the reply has ended (the tokenizer may run)."""
        if self._usage is not None:
            return self._usage
        usage = usage_of(self.reply, self.body)
        if self._ended:
            self._usage = usage
        return usage

    def meter(self) -> None:
        """Meter the call's usage (sync code), the first time only; nothing when no reply began."""
        if (fields := self._meter_fields()) is not None:
            meter(**fields)

    async def meter_async(self) -> None:
        """`meter` from the event loop."""
        if (fields := self._meter_fields()) is not None:
            await meter_async(**fields)

    def _meter_fields(self) -> dict[str, Any] | None:
        if self._meter_done or (self.target is None and self.entry is None):
            return None
        if self.guard is not None and self.guard.blocked is not None:  # recorded, never billed
            self._meter_done = True
            return None
        if self.account_id is None:
            raise ValueError("this model call has no account to meter: its caller meters it")
        self._meter_done = True
        call_facts.reply_text(self.reply.delivered_output_text)  # read only when the group keeps its calls' text
        usage = self.usage()
        return {"account_id": self.account_id, "model": self.model, "surface": self.surface,
                "input_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"],
                "request_id": self.request_id, "cached": self.entry is not None,
                "price": self.target.price if self.target else None, "cached_input_tokens": cached_input_of(self.reply),
                "cache_write_input_tokens": cache_write_of(self.reply)}
