"""Each model server's health, for the admin: when it last answered, when it last
failed and why, and whether it is cooling down (gateway/registry/cooldown.py).

A proxied call must not pay for this (its hot path adds under 1 ms in all, bench/gateway_latency.py),
so nothing here makes I/O on the call's way: `succeeded` and `failed` write the time into a
dictionary of this process. A daemon thread, started by the first of them, writes what changed to
the shared cache (Redis, or the Django cache without it) every SERVER_HEALTH_FLUSH_SECONDS, one
`set_many` for every server that changed, and once more when the process exits. So the admin
sees a success or a failure at most that late, and a process killed hard loses at most that
much; the record is a view for the operator, not a durable fact
(docs/decisions/0103-health-probes-and-server-health.md).

Shared keys, under the counters' prefix (the Django cache's own key scheme around them):

    gw:health:<server id>:ok       the time (Unix seconds) of the last success any process wrote
    gw:health:<server id>:failed   {"at": time, "cause": text} of the last failure
    gw:health:<server id>:since    the time its address (or kind) last changed: what was seen before it
                                   was another server's, and is not shown as this one's (`address_changed`)

Each process writes only the times it saw, so two processes never erase each other's news;
the stored value may go back by less than one flush interval when a process that saw an older
event writes after one that saw a newer one.

The thread, its lock, backoff, log, fork and exit handling are gateway/state/write_behind.py's; what is
here is the record and how to write what changed in it.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Iterable

from django.conf import settings
from django.core.cache import cache

from gateway.state.write_behind import LogOnce, WriteBehind

logger = logging.getLogger(__name__)

KEEP_SECONDS = 30 * 86400  # a server deleted long ago leaves nothing behind
CAUSE_CHARS = 300

_ok: dict[int, float] = {}  # server id → time of this process's last success
_failed: dict[int, tuple[float, str]] = {}  # server id → (time, cause) of its last failure, a refusal included
_failing_at: dict[int, float] = {}  # server id → time of its last failure that was not a refusal (`failing`)
_forgiven: dict[int, float] = {}  # server id → when an operator last changed it (gateway/registry/signals.py)
_written_ok: dict[int, float] = {}  # what this process last wrote, so that only news is written
_written_failed: dict[int, float] = {}


def _key(server_id: int, what: str) -> str:
    from gateway.state.redis.client import KEY_PREFIX

    return f"{KEY_PREFIX}health:{server_id}:{what}"


# --- The hot path: a dictionary write ---------------------------------------------------------


def succeeded(server) -> None:
    """`server` (a routing.Server) answered a call. No I/O: safe on the event loop."""
    _ok[server.id] = time.time()
    if _news.thread is None:
        _news.start()


def failed(server, cause: str) -> None:
    """A call to `server` failed; `cause` is the server's own words, already without credentials."""
    _failing_at[server.id] = now = time.time()
    _failed[server.id] = (now, cause[:CAUSE_CHARS])
    if _news.thread is None:
        _news.start()


def refused(server, cause: str) -> None:
    """`server` answered a call with a refusal (a 4xx such as 404 for a wrong base URL). It is
    its last failure for the admin, but not `failing`: a request the server takes as invalid says
    nothing about its other calls, and a pool does not turn away from it."""
    _failed[server.id] = (time.time(), cause[:CAUSE_CHARS])
    if _news.thread is None:
        _news.start()


def probed(server, *, cause: str | None = None, refusal: bool = False) -> None:
    """What an operator's probe of the server saw, outside any call: its "Test connection"
    (gateway/console/server_check.py) or model discovery (gateway/registry/discovery.py). No `cause`: it
    answered, its last success; else its last failure, as a refusal (on record only) with `refusal`, or
    as a failure `failing` counts. Not a call's attempt: those are told by gateway/calls/attempt_observers.py
    alone."""
    if cause is None:
        succeeded(server)
    elif refusal:
        refused(server, cause)
    else:
        failed(server, cause)


FAILING_SECONDS = 10.0


def failing(server_id: int) -> bool:
    """Whether this process's last call to the server failed, after its last success (or the
    operator's last change), within FAILING_SECONDS: a pool tries its other deployments first
    meanwhile (gateway/registry/pools.py). A few dictionary reads."""
    at = _failing_at.get(server_id)
    if at is None:
        return False
    return at > _ok.get(server_id, 0.0) and at > _forgiven.get(server_id, 0.0) and time.time() - at < FAILING_SECONDS


def forgive(server_id: int) -> None:
    """An operator changed the server: it gets a fresh chance (its failures stay on record)."""
    _forgiven[server_id] = time.time()


def address_changed(server_id: int) -> None:
    """The server now answers at another address (or is of another kind): what was seen of the old one
    (its last success, its last failure) is no longer its record. This process's record is dropped, and
    the time is written to the shared cache, so that a success another process saw before and writes
    later is not shown either (`health_of` reads nothing older). Never raises: the server is saved."""
    now = time.time()
    for record in (_ok, _failed, _failing_at, _written_ok, _written_failed):
        record.pop(server_id, None)
    _forgiven[server_id] = now
    try:
        cache.set(_key(server_id, "since"), now, timeout=KEEP_SECONDS)
        cache.delete_many([_key(server_id, "ok"), _key(server_id, "failed")])
    except Exception as exc:  # the health is a view for the operator, the save stands
        logger.warning("model server health: the old address's record could not be dropped (%s)",
                       type(exc).__name__)


# --- Writing what changed -----------------------------------------------------------------------


def flush() -> None:
    """Write this process's news to the shared cache (one `set_many`). Raises what a failing
    cache raises; what was not written is tried again at the next flush."""
    _news.flush()


def _write() -> None:
    changes: dict[str, object] = {}
    ok_sent: dict[int, float] = {}
    failed_sent: dict[int, float] = {}
    for server_id, at in list(_ok.items()):
        if at > _written_ok.get(server_id, 0.0):
            changes[_key(server_id, "ok")] = at
            ok_sent[server_id] = at
    for server_id, (at, cause) in list(_failed.items()):
        if at > _written_failed.get(server_id, 0.0):
            changes[_key(server_id, "failed")] = {"at": at, "cause": cause}
            failed_sent[server_id] = at
    if not changes:
        return
    cache.set_many(changes, timeout=KEEP_SECONDS)
    _written_ok.update(ok_sent)
    _written_failed.update(failed_sent)


def _news_pending() -> bool:
    return any(at > _written_ok.get(i, 0.0) for i, at in list(_ok.items())) or \
        any(at > _written_failed.get(i, 0.0) for i, (at, _) in list(_failed.items()))


def forget_all() -> None:
    """Drop this process's record (a forked child, the tests' reset; a test's other process)."""
    _ok.clear()
    _failed.clear()
    _failing_at.clear()
    _forgiven.clear()
    _written_ok.clear()
    _written_failed.clear()


_news = WriteBehind(
    "server-health", _write, every=lambda: settings.SERVER_HEALTH_FLUSH_SECONDS, forget=forget_all,
    pending=_news_pending,
    log=LogOnce(logger, "model server health kept in this process for now: the cache cannot be written (%s)",
                "model server health written to the cache again"))


# --- Reading, for the admin ---------------------------------------------------------------------


@dataclass(frozen=True)
class Health:
    last_success: datetime | None
    last_failure: datetime | None
    failure_cause: str
    cooldown_until: datetime | None  # the end of the server's cooldown, when it has one (even past)
    shared: bool = True  # False: the shared state could not be read; this process's own record only

    @property
    def cooling_down(self) -> bool:
        return self.cooldown_until is not None and self.cooldown_until > datetime.now(timezone.utc)


def _when(seconds: float | None) -> datetime | None:
    return datetime.fromtimestamp(seconds, tz=timezone.utc) if seconds else None


def health_of(server_ids: Iterable[int]) -> dict[int, Health]:
    """The health of each server: the shared record and cooldowns (one cache read, one cooldown
    read), with this process's news not written yet. When the shared state cannot be read, this
    process's own record, marked `shared=False`."""
    from gateway.registry import cooldown

    ids = list(server_ids)
    stored: dict[str, object] = {}
    ends: dict[int, float] = {}
    shared = True
    try:
        stored = cache.get_many([_key(i, what) for i in ids for what in ("ok", "failed", "since")])
        ends = cooldown.shared_ends(ids)
    except cooldown.redis_errors() as exc:
        logger.warning("model server health: the shared state cannot be read (%s)", type(exc).__name__)
        stored, ends, shared = {}, cooldown.local_ends(), False
    found = {}
    for server_id in ids:
        since = _float(stored.get(_key(server_id, "since")))  # what was seen of an earlier address is not shown
        ok = max(_float(stored.get(_key(server_id, "ok"))), _ok.get(server_id, 0.0))
        ok = ok if ok >= since else 0.0
        failure = stored.get(_key(server_id, "failed"))
        failed_at, cause = (_float(failure.get("at")), str(failure.get("cause", ""))) \
            if isinstance(failure, dict) else (0.0, "")
        mine = _failed.get(server_id)
        if mine and mine[0] > failed_at:
            failed_at, cause = mine
        if failed_at < since:
            failed_at, cause = 0.0, ""
        found[server_id] = Health(_when(ok), _when(failed_at), cause, _when(ends.get(server_id)), shared)
    return found


def _float(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return 0.0
