"""Fixed-window counters shared by every process: the one place that counts requests.

`window_hit` checks several counters and adds one to each only when none of them has reached its
ceiling, all in one atomic step. A window starts at its first hit and lasts `window` seconds; a
refused request adds nothing. With `REDIS_URL` set the step is one Lua script on Redis, so any
number of web processes share one count. Without it (the embedded default: one web process) the
Django cache holds the windows, and a process lock with a database transaction makes the step
atomic across the processes of the embedded default (`_cache_step`).

Time is read from `time.time()` in the application, not from Redis, so every process agrees with
the clock the rest of the service uses, and tests can move it.
"""

from __future__ import annotations

import hashlib
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache

from django.conf import settings
from django.core.cache import cache
from django.db import transaction

KEY_PREFIX = "gw:"

# KEYS: n counters, then g guard keys (versions), then r keys to read (amounts).
# ARGV: now (ms), window (ms), n, g, r, n ceilings, g expected versions ("" = any).
# Returns {-1, v1..vg} when a guard differs from what was expected (nothing written);
# {i, count, reset} naming the first counter that refused (nothing written);
# or {0, count1, reset1, ..., v1..vg, amount1..amountr} when the hit was counted, an amount
# being -1 when its key is missing (never set, expired, or lost with Redis: to be rebuilt).
_HIT_SCRIPT = """
local now, window = tonumber(ARGV[1]), tonumber(ARGV[2])
local n, g, r = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local versions = {}
local stale = false
for j = 1, g do
  local v = tonumber(redis.call('GET', KEYS[n + j]) or '0')
  versions[j] = v
  local expected = ARGV[5 + n + j]
  if expected ~= '' and tonumber(expected) ~= v then stale = true end
end
if stale then
  local out = {-1}
  for j = 1, g do out[#out + 1] = versions[j] end
  return out
end
local counts, resets = {}, {}
for i = 1, n do
  local v = redis.call('HMGET', KEYS[i], 'c', 'r')
  local c, rs = tonumber(v[1]), tonumber(v[2])
  if (not c) or (not rs) or now >= rs then
    c = 0
    rs = now + window
  end
  if c >= tonumber(ARGV[5 + i]) then return {i, c, rs} end
  counts[i], resets[i] = c, rs
end
local out = {0}
for i = 1, n do
  local c = counts[i] + 1
  redis.call('HSET', KEYS[i], 'c', c, 'r', resets[i])
  redis.call('PEXPIRE', KEYS[i], resets[i] - now + 1000)
  out[#out + 1] = c
  out[#out + 1] = resets[i]
end
for j = 1, g do out[#out + 1] = versions[j] end
for k = 1, r do out[#out + 1] = tonumber(redis.call('GET', KEYS[n + g + k]) or '-1') end
return out
"""


@dataclass(frozen=True)
class Window:
    key: str
    ceiling: int
    count: int  # hits in the window, this one included when allowed
    reset_at: float  # Unix time the window ends

    @property
    def remaining(self) -> int:
        return max(self.ceiling - self.count, 0)


@dataclass(frozen=True)
class HitResult:
    allowed: bool
    windows: tuple[Window, ...]  # all counters when allowed; only the refusing one otherwise
    stale: bool = False  # a guard differed: nothing was counted
    versions: tuple[int, ...] = ()  # the guards' current values (when allowed or stale)
    amounts: tuple[int | None, ...] = ()  # the read keys' totals (when allowed); None: missing

    @property
    def refused_by(self) -> Window | None:
        return None if self.allowed or self.stale else self.windows[0]


def window_hit(
    counters: list[tuple[str, int]],
    window: int,
    *,
    guards: list[tuple[str, int | None]] = (),
    reads: list[str] = (),
) -> HitResult:
    """Count one hit against every `(key, ceiling)` pair, or against none of them.

    In the same atomic step: `guards` are version keys compared with the values the caller
    expects (None: any); when one differs nothing is counted and `stale` is set, so the caller
    can refresh what it cached and try again. `reads` are amount keys whose totals come back."""
    if settings.REDIS_URL:
        return _redis_hit(counters, window, list(guards), list(reads))
    return _cache_hit(counters, window, list(guards), list(reads))


def _redis_hit(counters, window, guards, reads) -> HitResult:
    keys, args = hit_script_call(counters, window, guards, reads)
    return hit_script_result(_redis_script(settings.REDIS_URL)(keys=keys, args=args), counters, len(guards))


def hit_script_call(counters, window, guards, reads) -> tuple[list[str], list]:
    """The KEYS and ARGV of one `_HIT_SCRIPT` step (also run from the event loop: gateway/state/loop_redis.py)."""
    now_ms = int(time.time() * 1000)
    n, g = len(counters), len(guards)
    keys = [KEY_PREFIX + k for k, _ in counters] + [KEY_PREFIX + k for k, _ in guards] + [KEY_PREFIX + k for k in reads]
    args = [now_ms, window * 1000, n, g, len(reads), *[c for _, c in counters],
            *["" if v is None else v for _, v in guards]]
    return keys, args


def hit_script_result(raw, counters, g: int) -> HitResult:
    out = [int(x) for x in raw]
    n = len(counters)
    if out[0] == -1:
        return HitResult(False, (), stale=True, versions=tuple(out[1:]))
    if out[0]:
        key, ceiling = counters[out[0] - 1]
        return HitResult(False, (Window(key, ceiling, out[1], out[2] / 1000),))
    windows = tuple(
        Window(key, ceiling, out[1 + 2 * i], out[2 + 2 * i] / 1000) for i, (key, ceiling) in enumerate(counters)
    )
    rest = out[1 + 2 * n:]
    amounts = tuple(None if amount < 0 else amount for amount in rest[g:])
    return HitResult(True, windows, versions=tuple(rest[:g]), amounts=amounts)


@lru_cache(maxsize=None)
def _redis_script(url: str):
    return _redis_client(url).register_script(_HIT_SCRIPT)


_cache_lock = threading.Lock()


@contextmanager
def _cache_step():
    """One atomic step on the Django cache: the lock orders this process's threads, and the
    transaction orders processes (the web process and the Celery worker's) on the database
    cache, since SQLite begins it IMMEDIATE and so takes the database's write lock first."""
    with _cache_lock, transaction.atomic():
        yield


def _cache_hit(counters, window, guards, reads) -> HitResult:
    now = time.time()
    keys = [KEY_PREFIX + key for key, _ in counters]
    guard_keys = [KEY_PREFIX + key for key, _ in guards]
    read_keys = [KEY_PREFIX + key for key in reads]
    with _cache_step():
        stored = cache.get_many(keys + guard_keys + read_keys)
        versions = tuple(int(stored.get(k, 0)) for k in guard_keys)
        if any(expected is not None and expected != v for (_, expected), v in zip(guards, versions)):
            return HitResult(False, (), stale=True, versions=versions)
        current = []
        for (key, ceiling), cache_key in zip(counters, keys):
            count, reset_at = stored.get(cache_key, (0, 0.0))
            if now >= reset_at:
                count, reset_at = 0, now + window
            if count >= ceiling:
                return HitResult(False, (Window(key, ceiling, count, reset_at),))
            current.append((key, ceiling, count + 1, reset_at))
        for (key, ceiling, count, reset_at), cache_key in zip(current, keys):
            cache.set(cache_key, (count, reset_at), timeout=max(reset_at - now, 0) + 1)
    amounts = tuple(_live_amount(stored.get(k), now) for k in read_keys)
    return HitResult(True, tuple(Window(*row) for row in current), versions=versions, amounts=amounts)


def version_bump(keys: list[str]) -> None:
    """Move version keys on, so whatever was cached under the old values is refreshed."""
    if not keys:
        return
    if settings.REDIS_URL:
        pipe = _redis_client(settings.REDIS_URL).pipeline(transaction=False)
        for key in keys:
            pipe.incr(KEY_PREFIX + key)
        pipe.execute()
        return
    with _cache_step():
        for key in keys:
            full = KEY_PREFIX + key
            cache.set(full, int(cache.get(full, 0)) + 1, timeout=None)


# --- Amounts: running totals per window (token quotas) ------------------------------------
#
# An amount is a cache of what the usage records add up to (gateway/limits/quotas.py): a missing key
# (never set, expired, or lost with a Redis restart) reads as None and is rebuilt from the records
# with `amounts_seed`, which sets it only when it is still missing. `amounts_add` adds to a key
# only when it exists, so an addition never starts a total that the rebuild then counts again.

# KEYS: the amounts. ARGV: the amount. Adds to each key that exists; the others stay missing.
_ADD_SCRIPT = """
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then redis.call('INCRBY', KEYS[i], ARGV[1]) end
end
return 0
"""


def amounts_get(keys: list[str]) -> list[int | None]:
    """Current totals of `keys`; None for a key that is missing (to be rebuilt)."""
    if not keys:
        return []
    full = [KEY_PREFIX + key for key in keys]
    if settings.REDIS_URL:
        values = _redis_client(settings.REDIS_URL).mget(full)
        return [int(v) if v is not None else None for v in values]
    now = time.time()
    stored = cache.get_many(full)
    return [_live_amount(stored.get(k), now) for k in full]


def amounts_add(keys: list[str], amount: int) -> None:
    """Add `amount` to each of `keys` that exists (one atomic step); a missing one stays missing."""
    if not keys or amount <= 0:
        return
    full = [KEY_PREFIX + key for key in keys]
    if settings.REDIS_URL:
        _redis_add_script(settings.REDIS_URL)(keys=full, args=[amount])
        return
    now = time.time()
    with _cache_step():
        stored = cache.get_many(full)
        for key in full:
            value = stored.get(key)
            if _live_amount(value, now) is not None:
                total, expires_at = value
                cache.set(key, (total + amount, expires_at), timeout=max(expires_at - now, 0) + 60)


def amounts_seed(entries: list[tuple[str, float, int]]) -> list[int]:
    """Set each `(key, expires_at, total)` that is still missing (SET NX), to live until its
    window ends; return the totals now held (the seeded one, or one set meanwhile)."""
    if not entries:
        return []
    now = time.time()
    if settings.REDIS_URL:
        pipe = _redis_client(settings.REDIS_URL).pipeline(transaction=True)
        for key, expires_at, total in entries:
            pipe.set(KEY_PREFIX + key, total, nx=True, ex=max(int(expires_at - now) + 60, 1))
            pipe.get(KEY_PREFIX + key)
        replies = pipe.execute()
        return [int(value) for value in replies[1::2]]
    totals = []
    with _cache_step():
        for key, expires_at, total in entries:
            full = KEY_PREFIX + key
            held = _live_amount(cache.get(full), now)
            if held is None:
                cache.set(full, (total, expires_at), timeout=max(expires_at - now, 0) + 60)
                held = total
            totals.append(held)
    return totals


def amounts_forget(keys: list[str]) -> None:
    """Drop totals that may be wrong (an addition that may not have landed): they are rebuilt."""
    if not keys:
        return
    full = [KEY_PREFIX + key for key in keys]
    if settings.REDIS_URL:
        _redis_client(settings.REDIS_URL).delete(*full)
        return
    with _cache_step():
        cache.delete_many(full)


def _live_amount(stored, now: float) -> int | None:
    if not stored:
        return None
    total, expires_at = stored
    return total if now < expires_at else None


@lru_cache(maxsize=None)
def _redis_add_script(url: str):
    return _redis_client(url).register_script(_ADD_SCRIPT)


@lru_cache(maxsize=None)
def _redis_client(url: str):
    import redis

    return redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)


# --- Marks: "seen within the last N seconds" (webhook duplicate window) --------------------

# KEYS: the mark. ARGV: now (ms), window (ms). Returns 1 when the mark was set (first sight),
# 0 when a live mark was already there. The mark's end is stored with it, so the application's
# clock (not Redis's) decides when it lapses.
_MARK_SCRIPT = """
local now, window = tonumber(ARGV[1]), tonumber(ARGV[2])
local ends = tonumber(redis.call('GET', KEYS[1]) or '0')
if ends > now then return 0 end
redis.call('SET', KEYS[1], now + window, 'PX', window + 1000)
return 1
"""


def mark_once(key: str, window: int) -> bool:
    """Set a mark that lives `window` seconds; False when a live one was already set."""
    full = KEY_PREFIX + key
    now = time.time()
    if settings.REDIS_URL:
        script = _redis_mark_script(settings.REDIS_URL)
        return bool(int(script(keys=[full], args=[int(now * 1000), window * 1000])))
    with _cache_step():
        ends = cache.get(full)
        if ends is not None and ends > now:
            return False
        cache.set(full, now + window, timeout=window + 1)
        return True


def marks_many(marks: list[tuple[str, int]]) -> list[bool]:
    """`mark_once` for each `(key, window)`, in order, in one round trip to Redis."""
    if not settings.REDIS_URL:
        return [mark_once(key, window) for key, window in marks]
    now_ms = int(time.time() * 1000)
    replies = _scripts_in_one_trip(_MARK_SCRIPT, [([KEY_PREFIX + key], [now_ms, window * 1000]) for key, window in marks])
    return [bool(int(reply)) for reply in replies]


def hits_many(hits: list[tuple[list[tuple[str, int]], int]]) -> list[HitResult]:
    """`window_hit` for each `(counters, window)`, in order, in one round trip to Redis."""
    if not settings.REDIS_URL:
        return [window_hit(counters, window) for counters, window in hits]
    replies = _scripts_in_one_trip(_HIT_SCRIPT, [hit_script_call(counters, window, [], []) for counters, window in hits])
    return [hit_script_result(reply, counters, 0) for (counters, _), reply in zip(hits, replies)]


def _scripts_in_one_trip(script: str, calls: list[tuple[list, list]]) -> list:
    """One script run once per `(keys, args)`: EVALSHA in a pipeline. Not redis-py's `Script` in a
    pipeline, which asks Redis whether the script is loaded (SCRIPT EXISTS) on every execution: a
    second round trip. A Redis that lost its scripts (it restarted) refuses them all (NOSCRIPT);
    the script is loaded and the calls made again."""
    if not calls:
        return []
    from redis.exceptions import NoScriptError

    client = _redis_client(settings.REDIS_URL)
    sha = script_sha(script)
    for attempt in (1, 2):
        pipe = client.pipeline(transaction=False)
        for keys, args in calls:
            pipe.evalsha(sha, len(keys), *keys, *args)
        try:
            return pipe.execute()
        except NoScriptError:
            if attempt == 2:
                raise
            client.script_load(script)


@lru_cache(maxsize=None)
def script_sha(script: str) -> str:
    """The SHA-1 Redis knows a script by (EVALSHA), also from the loop (gateway/state/loop_redis.py)."""
    return hashlib.sha1(script.encode("utf-8")).hexdigest()


def unmark(*keys: str) -> None:
    """Forget marks (events that were not accepted after all), in one step."""
    if not keys:
        return
    if settings.REDIS_URL:
        _redis_client(settings.REDIS_URL).delete(*(KEY_PREFIX + key for key in keys))
        return
    with _cache_step():
        cache.delete_many([KEY_PREFIX + key for key in keys])


@lru_cache(maxsize=None)
def _redis_mark_script(url: str):
    return _redis_client(url).register_script(_MARK_SCRIPT)
