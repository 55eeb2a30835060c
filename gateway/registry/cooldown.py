"""Model servers that could not be reached are skipped by every process for a while (DESIGN.md,
Runtime: outages; SERVER_COOLDOWN_SECONDS).

A connect failure, or a timeout before the first byte of a reply, puts the server in cooldown:
every chain skips it at once (an UpstreamError like an unreachable server's, without a network
call) until the cooldown ends. Then exactly one caller, of all processes, tries it again (the
probe): when the server answers, the cooldown is cleared for everyone; when it fails again, the
cooldown is renewed. The others go on skipping it while the probe is out.

Shared state, in Redis (or the Django cache without it), under the counters' prefix:

    gw:cooldown:<server id>         the time (ms) the cooldown ends. The key outlives the end
                                    (GRACE_FACTOR), so "down, waiting for its probe" is known
    gw:cooldown:<server id>:probe   the probe's lock (SET NX with an expiry)
    gw:cooldown:v                   a stamp moved on every change

Every process keeps a copy of the cooldowns (`_ends`). The model registry reads the stamp in the
same round trip as its own (`gateway.registry.routing.registry`, once per planned call) and `sync` reads
the cooldowns again only when the stamp moved, so a healthy call pays no round trip of its own
here: `check` is a dictionary lookup. A failure of Redis never breaks a call: the copy stays as
it was, and a probe that cannot be arranged goes ahead.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from functools import lru_cache

from django.conf import settings
from django.core.cache import cache

from gateway.state.workers import in_worker

logger = logging.getLogger(__name__)

GO = "go"  # not cooling down: call it
PROBE = "probe"  # the cooldown ended and this caller is the one to try it again
SKIP = "skip"  # cooling down, or another caller's probe is out

STAMP_KEY = "cooldown:v"
GRACE_FACTOR = 10  # the cooldown key lives this many cooldowns (at least MIN_KEY_SECONDS)
MIN_KEY_SECONDS = 300
PROBE_RECHECK_SECONDS = 0.25  # after losing the probe lock, skip without asking for so long

_lock = threading.Lock()
_ends: dict[int, float] = {}  # server id → Unix time its cooldown ends, as this process knows it
_stamp: int | None = None  # the stamp `_ends` was read at
_probe_busy: dict[int, float] = {}  # server id → monotonic time before which the lock is not asked again


def cooldown_key(server_id: int) -> str:
    return f"cooldown:{server_id}"


def probe_key(server_id: int) -> str:
    return f"cooldown:{server_id}:probe"


def _full(key: str) -> str:
    from gateway.state.counters import KEY_PREFIX

    return KEY_PREFIX + key


def _redis():
    from gateway.state.counters import _redis_client

    return _redis_client(settings.REDIS_URL)


def redis_errors() -> tuple[type[BaseException], ...]:
    """What a failing Redis (or the database under the Django cache) raises."""
    from django.db import DatabaseError
    from redis.exceptions import RedisError

    return RedisError, DatabaseError, OSError


# --- The hot path: no I/O unless the server's cooldown just ended ---------------------------


ASK = "ask"  # the cooldown ended: ask the shared state whether this caller probes (`take_probe`)


def verdict(server) -> str:
    """GO, SKIP or ASK for a call to `server` (a routing.Server) now, from this process's copy
    alone: no I/O, so it may run on the event loop."""
    ends = _ends.get(server.id)
    if ends is None:
        return GO
    if time.time() < ends:
        return SKIP
    if time.monotonic() < _probe_busy.get(server.id, 0.0):
        return SKIP
    return ASK


def check(server) -> str:
    """GO, PROBE or SKIP for a call to `server` now (sync code; may make one round trip)."""
    outcome = verdict(server)
    return take_probe(server) if outcome == ASK else outcome


def take_probe(server) -> str:
    """After a cooldown ended: PROBE for the one caller that tries the server again, SKIP for
    the others, GO when another caller's probe already cleared it."""
    try:
        outcome, renewed_until = _take_probe(server)
    except redis_errors() as exc:
        logger.warning("cooldown of server %s: the probe lock could not be taken (%s); trying it", server.name, exc)
        return GO
    if outcome == GO:
        with _lock:
            _ends.pop(server.id, None)
    elif outcome == PROBE:  # the others of this process skip without asking while it is out
        _probe_busy[server.id] = time.monotonic() + _probe_ttl(server)
    elif outcome == SKIP:
        if renewed_until:
            with _lock:
                _ends[server.id] = renewed_until
        else:
            _probe_busy[server.id] = time.monotonic() + PROBE_RECHECK_SECONDS
    return outcome


# KEYS: the cooldown, the probe lock. ARGV: now (ms), the lock's life (ms).
# Returns -1: no cooldown (cleared by another caller); 0: this caller probes; -2: another caller
# probes; otherwise the end (ms) of a cooldown that was renewed meanwhile.
_PROBE_SCRIPT = """
local ends = tonumber(redis.call('GET', KEYS[1]) or '0')
if ends == 0 then return -1 end
if ends > tonumber(ARGV[1]) then return ends end
if redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[2]) then return 0 end
return -2
"""


def _probe_ttl(server) -> float:
    """Long enough for the probe to connect and wait for its first byte."""
    return float(server.connect_timeout) + float(server.read_timeout) + 1.0


def _take_probe(server) -> tuple[str, float | None]:
    now = time.time()
    if settings.REDIS_URL:
        result = int(_probe_script(settings.REDIS_URL)(
            keys=[_full(cooldown_key(server.id)), _full(probe_key(server.id))],
            args=[int(now * 1000), int(_probe_ttl(server) * 1000)],
        ))
        if result == -1:
            return GO, None
        if result == 0:
            return PROBE, None
        if result == -2:
            return SKIP, None
        return SKIP, result / 1000
    ends = cache.get(_full(cooldown_key(server.id)))
    if not ends:
        return GO, None
    if ends / 1000 > now:
        return SKIP, ends / 1000
    if cache.add(_full(probe_key(server.id)), 1, timeout=_probe_ttl(server)):
        return PROBE, None
    return SKIP, None


@lru_cache(maxsize=None)
def _probe_script(url: str):
    return _redis().register_script(_PROBE_SCRIPT)


# --- Outcomes -------------------------------------------------------------------------------


def record_failure(server, cause: str) -> None:
    """The server failed to connect or timed out: everyone skips it for SERVER_COOLDOWN_SECONDS."""
    seconds = float(settings.SERVER_COOLDOWN_SECONDS)
    if seconds <= 0:
        return
    ends = time.time() + seconds
    with _lock:
        _ends[server.id] = ends
    reread()
    _probe_busy.pop(server.id, None)
    logger.warning("model server %s cooling down for %g s after: %s", server.name, seconds, cause)
    key_seconds = max(seconds * GRACE_FACTOR, MIN_KEY_SECONDS)
    try:
        if settings.REDIS_URL:
            pipe = _redis().pipeline(transaction=True)
            pipe.set(_full(cooldown_key(server.id)), int(ends * 1000), px=int(key_seconds * 1000))
            pipe.delete(_full(probe_key(server.id)))
            pipe.incr(_full(STAMP_KEY))
            pipe.execute()
        else:
            cache.set(_full(cooldown_key(server.id)), int(ends * 1000), timeout=key_seconds)
            cache.delete(_full(probe_key(server.id)))
            _cache_incr(_full(STAMP_KEY))
    except redis_errors() as exc:
        logger.warning("cooldown of server %s kept in this process only: %s", server.name, exc)


def record_success(server) -> None:
    """The probe reached the server: the cooldown ends for everyone."""
    clear(server.id)
    logger.warning("model server %s answers again: cooldown cleared", server.name)


def clear(server_id: int) -> None:
    """No cooldown for the server (it answered, or an operator changed it)."""
    with _lock:
        _ends.pop(server_id, None)
    reread()
    _probe_busy.pop(server_id, None)
    try:
        if settings.REDIS_URL:
            pipe = _redis().pipeline(transaction=True)
            pipe.delete(_full(cooldown_key(server_id)), _full(probe_key(server_id)))
            pipe.incr(_full(STAMP_KEY))
            pipe.execute()
        else:
            cache.delete_many([_full(cooldown_key(server_id)), _full(probe_key(server_id))])
            _cache_incr(_full(STAMP_KEY))
    except redis_errors() as exc:
        logger.warning("cooldown of server %s cleared in this process only: %s", server_id, exc)


def _cache_incr(key: str) -> None:
    if not cache.add(key, 1, timeout=None):
        try:
            cache.incr(key)
        except ValueError:  # expired between add and incr
            cache.add(key, 1, timeout=None)


# Async code (the provider clients) reaches the shared state through a worker thread: the Django
# cache may be the database, which async code must not touch; these run only on the rare paths.
take_probe_async = in_worker(take_probe)
record_failure_async = in_worker(record_failure)
record_success_async = in_worker(record_success)


# --- Keeping this process's copy ------------------------------------------------------------


def current(stamp: int) -> bool:
    """Whether this process's copy is of `stamp` (`sync` would read nothing)."""
    return stamp == _stamp


def sync(stamp: int | None, server_ids: Iterable[int]) -> None:
    """Read the cooldowns of `server_ids` again when the shared stamp moved from the one the
    copy was read at. `stamp` None (it could not be read): the copy stays as it is."""
    global _stamp
    if stamp is None or stamp == _stamp:
        return
    ids = list(server_ids)
    try:
        values = _read([cooldown_key(i) for i in ids])
    except redis_errors() as exc:
        logger.warning("cooldowns could not be read: %s", exc)
        return
    fresh = {server_id: int(value) / 1000 for server_id, value in zip(ids, values) if value}
    with _lock:
        _ends.clear()
        _ends.update(fresh)
        _stamp = stamp


def _read(keys: list[str]) -> list:
    if not keys:
        return []
    full = [_full(k) for k in keys]
    if settings.REDIS_URL:
        return _redis().mget(full)
    stored = cache.get_many(full)
    return [stored.get(k) for k in full]


def shared_ends(server_ids: Iterable[int]) -> dict[int, float]:
    """The end (Unix time) of each server's cooldown as the shared state holds it, for the admin
    (gateway/registry/server_health.py). The key outlives its cooldown (GRACE_FACTOR): an end in the past is
    a server not tried since. Raises what a failing Redis (or cache) raises."""
    ids = list(server_ids)
    values = _read([cooldown_key(i) for i in ids])
    return {server_id: int(value) / 1000 for server_id, value in zip(ids, values) if value}


def local_ends() -> dict[int, float]:
    """This process's copy of the cooldowns (what it knows while the shared state is away)."""
    with _lock:
        return dict(_ends)


def reread() -> None:
    """Read the cooldowns again at the next `sync`, whatever the stamp (the copy is kept until
    then: a change of this process's own that did not reach Redis stays known here)."""
    global _stamp
    _stamp = None


def forget_all() -> None:
    """Drop this process's copy (tests; a new Redis)."""
    global _stamp
    with _lock:
        _ends.clear()
        _stamp = None
    _probe_busy.clear()
