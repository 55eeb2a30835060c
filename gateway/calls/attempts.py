"""One model of a chain tried: what happened, told once.

Every try of a model, whatever the call (chat, embeddings, audio), ends in one `Attempt`: the
model, how it went (`outcome`), the status, how long it took, the failure's cause without the
server's key, and what the chain does next (`then`). The chain loop (gateway/calls/chain.py) makes
it and hands it to `record`, which tells each observer in turn: the metrics, the server's health,
its cooldown, the pools' latency book, the call's facts for the calls log, the attempt's span, the
log line of a fall-through and the daily failure counts. The observers are plain functions
(gateway/calls/attempt_observers.py), registered once at start-up by gateway/apps.py: a new
concern is one more observer, not one more call in every loop. Nothing else tells any of them of
an attempt; the transport only returns what happened (an answer, or an UpstreamError).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from gateway.registry.snapshot import Target
from gateway.upstream.providers.base import UpstreamError

# outcome: how the try went, as /metrics, the calls log and the spans name it
OK = "ok"
REFUSED = "refused"  # the server took the request as invalid
UNAVAILABLE = "unavailable"  # an answer saying not now: 429, 5xx, a refused or missing key
UNREACHABLE = "unreachable"  # no connection, or no first byte in time: the server cools down
BAD_RESPONSE = "bad_response"  # answered, with nothing usable
SKIPPED = "skipped"  # the server is cooling down: not asked at all

# then: what the chain does after it
REPLY = "reply"  # the model answers the call
NEXT = "next"  # the next model of the chain is tried
EXHAUSTED = "exhausted"  # it was the chain's last model: the call fails
ANSWERED_AT_ONCE = "answered_at_once"  # a refusal given to the caller with its own status (off /v1)


@dataclass(slots=True)
class Attempt:
    target: Target
    operation: str  # "chat", "embeddings", "audio": the span's gen_ai.operation.name
    outcome: str
    status: int
    seconds: float | None
    then: str
    cause: str | None = None  # the failure's words, without the server's key or anything credential-shaped
    next_target: Target | None = None  # the model tried next, when `then` is NEXT
    failure: UpstreamError | None = None
    probe: bool = False  # the one try of the server after its cooldown ended
    span: Any = None  # the attempt's span, when traces are on

    @property
    def fell_through(self) -> bool:
        return self.then == NEXT


Observer = Callable[[Attempt], Awaitable[None] | None]
observers: list[Observer] = []


def observe(observer: Observer) -> Observer:
    """Tell `observer` of every attempt from now on (once, however often it is registered). An
    observer returns None, or an awaitable for what needs I/O (the cooldown's shared state)."""
    if observer not in observers:
        observers.append(observer)
    return observer


async def record(attempt: Attempt) -> None:
    """Tell every observer of `attempt`, in the order they were registered."""
    for observer in observers:
        pending = observer(attempt)
        if pending is not None:
            await pending
