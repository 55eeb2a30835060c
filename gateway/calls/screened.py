"""A model call under its group's guardrails (gateway/guard/): the request's texts checked, and
redacted, before any model is called, the reply's text checked as it leaves, whatever its format.

    screening = screening_for(account.group, request_id)  # None for a group without guardrails
    ModelCall(..., screening=screening)                   # gateway/calls/model_call.py runs it through a Guard:
    chat, native = await guard.request(chat, native)      # raises ApiError 400 content_policy_violation
    async for chunk in guard.reply(kind, chunks): ...     # raises Blocked (the call's cut)
    texts = await screened_texts(screening, texts)        # embeddings' inputs, a collection's documents

Every finding is noted where the call's other facts are (the calls log's `guard`, never the matched
text), counted in /metrics by check and action, and put on the trace as an event.

The reply's filter holds back at most the engine's window of text per stream (a choice's content, a
tool call's arguments, an Anthropic content block, a Gemini candidate) so that what is split across
chunks is still caught: what it holds is released in later chunks, and the rest before the chunk
that ends the stream (chat's `finish_reason`, Anthropic's `content_block_stop`, Gemini's
`finishReason`), or in one chunk of its own when a stream ends without one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from gateway.calls.cuts import GUARDED
from gateway.guard import Blocked, Finding, Screening, policy_of
from gateway.guard.texts import OPENAI, rewritten, texts_of
from gateway.telemetry import call_facts, metrics, tracing
from gateway.upstream.providers import Native
from gateway.upstream.providers.base import StreamCut
from gateway.web.errors import ApiError

CODE = GUARDED  # the refusal's code, and the reason of a reply cut by a check
CHAT, ANTHROPIC, GEMINI = "chat", "anthropic", "gemini"  # the reply's formats (gateway/cache/entry.py)


def screening_for(group, request_id: str) -> Screening | None:
    """One call's screening when its group has guardrails; None (one attribute read) otherwise."""
    policy = policy_of(group) if group is not None else None
    if policy is None:
        return None
    return Screening(policy, group_name=group.name, request_id=request_id)


async def screened_texts(screening: Screening | None, texts: list[str]) -> list[str]:
    """Plain texts through the input checks (redacted), or ApiError 400 when a check blocks them."""
    if screening is None:
        return texts
    return await Guard(screening).texts(texts)


def refusal(blocked: Blocked) -> ApiError:
    """A call refused by a check before its reply began: 400 in the surface's shape, naming the check."""
    return ApiError(400, blocked.message, code=CODE)


def guard_cut(blocked: Blocked) -> StreamCut:
    """A reply stopped by an output check: each surface shows it as it shows any cut (gateway/calls/cuts.py)."""
    return StreamCut(CODE, blocked.message)


class Guard:
    def __init__(self, screening: Screening) -> None:
        self.screening = screening
        self.blocked: Blocked | None = None
        self._noted = len(screening.findings)  # a screening kept across calls (the agent's rounds): only new ones

    @property
    def policy(self):
        return self.screening.policy

    async def texts(self, texts: list[str]) -> list[str]:
        """Input checks over plain texts (embeddings' inputs, a collection's documents)."""
        if not self.policy.input_checks:
            return texts
        try:
            return await self.screening.input(texts)
        except Blocked as blocked:
            self.blocked = blocked
            raise refusal(blocked) from None
        finally:
            self.note()

    async def request(self, chat: dict[str, Any], native: Native | None) -> tuple[dict[str, Any], Native | None]:
        """Input checks over a request's texts: its chat form and, when it may go on as the client
        sent it, its own format too, in one pass (so a value has one placeholder in both); both come
        back redacted. A finding in the chat form that the client's own form also has is noted once."""
        if not self.policy.input_checks:
            return chat, native
        original = native
        chat_texts = texts_of(CHAT, chat)
        if native is not None and native.kind == OPENAI:  # the chat form is what goes on
            native = None
        own = texts_of(native.kind, native.body) if native is not None else []
        try:
            redacted = await self.screening.input([*own, *chat_texts])
        except Blocked as blocked:
            self.blocked = blocked
            raise refusal(blocked) from None
        finally:
            self.note(first_of_copy=len(own) if native is not None else None)
        if native is not None:
            body = rewritten(native.kind, native.body, redacted[:len(own)])
            if body is not native.body:
                native = replace(native, body=body)
        return rewritten(CHAT, chat, redacted[len(own):]), original if native is None else native

    async def reply(self, kind: str, chunks: AsyncIterator[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
        """The reply's chunks with their text checked (and rewritten); `Blocked` ends them."""
        screen = ReplyScreen(self.screening, kind)
        try:
            async for chunk in chunks:
                for out in await screen.chunk(chunk):
                    yield out
            for out in await screen.end():
                yield out
        except Blocked as blocked:
            self.blocked = blocked
            raise
        finally:
            self.note()

    def note(self, first_of_copy: int | None = None) -> None:
        """The findings made since the last note, to the calls log, /metrics and the trace.
        `first_of_copy`: the index from which the texts repeat the request in its chat form."""
        findings = self.screening.findings[self._noted:]
        self._noted = len(self.screening.findings)
        if first_of_copy is not None:
            seen = {(f.check, f.entity, f.direction) for f in findings if f.index < first_of_copy}
            findings = [f for f in findings if f.index < first_of_copy or (f.check, f.entity, f.direction) not in seen]
        for finding in findings:
            record_finding(finding)


def record_finding(finding: Finding) -> None:
    fields = finding.as_dict()  # never the matched text: a finding does not hold it
    call_facts.guarded(fields)
    metrics.guard_finding(finding.check, finding.action)
    if tracing.ENABLED:
        tracing.event("gateway.guard", {f"gateway.guard.{name}": value for name, value in fields.items()})


class ReplyScreen:
    """The output filters of one reply, one per stream of text in it, made as each stream begins."""

    def __init__(self, screening: Screening, kind: str) -> None:
        self.screening = screening
        self.kind = kind
        self.filters: dict[tuple, Any] = {}
        self.last: dict[str, Any] | None = None  # a chunk to copy the envelope of (id, model) from
        self.kinds: dict[int, str] = {}  # Anthropic: each text-carrying block's delta type, for its release

    async def feed(self, key: tuple, text: str) -> str:
        output = self.filters.get(key)
        if output is None:
            output = self.filters[key] = self.screening.output()
        return await output.feed(text)

    async def rest(self, key: tuple) -> str:
        output = self.filters.pop(key, None)
        return await output.end() if output is not None else ""

    async def chunk(self, chunk: dict[str, Any]) -> list[dict[str, Any]]:
        self.last = chunk
        if self.kind == ANTHROPIC:
            return await self._event(chunk)
        if self.kind == GEMINI:
            return await self._gemini(chunk)
        return await self._chat(chunk)

    async def end(self) -> list[dict[str, Any]]:
        """What is still held when the stream ended without its closing chunks."""
        if not self.filters:
            return []
        if self.kind == ANTHROPIC:
            events = [await self._block_rest(index) for (_, index) in list(self.filters)]
            return [e for e in events if e is not None]
        if self.kind == GEMINI:
            parts = {index: await self.rest(("g", index)) for (_, index) in list(self.filters)}
            candidates = [{"index": i, "content": {"role": "model", "parts": [{"text": t}]}}
                          for i, t in parts.items() if t]
            return [{"candidates": candidates}] if candidates else []
        choices = [await self._choice_rest(index) for index in sorted({key[1] for key in self.filters})]
        choices = [c for c in choices if c is not None]
        return [self._chat_envelope(choices)] if choices else []

    # The chat form: each choice's content, each tool call's arguments.

    async def _chat(self, chunk: dict[str, Any]) -> list[dict[str, Any]]:
        before: list[dict[str, Any]] = []
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict):
                continue
            index = choice.get("index", 0)
            delta = choice.get("delta")
            if isinstance(delta, dict):
                if isinstance(delta.get("content"), str) and delta["content"]:
                    delta["content"] = await self.feed(("c", index), delta["content"])
                for call in delta.get("tool_calls") or ():
                    function = call.get("function") if isinstance(call, dict) else None
                    arguments = function.get("arguments") if isinstance(function, dict) else None
                    if isinstance(arguments, str) and arguments:
                        function["arguments"] = await self.feed(("t", index, call.get("index", 0)), arguments)
            if choice.get("finish_reason") and (rest := await self._choice_rest(index)) is not None:
                before.append(rest)
        if before:
            return [self._chat_envelope(before, chunk), chunk]
        return [chunk]

    async def _choice_rest(self, index: int) -> dict[str, Any] | None:
        delta: dict[str, Any] = {}
        if text := await self.rest(("c", index)):
            delta["content"] = text
        calls = [key for key in self.filters if key[0] == "t" and key[1] == index]
        for key in sorted(calls):
            if arguments := await self.rest(key):
                delta.setdefault("tool_calls", []).append({"index": key[2], "function": {"arguments": arguments}})
        return {"index": index, "delta": delta, "finish_reason": None} if delta else None

    def _chat_envelope(self, choices: list[dict[str, Any]], like: dict[str, Any] | None = None) -> dict[str, Any]:
        like = like or self.last or {}
        envelope = {name: like[name] for name in ("id", "object", "created", "model") if name in like}
        return {**envelope, "choices": choices}

    # Anthropic's events: each content block's text or tool input, released before its stop.

    async def _event(self, event: dict[str, Any]) -> list[dict[str, Any]]:
        kind = event.get("type")
        index = event.get("index", 0)
        if kind == "content_block_delta" and isinstance(delta := event.get("delta"), dict):
            field = {"text_delta": "text", "input_json_delta": "partial_json"}.get(delta.get("type"))
            if field and isinstance(delta.get(field), str) and delta[field]:
                self.kinds[index] = delta["type"]
                delta[field] = await self.feed(("a", index), delta[field])
        elif kind == "content_block_start" and isinstance(block := event.get("content_block"), dict):
            if block.get("type") == "text" and isinstance(block.get("text"), str) and block["text"]:
                self.kinds[index] = "text_delta"
                block["text"] = await self.feed(("a", index), block["text"])
        elif kind == "content_block_stop" and (rest := await self._block_rest(index)) is not None:
            return [rest, event]
        return [event]

    async def _block_rest(self, index: int) -> dict[str, Any] | None:
        text = await self.rest(("a", index))
        if not text:
            return None
        kind = self.kinds.get(index, "text_delta")
        field = "text" if kind == "text_delta" else "partial_json"
        return {"type": "content_block_delta", "index": index, "delta": {"type": kind, field: text}}

    # Gemini's chunks: each candidate's text parts (thoughts aside), function calls' string arguments.

    async def _gemini(self, chunk: dict[str, Any]) -> list[dict[str, Any]]:
        for position, candidate in enumerate(chunk.get("candidates") or ()):
            if not isinstance(candidate, dict):
                continue
            index = candidate.get("index", position)
            content = candidate.get("content")
            parts = content.get("parts") if isinstance(content, dict) else None
            for part in parts if isinstance(parts, list) else ():
                if not isinstance(part, dict) or part.get("thought"):
                    continue
                if isinstance(part.get("text"), str) and part["text"]:
                    part["text"] = await self.feed(("g", index), part["text"])
                call = part.get("functionCall", part.get("function_call"))
                if isinstance(call, dict) and isinstance(call.get("args"), dict):
                    call["args"] = await self._whole_strings(call["args"])
            finished = candidate.get("finishReason", candidate.get("finish_reason"))
            if finished and (rest := await self.rest(("g", index))):
                if not isinstance(content, dict) or not isinstance(parts, list):
                    content = candidate["content"] = {"role": "model", "parts": []}
                    parts = content["parts"]
                parts.append({"text": rest})
        return [chunk]

    async def _whole_strings(self, value: Any) -> Any:
        """A function call's arguments, each string checked whole (they come in one chunk)."""
        if isinstance(value, str):
            return await self.screening.output().whole(value)
        if isinstance(value, dict):
            return {key: await self._whole_strings(inner) for key, inner in value.items()}
        if isinstance(value, list):
            return [await self._whole_strings(inner) for inner in value]
        return value
