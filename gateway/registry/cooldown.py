"""Model servers that could not be reached are skipped by every process for a while
(docs/design.md, "Outages"; SERVER_COOLDOWN_SECONDS).

A connect failure, or a timeout before the first byte of a reply, puts the server in cooldown:
every chain skips it at once (an UpstreamError like an unreachable server's, without a network
call) until the cooldown ends. Then exactly one caller, of all processes, tries it again (the
probe): when the server answers, the cooldown is cleared for everyone; when it fails again, the
cooldown is renewed. The others go on skipping it while the probe is out.

Shared state, through the backend chosen at start-up (gateway/state/backend.py: Redis, or the
Django cache without it), under the counters' prefix:

    gw:cooldown:{registry}:<server id>         the time (ms) the cooldown ends. The key outlives the
                                               end (GRACE_FACTOR), so "down, waiting for its probe" is known
    gw:cooldown:{registry}:<server id>:probe   the probe's lock (SET NX with an expiry)
    gw:cooldown:{registry}:v                   a stamp moved on every change

Every process keeps a copy of the cooldowns (`LocalCopy`: one object, written under its one
lock). The model registry reads the stamp in the same round trip as its own
(`gateway.registry.snapshot.registry`, once per planned call) and `sync` reads the cooldowns again
only when the stamp moved, so a healthy call pays no round trip of its own here: `verdict` is a
dictionary lookup, and its answer one of four named `Verdict`s. A failure of Redis never breaks
a call: the copy stays as it was, and a probe that cannot be arranged goes ahead.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from typing import ClassVar, final

from django.conf import settings

from gateway.state import backend, per_process
from gateway.state.redis.client import PROBE_HELD, PROBE_NO_COOLDOWN, PROBE_TAKEN
from gateway.state.workers import in_worker

logger = logging.getLogger(__name__)

# The registry's stamps and the cooldowns share one hash tag: one Redis Cluster slot holds them, so a cooldown's
# write and its stamp's move are one transaction, and the cooldowns are read in one MGET (docs/scaling.md).
REGISTRY_TAG = "{registry}"
STAMP_KEY = f"cooldown:{REGISTRY_TAG}:v"
GRACE_FACTOR = 10  # the cooldown key lives this many cooldowns (at least MIN_KEY_SECONDS)
MIN_KEY_SECONDS = 300
PROBE_RECHECK_SECONDS = 0.25  # after losing the probe lock, skip without asking for so long


@final
class Verdict:
    """What a call to a server does about its cooldown: one of the four below, the same objects
    everywhere (compare with `is` or `==`). A plain class rather than enum.Enum: on Python 3.11
    an Enum member is read through a descriptor (about 60 ns against 15), and every call to a
    model server reads two to four of them."""

    __slots__ = ("name",)
    GO: ClassVar[Verdict]  # not cooling down: call it
    PROBE: ClassVar[Verdict]  # the cooldown ended and this caller is the one to try it again
    SKIP: ClassVar[Verdict]  # cooling down, or another caller's probe is out
    ASK: ClassVar[Verdict]  # the cooldown ended: ask the shared state whether this caller probes (`take_probe`)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Verdict.{self.name}"


Verdict.GO, Verdict.PROBE, Verdict.SKIP, Verdict.ASK = (Verdict(name) for name in ("GO", "PROBE", "SKIP", "ASK"))


class LocalCopy:
    """This process's copy of the cooldowns. Every write holds the lock; `verdict`, on the call's
    way, reads without it: a dictionary lookup sees a whole value, and `replace` puts a new
    dictionary in place rather than emptying and refilling the one being read."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ends: dict[int, float] = {}  # server id → Unix time its cooldown ends, as this process knows it
        self.stamp: int | None = None  # the shared stamp `ends` was read at (None: read them at the next sync)
        self.probe_busy: dict[int, float] = {}  # server id → monotonic time before which the lock is not asked again

    def cooling(self, server_id: int, ends: float) -> None:
        """This process saw the server fail: cooling down until `ends`, whatever the shared state says."""
        with self.lock:
            self.ends[server_id] = ends
            self.probe_busy.pop(server_id, None)
            self.stamp = None

    def cleared(self, server_id: int) -> None:
        with self.lock:
            self.ends.pop(server_id, None)
            self.probe_busy.pop(server_id, None)
            self.stamp = None

    def ended(self, server_id: int) -> None:
        """Another caller's probe cleared the cooldown."""
        with self.lock:
            self.ends.pop(server_id, None)

    def renewed(self, server_id: int, ends: float) -> None:
        with self.lock:
            self.ends[server_id] = ends

    def busy(self, server_id: int, seconds: float) -> None:
        """Skip the server for `seconds` without asking for the probe lock."""
        with self.lock:
            self.probe_busy[server_id] = time.monotonic() + seconds

    def replace(self, ends: dict[int, float], stamp: int) -> None:
        with self.lock:
            self.ends = ends
            self.stamp = stamp

    def reread(self) -> None:
        with self.lock:
            self.stamp = None

    def forget(self) -> None:
        with self.lock:
            self.ends = {}
            self.probe_busy = {}
            self.stamp = None

    def snapshot(self) -> dict[int, float]:
        with self.lock:
            return dict(self.ends)


_local = LocalCopy()


def cooldown_key(server_id: int) -> str:
    return f"cooldown:{REGISTRY_TAG}:{server_id}"


def probe_key(server_id: int) -> str:
    return f"cooldown:{REGISTRY_TAG}:{server_id}:probe"


def redis_errors() -> tuple[type[BaseException], ...]:
    """What a failing Redis (or the database under the Django cache) raises."""
    from django.db import DatabaseError
    from redis.exceptions import RedisError

    return RedisError, DatabaseError, OSError


# --- The hot path: no I/O unless the server's cooldown just ended ---------------------------


def verdict(server) -> Verdict:
    """GO, SKIP or ASK for a call to `server` (a routing.Server) now, from this process's copy
    alone: no I/O, so it may run on the event loop."""
    ends = _local.ends.get(server.id)
    if ends is None:
        return Verdict.GO
    if time.time() < ends:
        return Verdict.SKIP
    if time.monotonic() < _local.probe_busy.get(server.id, 0.0):
        return Verdict.SKIP
    return Verdict.ASK


def check(server) -> Verdict:
    """GO, PROBE or SKIP for a call to `server` now (sync code; may make one round trip)."""
    outcome = verdict(server)
    return take_probe(server) if outcome is Verdict.ASK else outcome


def take_probe(server) -> Verdict:
    """After a cooldown ended: PROBE for the one caller that tries the server again, SKIP for
    the others, GO when another caller's probe already cleared it."""
    try:
        answer = backend.current.probe(cooldown_key(server.id), probe_key(server.id), _probe_ttl(server))
    except redis_errors() as exc:
        logger.warning("cooldown of server %s: the probe lock could not be taken (%s); trying it", server.name, exc)
        return Verdict.GO
    if answer == PROBE_NO_COOLDOWN:
        _local.ended(server.id)
        return Verdict.GO
    if answer == PROBE_TAKEN:  # the others of this process skip without asking while it is out
        _local.busy(server.id, _probe_ttl(server))
        return Verdict.PROBE
    if answer == PROBE_HELD:
        _local.busy(server.id, PROBE_RECHECK_SECONDS)
    else:  # renewed meanwhile: `answer` is its new end (ms)
        _local.renewed(server.id, answer / 1000)
    return Verdict.SKIP


def _probe_ttl(server) -> float:
    """Long enough for the probe to connect and wait for its first byte."""
    return float(server.connect_timeout) + float(server.read_timeout) + 1.0


# --- Outcomes -------------------------------------------------------------------------------


def record_failure(server, cause: str) -> None:
    """The server failed to connect or timed out: everyone skips it for SERVER_COOLDOWN_SECONDS."""
    seconds = float(settings.SERVER_COOLDOWN_SECONDS)
    if seconds <= 0:
        return
    ends = time.time() + seconds
    _local.cooling(server.id, ends)
    logger.warning("model server %s cooling down for %g s after: %s", server.name, seconds, cause)
    key_seconds = max(seconds * GRACE_FACTOR, MIN_KEY_SECONDS)
    try:
        backend.current.write(put=[(cooldown_key(server.id), int(ends * 1000), key_seconds)],
                              drop=[probe_key(server.id)], bump=[STAMP_KEY])
    except redis_errors() as exc:
        logger.warning("cooldown of server %s kept in this process only: %s", server.name, exc)


def record_success(server) -> None:
    """The probe reached the server: the cooldown ends for everyone."""
    clear(server.id)
    logger.warning("model server %s answers again: cooldown cleared", server.name)


def clear(server_id: int) -> None:
    """No cooldown for the server (it answered, or an operator changed it)."""
    _local.cleared(server_id)
    try:
        backend.current.write(drop=[cooldown_key(server_id), probe_key(server_id)], bump=[STAMP_KEY])
    except redis_errors() as exc:
        logger.warning("cooldown of server %s cleared in this process only: %s", server_id, exc)


# Async code (the provider clients) reaches the shared state through a worker thread: the Django
# cache may be the database, which async code must not touch; these run only on the rare paths.
take_probe_async = in_worker(take_probe)
record_failure_async = in_worker(record_failure)
record_success_async = in_worker(record_success)


# --- Keeping this process's copy ------------------------------------------------------------


def current(stamp: int) -> bool:
    """Whether this process's copy is of `stamp` (`sync` would read nothing)."""
    return stamp == _local.stamp


def sync(stamp: int | None, server_ids: Iterable[int]) -> None:
    """Read the cooldowns of `server_ids` again when the shared stamp moved from the one the
    copy was read at. `stamp` None (it could not be read): the copy stays as it is."""
    if stamp is None or stamp == _local.stamp:
        return
    try:
        fresh = shared_ends(server_ids)
    except redis_errors() as exc:
        logger.warning("cooldowns could not be read: %s", exc)
        return
    _local.replace(fresh, stamp)


def shared_ends(server_ids: Iterable[int]) -> dict[int, float]:
    """The end (Unix time) of each server's cooldown as the shared state holds it, for the admin
    (gateway/registry/server_health.py). The key outlives its cooldown (GRACE_FACTOR): an end in the past is
    a server not tried since. Raises what a failing Redis (or cache) raises."""
    ids = list(server_ids)
    if not ids:
        return {}
    values = backend.current.read([cooldown_key(i) for i in ids])
    return {server_id: int(value) / 1000 for server_id, value in zip(ids, values) if value}


def local_ends() -> dict[int, float]:
    """This process's copy of the cooldowns (what it knows while the shared state is away)."""
    return _local.snapshot()


def reread() -> None:
    """Read the cooldowns again at the next `sync`, whatever the stamp (the copy is kept until
    then: a change of this process's own that did not reach Redis stays known here)."""
    _local.reread()


def forget_all() -> None:
    """Drop this process's copy (tests; a new Redis)."""
    _local.forget()


per_process.register("cooldowns", reset=forget_all)
