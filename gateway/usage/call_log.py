"""The calls log: one row per call of a model surface, answered or not, for the console.

When a request on one of the routes of SURFACES ends (its last byte sent, or the client gone: the
request's record finishing, gateway/telemetry/logjson.py `ended`), `record_call` builds the call's line
from the record (caller, route, status, latency, tokens and cost as metered) and the facts noted on the
call's way (gateway/telemetry/call_facts.py: the model asked, the chain tried, the first byte, an error
inside a stream, the call's tags) and appends it to this process's calls spool: one dict and one `write()`, no database
on the call's way. The spool is the usage spool's kind (gateway/usage/spool.py) in a folder of its own
beside it, USAGE_SPOOL_DIR/<database tag>/calls, drained by the usage drainer's thread after each of its
cycles (`drain`, wired by gateway/apps.py, with `pending` for its write at exit) into CallRecord
(gateway/usage/call_records.py), and taken over from dead processes the same way. Each line carries a
key of its own (a uuid4), unique in the table: a file replayed after a kill writes nothing twice, and a
process killed after the answer loses nothing that reached its file. A U+0000 in its text (a model
name, a message) is written as U+FFFD, never a reason to drop the call (gateway/usage/call_records.py).

A model call the gateway makes for an account outside such a request (a routine run's answer, the MCP
chat tool) is a call too, with a row of its own (`own_call`, surfaces OWN_SURFACES): every call the usage
records meter is in the calls log, so that the console's pages count the same calls.

Refusals count as calls: a caller refused by a ceiling, a quota or its input is recorded like any
call; a request with no valid credential (no account to put it on) is recorded too, at most
UNAUTHENTICATED_PER_MINUTE a minute per process, so that a flood of bad keys cannot fill the table.

For a group that keeps its calls' text (`AccountGroup.capture_calls`), the line also holds the prompt
(the request's body) and the reply, each cut a little past CALL_CAPTURE_MAX_BYTES; they are redacted
by the drainer, before the database has them.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings

from gateway.state import per_process
from gateway.state.write_behind import LogOnce
from gateway.telemetry import call_facts
from gateway.telemetry.logjson import CLIENT_CLOSED, Exchange, current
from gateway.usage.call_records import insert_lines
from gateway.usage.spool import Spool
from gateway.usage.writer import database_tag, usage_writer

logger = logging.getLogger(__name__)

# The routes whose requests are calls, and each one's surface (the usage records' names where they have one).
SURFACES = {
    "v1/chat/completions": "chat.completions",
    "v1/messages": "messages",
    "v1/responses": "responses",
    "v1/embeddings": "embeddings",
    "v1/audio/transcriptions": "audio.transcriptions",
    "v1/audio/translations": "audio.translations",
    "v1/audio/speech": "audio.speech",
    "api/v1/chat": "native_chat",
    "api/v1/agent/chat": "native_agent",
    "api/v1/agent/run": "native_agent_run",
    "api/v1/embeddings": "native_embeddings",
    "admin/playground/reply": "playground",  # the console's playground: a call of the signed-in staff account
    # Google's Gemini API (compat/urls.py), on /v1 and /v1beta: its calls, embeddings as generation
    **{f"{version}/models/<path:model>:{method}": "gemini" for version in ("v1", "v1beta")
       for method in ("generateContent", "streamGenerateContent", "embedContent", "batchEmbedContents")},
}
# The model calls the gateway makes for an account outside a request of SURFACES (`own_call`), each
# named like its usage records' surface: a routine run's answer, the MCP server's chat tool.
OWN_SURFACES = {
    "routine": "a routine run's model call",
    "mcp": "the MCP server's chat tool",
}
UNAUTHENTICATED_PER_MINUTE = 60
CAPTURE_MARGIN = 256  # bytes kept past the limit until the text is redacted (a credential across the cut)


def record_call(exchange: Exchange, seconds: float, status: int) -> None:
    """The request's call, when its route is one of SURFACES, appended to the calls spool. Never raises."""
    surface = SURFACES.get(exchange.route)
    if surface is None:
        return
    try:
        if exchange.account_id is None and not call_log.unauthenticated_allowed():
            return
        call_log.submit(line_of(exchange, surface, seconds, status))
    except Exception:  # the call was answered: what cannot be recorded is logged, never raised into it
        logger.exception("calls log: a call of %s could not be recorded", surface)


@contextmanager
def own_call(*, surface: str, account, request_id: str, tags: dict[str, str] | None = None) -> Iterator[Exchange]:
    """A model call the gateway makes for `account` outside a request of SURFACES (a routine run in a
    worker, the MCP chat tool inside an MCP request): for its duration the call has a record of its own
    (the `current` exchange), so that the chain tried and the usage metered inside it are noted there
    and not on an enclosing request; when it ends, its row goes to the calls log like a request's, with
    the status its error carries (200 when none, 499 when the caller was cancelled). Without this row the
    Calls list would miss calls that the usage records and the home count. `tags` name what made the
    call (the routine and run, the tool). Works around synchronous code and inside a coroutine alike."""
    exchange = Exchange(request_id=request_id)
    exchange.route = surface
    exchange.account_id = account.pk
    exchange.group_id = account.group_id
    facts = call_facts.facts_of(exchange)
    if tags:
        facts.tags = dict(tags)
    token = current.set(exchange)
    status = 200
    try:
        yield exchange
        status = exchange.status or status  # a call answered with an error response says so (a batch line)
    except BaseException as exc:  # noqa: B036 — the call's row says how it ended, then the error goes on
        status = _status_of(exc)
        facts.error_code = facts.error_code or getattr(exc, "code", None)
        raise
    finally:
        current.reset(token)
        exchange.last_byte = time.perf_counter()
        seconds = exchange.last_byte - exchange.started
        try:
            call_log.submit(line_of(exchange, surface, seconds, status))
        except Exception:  # the call happened: what cannot be recorded is logged, never raised into it
            logger.exception("calls log: a call of %s could not be recorded", surface)


def cut_midway(exchange: Exchange, code: str | None) -> None:
    """The own call's reply stopped midway (its row says `cut`, with the error's code)."""
    facts = call_facts.facts_of(exchange)
    facts.outcome = facts.outcome or call_facts.CUT
    facts.error_code = facts.error_code or code


def _status_of(exc: BaseException) -> int:
    if isinstance(exc, asyncio.CancelledError):
        return CLIENT_CLOSED
    status = getattr(exc, "status", None)
    return status if isinstance(status, int) and 400 <= status < 600 else 500


def line_of(exchange: Exchange, surface: str, seconds: float, status: int) -> dict:
    """The call's spool line (short names, as the usage spool's)."""
    facts = exchange.call
    attempts = facts.attempts if facts is not None else []
    model = exchange.model or next((a["model"] for a in reversed(attempts) if a["outcome"] == call_facts.OK), "")
    latency = exchange.last_byte - exchange.started if exchange.last_byte is not None else seconds  # to the last byte
    line = {"k": uuid.uuid4().hex, "t": time.time() - seconds, "a": exchange.account_id, "g": exchange.group_id,
            "s": surface, "m": model, "st": status, "o": outcome_of(status, facts, attempts),
            "l": round(latency * 1000, 2), "r": exchange.request_id or ""}
    if exchange.input_tokens or exchange.output_tokens:
        line.update(i=exchange.input_tokens or 0, ot=exchange.output_tokens or 0)
    if exchange.cost_units:
        line["$"] = exchange.cost_units
    if exchange.cached:
        line["c"] = 1
    if facts is not None:
        line.update(q=facts.model_asked or "", e=facts.error_code or "", at=attempts, ft=facts.fall_throughs)
        if facts.tags:
            line["tg"] = facts.tags
        if facts.guard:
            line["gd"] = facts.guard
        if facts.first_byte is not None:
            line["f"] = round((facts.first_byte - exchange.started) * 1000, 2)
    if exchange.prompt is not None:  # the caller's group keeps its calls' text
        line["cp"], line["cpn"] = _cut(exchange.prompt)
        reply = facts.reply if facts is not None else None
        line["cr"], line["crn"] = _cut(reply() if callable(reply) else reply or "")
    return line


def outcome_of(status: int, facts, attempts: list[dict]) -> str:
    """ok, cut, failed, refused or client_closed: as noted on the way (an error inside a 200), else by status."""
    if facts is not None and facts.outcome:
        return facts.outcome
    if status == CLIENT_CLOSED:
        return call_facts.CLIENT_CLOSED
    if status < 400:
        return call_facts.OK
    if status >= 500 or any(a["outcome"] != call_facts.OK for a in attempts):
        return call_facts.FAILED  # no model answered, or a server's refusal was the answer
    return call_facts.REFUSED


def _cut(text: str | bytes) -> tuple[str, int]:
    """The text cut a little past CALL_CAPTURE_MAX_BYTES, and its whole size in bytes when it was cut (else 0)."""
    data = text if isinstance(text, bytes) else str(text).encode()
    keep = settings.CALL_CAPTURE_MAX_BYTES + CAPTURE_MARGIN
    if len(data) <= keep:
        return data.decode(errors="replace"), 0
    return data[:keep].decode(errors="ignore"), len(data)


class CallLog:
    def __init__(self) -> None:
        self._spool: Spool | None = None
        self._place: tuple = (None, None)
        self._last_scan = float("-inf")
        self._outage = LogOnce(logger, "calls log: calls kept in the spool until the database answers: %s",
                               "calls log: database answers again, spooled calls written", level=logging.ERROR)
        self._minute = -1
        self._unauthenticated = 0

    def spool(self) -> Spool:
        """This process's calls spool, beside the usage spool of the database in use now (looked up again
        only when the settings' objects changed: a test's)."""
        place = (settings.USAGE_SPOOL_DIR, settings.DATABASES["default"]["NAME"])
        spool = self._spool
        if spool is not None and place[0] is self._place[0] and place[1] is self._place[1]:
            return spool
        directory = Path(settings.USAGE_SPOOL_DIR) / database_tag() / "calls"
        if spool is None or spool.directory != directory:
            if spool is not None:
                spool.close()
            spool = self._spool = Spool(directory)
        self._place = place
        return spool

    def unauthenticated_allowed(self) -> bool:
        minute = int(time.monotonic() // 60)
        if minute != self._minute:
            self._minute, self._unauthenticated = minute, 0
        self._unauthenticated += 1
        return self._unauthenticated <= UNAUTHENTICATED_PER_MINUTE

    def submit(self, line: dict) -> None:
        """Keep the line so that it reaches the database (the usage drainer writes it)."""
        try:
            self.spool().append(line)
        except OSError:
            logger.exception("calls log: spool not writable, a call is not recorded (%s)", line.get("r"))
            return
        if usage_writer.drainer.thread is None:
            usage_writer.start()  # its cycles drain this spool too (`drain`)

    def drain(self, *, scan: bool | None = None, hand_off: bool = False) -> bool:
        """Write this process's spooled calls and, every USAGE_ORPHAN_SCAN_SECONDS (or with `scan`), those
        dead processes left or let go; with `hand_off` (the host has a drainer, gateway/usage/host_drain.py),
        let this process's go instead. True when the database took them; never raises (the usage drainer's
        step, told what its cycle did)."""
        if hand_off:
            try:
                self.spool().release()
            except OSError as exc:
                self._outage.failed(exc)
                return False
            return True
        if scan is None:
            scan = time.monotonic() - self._last_scan >= settings.USAGE_ORPHAN_SCAN_SECONDS
        try:
            spool = self.spool()
            if scan:
                spool.take_over(insert_lines, batch=settings.USAGE_BATCH_SIZE)
                self._last_scan = time.monotonic()
            spool.replay(insert_lines, batch=settings.USAGE_BATCH_SIZE)
        except Exception as exc:
            self._outage.failed(exc)
            return False
        self._outage.recovered()
        return True

    def pending(self) -> bool:
        """Whether this process has calls spooled and not yet written."""
        return self._spool is not None and self._spool.pending() > 0

    def forget(self) -> None:
        """Tests: this process's spooled calls go with the test's data (its files removed)."""
        if self._spool is not None:
            self._spool.discard()
        self._last_scan = float("-inf")
        self._outage.reset()
        self._minute, self._unauthenticated = -1, 0

    def flush(self, timeout: float = 10.0) -> bool:
        """Write every spooled call of this host (tests, exit). True when nothing is left."""
        deadline = time.monotonic() + timeout
        while not self.drain(scan=True):
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True


call_log = CallLog()
drain: Callable[..., bool] = call_log.drain
per_process.register("calls-log", reset=call_log.forget)  # written by the usage drainer's flush
