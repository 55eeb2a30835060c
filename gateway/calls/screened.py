"""A model call under its group's guardrails (gateway/guard/): the request's texts checked, and
redacted, before any model is called, the reply's text checked as it leaves, whatever its format.

    screening = screening_for(account.group, request_id)  # None for a group without guardrails
    ModelCall(..., screening=screening)                   # gateway/calls/model_call.py runs it through a Guard:
    chat, native = await guard.request(chat, native)      # raises ApiError 400 content_policy_violation
    async for chunk in guard.reply(kind, chunks): ...     # raises Blocked (the call's cut)
    texts = await screened_texts(screening, texts)        # embeddings' inputs, a collection's documents

Every finding is noted where the call's other facts are (the calls log's `guard`, never the matched
text), counted in /metrics by check and action, and put on the trace as an event.

The reply's chunks go through gateway/guard/texts.py `ReplyScreen`, in the reply's format."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from gateway.calls.cuts import GUARDED
from gateway.guard import Blocked, Finding, Screening, policy_of
from gateway.guard.texts import CHAT, OPENAI, ReplyScreen, rewritten, texts_of
from gateway.telemetry import call_facts, metrics, tracing
from gateway.telemetry.logjson import current
from gateway.upstream.providers import Native
from gateway.upstream.providers.base import StreamCut
from gateway.web.errors import ApiError

CODE = GUARDED  # the refusal's code, and the reason of a reply cut by a check


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


# Counted with the gateway's other metrics (gateway/telemetry/metrics.py, which sets prometheus_client's
# multiprocess mode up); checks and actions are the policy's few words, never a client's.
FINDINGS = metrics.Counter("gateway_guard_findings", "Findings of the groups' guardrails, by check (pii, secrets, "
                           "injection, words, model, webhook, policy) and action (block, redact, log).",
                           ["check", "action"], registry=None)


def record_finding(finding: Finding) -> None:
    """A finding noted with the call's facts (the calls log's `guard`), counted, and put on the trace."""
    fields = finding.as_dict()  # never the matched text: a finding does not hold it
    if (exchange := current.get()) is not None:
        call_facts.facts_of(exchange).guard.append(fields)
    FINDINGS.labels(finding.check, finding.action).inc()
    if tracing.ENABLED:
        tracing.event("gateway.guard", {f"gateway.guard.{name}": value for name, value in fields.items()})
