"""The counter steps of gateway/counters.py, run from the event loop (redis.asyncio): a request's
checks then need no hand-off to a worker thread. Same scripts, same keys, same results.

Only with `REDIS_URL` (`available()`); the embedded default keeps its counters in the Django
cache, which only synchronous code may touch, so callers use the synchronous step then.

An asyncio connection belongs to the loop that opened it: each loop gets a client of its own
(one loop per web process; tests may run several, one after the other).
"""

from __future__ import annotations

import asyncio
import weakref

from django.conf import settings

from gateway.counters import _ADD_SCRIPT, _HIT_SCRIPT, KEY_PREFIX, HitResult, hit_script_call, hit_script_result

_clients: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def available() -> bool:
    return bool(settings.REDIS_URL)


def _client():
    """(client, hit script, add script) of the running loop."""
    loop = asyncio.get_running_loop()
    found = _clients.get(loop)
    if found is None or found[0] != settings.REDIS_URL:
        import redis.asyncio as aioredis
        from redis.asyncio.retry import Retry
        from redis.backoff import ExponentialWithJitterBackoff
        from redis.exceptions import ConnectionError

        # A pooled connection that Redis closed (it restarted) fails its next command: tried again on
        # a new connection at once. Without `retry_on_error` the asyncio client would not retry. The
        # pool's default of 100 connections is less than the calls one process has in flight at c=64
        # (each meters after its reply): "Too many connections" became a 503.
        client = aioredis.Redis.from_url(
            settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2, retry_on_error=[ConnectionError],
            retry=Retry(ExponentialWithJitterBackoff(base=0.01, cap=0.25), retries=2), max_connections=1000)
        found = (settings.REDIS_URL, client, client.register_script(_HIT_SCRIPT), client.register_script(_ADD_SCRIPT))
        _clients[loop] = found
    return found[1:]


async def window_hit(counters: list[tuple[str, int]], window: int, *, guards=(), reads=()) -> HitResult:
    """`gateway.counters.window_hit` in one round trip from the loop."""
    guards, reads = list(guards), list(reads)
    keys, args = hit_script_call(counters, window, guards, reads)
    _, hit, _ = _client()
    return hit_script_result(await hit(keys=keys, args=args), counters, len(guards))


async def amounts_add(keys: list[str], amount: int) -> None:
    """`gateway.counters.amounts_add` from the loop."""
    if not keys or amount <= 0:
        return
    _, _, add = _client()
    await add(keys=[KEY_PREFIX + key for key in keys], args=[amount])
