"""The one loop over a chain of models, for every kind of call (docs/design.md, "Models"; spec 7.2,
7.3): the first model that answers wins; a failure before the first byte moves to the next (a
pool's next deployment first: gateway/registry/routing.py ordered the chain).

    answered = await try_chain(chain, "embeddings", ask, refusals_fall_through=True)
    answered.target, answered.result     # the model that answered, and what `ask(target)` returned
    answered.land()                      # once its reply is over (a stream's end, or at once)

For each model it asks the cooldown first (a server cooling down is skipped without a network
call; the one caller after a cooldown is its probe), counts the call in flight for the pools'
policies (gateway/state/loads.py) until the reply lands, opens the attempt's span when traces are
on, awaits `ask(target)`, and records one `Attempt` (gateway/calls/attempts.py), which tells
everyone else. On /v1 a provider's refusal falls through too (spec 7.3, last paragraph); elsewhere
it is answered at once with the provider's own status (`ModelRefused`)."""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from gateway.calls import attempts
from gateway.calls.attempts import Attempt
from gateway.registry import cooldown
from gateway.registry.cooldown import Verdict
from gateway.registry.snapshot import Target
from gateway.state import loads
from gateway.telemetry import genai, metrics, tracing
from gateway.telemetry.redact import redact
from gateway.upstream.providers.base import BAD_RESPONSE, REFUSED, UNAVAILABLE, UpstreamError, cooling_down
from gateway.web.errors import ApiError

DEFAULT_RETRY_AFTER = 10

T = TypeVar("T")


class ChainExhausted(ApiError):
    """Every model failed. `retry_after` is set when all failures were retryable (503); `tried` holds
    each model of the chain (its public id) with its failure, in order (a routine's run records them)."""

    retry_after: int | None = None
    tried: tuple[tuple[str, UpstreamError], ...] = ()


class ModelRefused(ApiError):
    """A provider's refusal answered at once with its own status; `model` is the model it refused."""

    model: str = ""


class Answered(Generic[T]):
    """The model that answered and what it answered. `land` ends its call in flight and its span
    once, whichever comes first: its reply's end, or the reply being dropped unread."""

    __slots__ = ("target", "result", "reply", "landed")

    def __init__(self, target: Target, result: T, reply: genai.Reply | None = None) -> None:
        self.target = target
        self.result = result
        self.reply = reply  # what the chunks tell the answering attempt's span, when traced
        self.landed = False

    def land(self, cut: str | None = None) -> None:
        """`cut`: why the reply stopped midway (a StreamCut's reason), if it did."""
        if self.landed:
            return
        self.landed = True
        loads.ended(self.target.id)
        if cut is not None:
            metrics.upstream_cut(self.target.server.name, self.target.public_id, cut)
        if self.reply is not None:
            self.reply.end(cut)


async def try_chain(chain: list[Target], operation: str, ask: Callable[[Target], Awaitable[T]], *,
                    refusals_fall_through: bool, body: dict[str, Any] | None = None) -> Answered[T]:
    """The first model of `chain` whose `ask(target)` returns; `body`: the request, for the span's
    parameters. Raises ModelRefused (a refusal off /v1) or ChainExhausted (every model failed)."""
    failures: list[UpstreamError] = []
    for index, target in enumerate(chain):
        following = chain[index + 1] if index + 1 < len(chain) else None
        loads.started(target.id)
        span = genai.attempt(target, operation, body) if tracing.ENABLED else None
        began = time.perf_counter()
        verdict = cooldown.verdict(target.server)  # a dictionary lookup unless its cooldown just ended
        try:
            if verdict is Verdict.ASK:
                verdict = await cooldown.take_probe_async(target.server)
            if verdict is Verdict.SKIP:
                raise cooling_down(target.server)
            result = await (ask(target) if span is None else genai.within(span, ask(target)))
        except UpstreamError as failure:
            loads.ended(target.id)
            seconds = time.perf_counter() - began
            at_once = failure.kind == REFUSED and not refusals_fall_through
            then = attempts.ANSWERED_AT_ONCE if at_once else attempts.NEXT if following else attempts.EXHAUSTED
            outcome = attempts.SKIPPED if verdict is Verdict.SKIP else outcome_of(failure)
            await attempts.record(Attempt(
                target, operation, outcome, failure.status, seconds, then, failure=failure, span=span,
                cause=redact(failure.cooldown_cause or f"{failure.status} {failure.message}", [target.server.api_key]),
                next_target=following if then == attempts.NEXT else None, probe=verdict is Verdict.PROBE))
            if at_once:
                error = ModelRefused(failure.status, failure.message, code="upstream_refused")
                error.model = target.public_id
                raise error from None
            failures.append(failure)
            continue
        except BaseException:  # cancelled while waiting: the call is over
            loads.ended(target.id)
            if span is not None:
                span.end()
            raise
        seconds = time.perf_counter() - began
        await attempts.record(Attempt(target, operation, attempts.OK, 200, seconds, attempts.REPLY, span=span,
                                      probe=verdict is Verdict.PROBE))
        return Answered(target, result, genai.answered(span, seconds) if span is not None else None)
    error = exhausted(failures)
    error.tried = tuple(zip((target.public_id for target in chain), failures))
    raise error


def outcome_of(failure: UpstreamError) -> str:
    """refused, unavailable (an answer: 429, 5xx, quota, key), unreachable (no connection or a
    timeout: the server cools down), bad_response."""
    return attempts.UNREACHABLE if failure.kind == UNAVAILABLE and failure.cooldown_cause else failure.kind


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
