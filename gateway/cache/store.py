"""Where cached replies are kept: where the shared state is (gateway/state/backend.py `current`,
chosen once). With Redis, from the event loop, on a connection of the cache's own (a long reply read
or written there does not hold up the counters' replies on theirs), `GET` and `SET PX`; Redis's
expiry ends an entry. Without Redis (the embedded default), the Django cache, which is the database,
in a worker-thread hop; the entry holds its own end, since the database cache keeps whole seconds
(an entry could end up to a second early). Keys are under the shared state's prefix (`gw:rc:...`), so the tests'
reset of the state empties the cache too.

The cache never fails a call: a store that cannot be reached is a miss, and a reply it cannot take
is not kept; either is logged at WARNING, once until the store answers again."""

from __future__ import annotations

import logging
import time
import weakref

from django.core.cache import cache as django_cache
from django.db import DatabaseError
from redis.exceptions import RedisError

from gateway.state import backend
from gateway.state.redis.client import KEY_PREFIX
from gateway.state.redis.loop import LoopRedis, loop_client
from gateway.state.workers import in_worker

logger = logging.getLogger(__name__)

FAILURES = (RedisError, DatabaseError, OSError)

_clients: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_failing = False


def _client() -> LoopRedis:
    """The running loop's connection of the cache to the chosen Redis (a new one when the choice moved)."""
    return loop_client(_clients)


async def fetch(key: str) -> bytes | None:
    """The value kept at `key`, or None (none, expired, or the store unreachable)."""
    try:
        if backend.current.on_loop:
            value = await _client().command("GET", KEY_PREFIX + key)
        else:
            value = _unexpired(await in_worker(django_cache.get)(KEY_PREFIX + key))
    except FAILURES as exc:
        _failed("read", exc)
        return None
    _answered()
    return value if isinstance(value, bytes) else None


async def keep(key: str, value: bytes, seconds: int) -> None:
    """Keep `value` at `key` for `seconds`."""
    try:
        if backend.current.on_loop:
            await _client().command("SET", KEY_PREFIX + key, value, "PX", seconds * 1000)
        else:
            await in_worker(django_cache.set)(KEY_PREFIX + key, (time.time() + seconds, value), timeout=seconds + 1)
    except FAILURES as exc:
        _failed("write", exc)
        return
    _answered()


def _unexpired(stored) -> bytes | None:
    """The value of a Django cache entry (its end, its value) that has not ended."""
    if isinstance(stored, tuple) and len(stored) == 2 and time.time() < stored[0]:
        return stored[1]
    return None


def _failed(what: str, exc: Exception) -> None:
    global _failing
    if not _failing:
        _failing = True
        logger.warning("response cache: cannot %s the store, calls go to the model servers meanwhile (%s)", what, exc)


def _answered() -> None:
    global _failing
    if _failing:
        _failing = False
        logger.warning("response cache: the store answers again")
