"""What each concern makes of an attempt (gateway/calls/attempts.py). gateway/apps.py registers
them, in this order; each is a plain function of the attempt, and none makes I/O on the call's
way but the cooldown's, which happens only when a server could not be reached or was probed."""

from __future__ import annotations

import logging

from gateway.calls.attempts import ANSWERED_AT_ONCE, EXHAUSTED, OK, REFUSED, SKIPPED, Attempt
from gateway.registry import cooldown, server_health
from gateway.state import loads
from gateway.telemetry import call_facts, genai, metrics
from gateway.usage import call_failures

logger = logging.getLogger(__name__)


def to_metrics(attempt: Attempt) -> None:
    """`gateway_upstream_calls_total` by outcome, and `gateway_fall_throughs_total`."""
    server, model = attempt.target.server.name, attempt.target.public_id
    metrics.upstream_call(server, model, attempt.outcome)
    if attempt.fell_through:
        metrics.fall_through(server, model, attempt.outcome)


def to_server_health(attempt: Attempt) -> None:
    """The admin's last answer and last failure of the server: a dictionary write. A refusal is
    its last failure only when the server itself answered it (a wrong base URL's 404), and it
    does not make a pool turn away; a skipped server was not asked."""
    server = attempt.target.server
    if attempt.outcome == OK:
        server_health.succeeded(server)
    elif attempt.outcome == REFUSED:
        if attempt.failure is not None and attempt.failure.answered:
            server_health.refused(server, attempt.cause or "")
    elif attempt.outcome != SKIPPED:
        server_health.failed(server, attempt.cause or "")


def to_cooldown(attempt: Attempt):
    """A server not reached (or silent before its first byte) cools down for everyone; the probe
    that reached it, whatever it answered, clears its cooldown."""
    failure = attempt.failure
    if failure is not None and failure.cooldown_cause:
        return cooldown.record_failure_async(attempt.target.server, failure.cooldown_cause)
    if attempt.probe:
        return cooldown.record_success_async(attempt.target.server)
    return None


def to_loads(attempt: Attempt) -> None:
    """The time to the first byte, which the `latency` pools read (gateway/state/loads.py); the
    calls in flight are counted by the chain loop around the whole reply."""
    if attempt.outcome == OK and attempt.seconds is not None:
        loads.first_byte(attempt.target.id, attempt.seconds)


def to_call_facts(attempt: Attempt) -> None:
    """The calls log's chain: each model tried, in order, with its outcome."""
    call_facts.attempted(attempt.target, attempt.outcome, status=attempt.status, seconds=attempt.seconds,
                         error=attempt.cause, fell_through=attempt.fell_through)


def to_span(attempt: Attempt) -> None:
    """A failed attempt's span ends with its error (the answering one is ended with its reply)."""
    if attempt.span is not None and attempt.outcome != OK:
        following = attempt.next_target
        genai.failed(attempt.span, attempt.outcome, status=attempt.status, cause=attempt.cause or "",
                     next_model=following.public_id if following else None, fell_through=attempt.fell_through)


def to_daily_failures(attempt: Attempt) -> None:
    """The usage console's failures per day and model (gateway/usage/call_failures.py)."""
    if attempt.outcome == OK:
        return
    kind = call_failures.REFUSED if attempt.outcome == REFUSED or attempt.then == ANSWERED_AT_ONCE else \
        call_failures.CHAIN_FAILED if attempt.then == EXHAUSTED else call_failures.FELL_THROUGH
    call_failures.count(model=attempt.target.public_id, kind=kind)


def to_log(attempt: Attempt) -> None:
    """One warning per model that failed in a chain, with server, model, cause and what comes next."""
    if attempt.outcome == OK or attempt.then == ANSWERED_AT_ONCE:
        return
    target, following = attempt.target, attempt.next_target
    last = attempt.then == EXHAUSTED
    logger.warning("model %s on server %s failed: %s; %s", target.name, target.server.name, attempt.cause,
                   "no model left in the chain" if last else
                   f"trying the next model ({following.public_id})" if following else "trying the next model",
                   extra={"fields": {"event": "chain_exhausted" if last else "fall_through",
                                     "server": target.server.name, "model": target.public_id,
                                     "reason": attempt.outcome, "cause": attempt.cause,
                                     "next_model": following.public_id if following else None}})


ALL = (to_metrics, to_server_health, to_cooldown, to_loads, to_call_facts, to_span, to_daily_failures, to_log)
