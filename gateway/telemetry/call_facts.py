"""What the calls log keeps of a model call beyond the request's own record, noted on the call's way: the model asked,
each model tried and how it went (the chain), when the first byte of a reply came, an error the client got inside a 200
stream, the call's tags (OpenAI's `metadata`, checked), its guardrails' findings (`guard`, gateway/calls/screened.py),
and the reply's text (kept only for a group that keeps its calls' text: the request's record takes the prompt then).

The facts live in the request's record (`Exchange.call`, made at the first note) and are written
with it when the request ends (gateway/usage/call_log.py). A note is a few attribute writes on an
object of this request; outside a request (a Celery task, a test calling a function) it does nothing.

    model_asked("oa/echo-1")                    # the chain is planned (gateway/registry/routing.py)
    tagged({"app": "billing"})                   # the request's tags, checked (compat/proxy.py)
    attempted(target, "ok", status=200, seconds=0.012)   # each model tried (gateway/calls/attempt_observers.py)
    failed_in_stream("read_timeout", CUT)        # an error inside a 200"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from gateway.telemetry import genai, tracing
from gateway.telemetry.logjson import Exchange, current

OK = "ok"
CUT = "cut"  # the reply began, then stopped (or its stream carried an error)
FAILED = "failed"  # no model answered
REFUSED = "refused"  # refused before any model
CLIENT_CLOSED = "client_closed"  # the client went away before the reply ended


class CallFacts:
    __slots__ = ("model_asked", "first_byte", "attempts", "fall_throughs", "outcome", "error_code", "reply", "tags",
                 "guard")

    def __init__(self) -> None:
        self.model_asked: str | None = None
        self.first_byte: float | None = None  # time.perf_counter() of the first byte of a reply (or a kept one)
        self.attempts: list[dict[str, Any]] = []
        self.fall_throughs = 0
        self.outcome: str | None = None  # set when the status alone does not say it (an error inside a 200)
        self.error_code: str | None = None  # the first error the client was given
        self.reply: str | Callable[[], str] | None = None  # read only when the text is kept
        self.tags: dict[str, str] = {}  # the call's tags, kept with its row and its usage records
        self.guard: list[dict[str, Any]] = []


def facts_of(exchange: Exchange) -> CallFacts:
    facts = exchange.call
    if facts is None:
        facts = exchange.call = CallFacts()
    return facts


def _facts() -> CallFacts | None:
    exchange = current.get()
    return facts_of(exchange) if exchange is not None else None


def model_asked(model_id: Any) -> None:
    """The model the request named (the first planned: a tool's own call later does not change it)."""
    if (facts := _facts()) is not None and facts.model_asked is None:
        facts.model_asked = model_id if isinstance(model_id, str) else ""


def tagged(tags: dict[str, str]) -> None:
    """The call's tags (checked by its surface: short strings, gateway/web/validation.py `check_tags`).
    A NUL, which PostgreSQL's JSON refuses (the row would be dropped), is kept as U+FFFD. Tags the gateway
    set first (a batch line's batch and `custom_id`) stay, over a client's of the same name."""
    if tags and (facts := _facts()) is not None:
        facts.tags = {**{_storable(key): _storable(value) for key, value in tags.items()}, **(facts.tags or {})}


def _storable(text: str) -> str:
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


def tags_of(exchange: Exchange | None) -> dict[str, str]:
    """The tags of the request's call (none outside a request, or for a call that has none)."""
    facts = exchange.call if exchange is not None else None
    return facts.tags if facts is not None else {}


def attempted(target, outcome: str, *, status: int | None, seconds: float | None, error: str | None = None,
              fell_through: bool = False) -> None:
    """A model of the chain tried: `outcome` ok, refused, unavailable, unreachable, bad_response or
    skipped (cooling down); `error` already redacted; `seconds` to its first byte (or its failure).
    `fell_through`: another model is tried after it."""
    if (facts := _facts()) is None:
        return
    if outcome == OK and facts.first_byte is None:
        facts.first_byte = time.perf_counter()
    facts.attempts.append({"model": target.public_id, "server": target.server.name, "outcome": outcome,
                           "status": status, "error": error,
                           "ttfb_ms": round(seconds * 1000, 2) if seconds is not None else None})
    facts.fall_throughs += fell_through


def replayed() -> None:
    """A kept reply (the response cache) answers: its first byte is now (and an event on its span)."""
    if (facts := _facts()) is not None and facts.first_byte is None:
        facts.first_byte = time.perf_counter()
    if tracing.ENABLED:
        genai.cache_hit()


def failed_in_stream(code: str | None, outcome: str) -> None:
    """An error the client gets inside a 200 (a stream cut midway, native chat's `error` event)."""
    if (facts := _facts()) is not None:
        facts.outcome = facts.outcome or outcome
        facts.error_code = facts.error_code or code


def error_given(code: str | None) -> None:
    """The code of an error answer (gateway/web/errors.py render_error); an earlier one stays."""
    exchange = current.get()
    if exchange is not None and code and (exchange.call is None or exchange.call.error_code is None):
        facts_of(exchange).error_code = code


def reply_text(text: str | Callable[[], str]) -> None:
    """The reply (or what gives it, called only when the caller's group keeps its calls' text)."""
    if (facts := _facts()) is not None:
        facts.reply = text
