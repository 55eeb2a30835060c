"""Running a chain of models (DESIGN.md, Models; spec 7.2, 7.3): the first model whose reply
begins answers; a failure before the first byte moves to the next (a pool's next deployment
first: gateway/registry/routing.py ordered the chain). Each try is told to the deployments' book
(gateway/state/loads.py: calls in flight, time to first byte), which the pools' policies read."""

from __future__ import annotations

import logging
import math
import time
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from gateway.registry import cooldown, server_health
from gateway.registry.cooldown import Verdict
from gateway.registry.snapshot import Target
from gateway.state import loads
from gateway.telemetry import call_facts, genai, metrics, tracing
from gateway.telemetry.redact import redact
from gateway.upstream import providers
from gateway.upstream.providers.base import BAD_RESPONSE, REFUSED, UNAVAILABLE, StreamCut, UpstreamError
from gateway.usage import call_failures
from gateway.web.errors import ApiError

DEFAULT_RETRY_AFTER = 10

logger = logging.getLogger(__name__)


@dataclass
class OpenedReply:
    target: Target
    chunks: AsyncIterator[dict[str, Any]]  # starts with the first chunk
    native: bool = False  # the chunks are the native request's own events (providers.speaks_natively)


class ChainExhausted(ApiError):
    """Every model failed. `retry_after` is set when all failures were retryable (503); `tried` holds
    each model of the chain (its public id) with its failure, in order (a routine's run records them)."""

    retry_after: int | None = None
    tried: tuple[tuple[str, UpstreamError], ...] = ()


class ModelRefused(ApiError):
    """A provider's refusal answered at once with its own status; `model` is the model it refused."""

    model: str = ""


async def open_reply(chain: list[Target], body: dict[str, Any], *, refusals_fall_through: bool,
                     native: providers.Native | None = None) -> OpenedReply:
    """On /v1 a provider's refusal falls through to the next model too (spec 7.3, last
    paragraph); elsewhere it is answered at once with the provider's own status. `native`: the
    client's own request, for a server that speaks its format (gateway/upstream/providers/__init__.py)."""
    failures: list[UpstreamError] = []
    for target in chain:
        stream = providers.chat_stream(target, body, native)
        loads.started(target.id)  # its calls in flight and time to first byte (the pools' policies)
        span = genai.attempt(target, "chat", body) if tracing.ENABLED else None  # the attempt's span
        began = time.perf_counter()
        try:
            first = await (anext(stream) if span is None else genai.within(span, anext(stream)))
        except UpstreamError as failure:
            loads.ended(target.id)
            if failure.kind == REFUSED and not refusals_fall_through:
                raise refused(target, failure, seconds=time.perf_counter() - began, span=span) from None
            failures.append(fell_through(target, failure, last=target is chain[-1], chain=chain,
                                         seconds=time.perf_counter() - began, span=span))
            continue
        except StopAsyncIteration:
            loads.ended(target.id)
            failures.append(fell_through(target, UpstreamError(BAD_RESPONSE, 502, "The model server returned nothing."),
                                         last=target is chain[-1], chain=chain, seconds=time.perf_counter() - began,
                                         span=span))
            continue
        except BaseException:  # cancelled while waiting: the call is over
            loads.ended(target.id)
            if span is not None:
                span.end()
            raise
        seconds = time.perf_counter() - began
        loads.first_byte(target.id, seconds)
        metrics.upstream_call(target.server.name, target.public_id, "ok")
        call_facts.attempted(target, call_facts.OK, status=200, seconds=seconds)  # the calls log's chain
        landing = _Landing(target.id, genai.answered(span, seconds) if span is not None else None)
        if landing.reply is not None:
            landing.reply.saw(first)
        chunks = _chain_first(target, first, stream, landing)
        weakref.finalize(chunks, landing.land)  # a reply dropped unread ends too
        return OpenedReply(target, chunks, providers.speaks_natively(target, native))
    error = exhausted(failures)
    error.tried = tuple(zip((target.public_id for target in chain), failures))
    raise error


class _Landing:
    """Ends a call in flight once, whichever comes first: its reply's end, or the reply being
    dropped unread (an async generator never started runs no `finally`); and its span, when traced."""

    __slots__ = ("model_id", "landed", "reply")

    def __init__(self, model_id: int, reply: genai.Reply | None = None) -> None:
        self.model_id = model_id
        self.landed = False
        self.reply = reply

    def land(self, cut: str | None = None) -> None:
        if not self.landed:
            self.landed = True
            loads.ended(self.model_id)
            if self.reply is not None:
                self.reply.end(cut)


async def _chain_first(target: Target, first: dict[str, Any], rest: AsyncIterator[dict[str, Any]],
                       landing: _Landing) -> AsyncIterator[dict[str, Any]]:
    reply, cut_by = landing.reply, None
    try:
        yield first
        async for chunk in rest:
            if reply is not None:
                reply.saw(chunk)
            yield chunk
    except StreamCut as cut:
        metrics.upstream_cut(target.server.name, target.public_id, cut.reason)
        cut_by = cut.reason
        raise
    finally:
        landing.land(cut_by)


def refused(target: Target, failure: UpstreamError, *, seconds: float | None = None, span=None) -> ApiError:
    """A provider's refusal answered at once with its own status (counted, not fallen through)."""
    call_failures.count(model=target.public_id, kind=call_failures.REFUSED)
    metrics.upstream_call(target.server.name, target.public_id, REFUSED)
    cause = redact(f"{failure.status} {failure.message}", [target.server.api_key])
    call_facts.attempted(target, REFUSED, status=failure.status, seconds=seconds, error=cause)
    if span is not None:
        genai.failed(span, REFUSED, status=failure.status, cause=cause)
    error = ModelRefused(failure.status, failure.message, code="upstream_refused")
    error.model = target.public_id
    return error


def fell_through(target: Target, failure: UpstreamError, *, last: bool,
                 chain: list[Target] | None = None, seconds: float | None = None, span=None) -> UpstreamError:
    """Log a model's failure before the first byte, with server, model and cause; returns it.
    The cause is the server's own words, without its key (the failure's message already is).
    Counted for the usage console (gateway/usage/call_failures.py: no database on this path), and
    noted, with the `seconds` it took, in the call's chain for the calls log; its `span` ended, when traced."""
    kind = call_failures.REFUSED if failure.kind == REFUSED else \
        call_failures.CHAIN_FAILED if last else call_failures.FELL_THROUGH  # a refusal by its name, as /metrics
    call_failures.count(model=target.public_id, kind=kind)
    cause = redact(failure.cooldown_cause or f"{failure.status} {failure.message}", [target.server.api_key])
    if failure.kind != REFUSED and not skipped(target, failure):
        server_health.failed(target.server, cause)  # a dictionary write (gateway/registry/server_health.py)
    outcome = "skipped" if skipped(target, failure) else outcome_of(failure)
    metrics.upstream_call(target.server.name, target.public_id, outcome)
    call_facts.attempted(target, outcome, status=failure.status, seconds=seconds, error=cause, fell_through=not last)
    following = None if last else _after(target, chain)
    if not last:
        metrics.fall_through(target.server.name, target.public_id, outcome)
    if span is not None:
        genai.failed(span, outcome, status=failure.status, cause=cause,
                     next_model=following.public_id if following else None, fell_through=not last)
    logger.warning("model %s on server %s failed: %s; %s", target.name, target.server.name, cause,
                   "no model left in the chain" if last else
                   f"trying the next model ({following.public_id})" if following else "trying the next model",
                   extra={"fields": {"event": "fall_through" if not last else "chain_exhausted",
                                     "server": target.server.name, "model": target.public_id, "reason": outcome,
                                     "cause": cause, "next_model": following.public_id if following else None}})
    return failure


def outcome_of(failure: UpstreamError) -> str:
    """refused, unavailable (an answer: 429, 5xx, quota, key), unreachable (no connection or a
    timeout: the server cools down), bad_response."""
    return "unreachable" if failure.kind == UNAVAILABLE and failure.cooldown_cause else failure.kind


def _after(target: Target, chain: list[Target] | None) -> Target | None:
    for index, entry in enumerate(chain or ()):
        if entry is target:
            return chain[index + 1] if index + 1 < len(chain) else None
    return None


def skipped(target: Target, failure: UpstreamError) -> bool:
    """Whether `failure` is a call skipped because the server is cooling down (not a new failure:
    the one that started the cooldown was recorded)."""
    return failure.cooldown_cause is None and cooldown.verdict(target.server) is Verdict.SKIP


def exhausted(failures: list[UpstreamError]) -> ChainExhausted:
    refusal = next((f for f in failures if f.kind == REFUSED), None)
    if refusal is not None:
        return ChainExhausted(refusal.status, refusal.message, code="upstream_refused")
    if any(f.kind == BAD_RESPONSE for f in failures):
        last = failures[-1]
        return ChainExhausted(502, f"The model server failed: {last.message}", code="bad_gateway")
    waits = [f.retry_after for f in failures if f.retry_after]
    retry_after = max(1, math.ceil(max(waits))) if waits else DEFAULT_RETRY_AFTER
    error = ChainExhausted(
        503,
        f"Every model in the chain is unavailable right now; retry in {retry_after} seconds.",
        code="service_unavailable",
        headers={"Retry-After": str(retry_after)},
    )
    error.retry_after = retry_after
    return error
