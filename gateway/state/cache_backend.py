"""The shared state in the Django cache: the embedded default (no REDIS_URL), where the cache is
the database (gateway/state/backend.py chooses it).

Each step that writes is one `cache_step`: a process lock orders this process's threads, and a
database transaction orders processes (the web process and the Celery worker's) on the database
cache, since SQLite begins it IMMEDIATE and so takes the database's write lock first. The keys are
the Redis backend's, with the cache's own key scheme around them (":1:gw:...").
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

from django.core.cache import DEFAULT_CACHE_ALIAS, cache, caches
from django.core.cache.backends.db import DatabaseCache
from django.core.cache.backends.redis import RedisCache
from django.db import connections, router, transaction

from gateway.state.redis.client import (
    KEY_PREFIX,
    PENDING_MS,
    PROBE_HELD,
    PROBE_NO_COOLDOWN,
    PROBE_TAKEN,
    delete_under,
    pending_of,
)
from gateway.state.windows import HitResult, Window

_lock = threading.Lock()


@contextmanager
def cache_step():
    """One atomic step on the Django cache (also django-ratelimit's, accounts/admin_login.py)."""
    with _lock, transaction.atomic():
        yield


def _live_amount(stored, now: float) -> int | None:
    if not stored:
        return None
    total, expires_at = stored
    return total if now < expires_at else None


class CacheBackend:
    """Counters, amounts, marks, stamps and cooldowns in the default Django cache."""

    on_loop = False  # the cache may be the database, which only synchronous code may touch
    url = ""

    def __repr__(self) -> str:
        return "CacheBackend()"

    # --- Windows ----------------------------------------------------------------------------

    def window_hit(self, counters, window, guards, reads, beside=()) -> HitResult:
        now = time.time()
        keys = [KEY_PREFIX + key for key, _ in counters]
        guard_keys = [KEY_PREFIX + key for key, _ in guards]
        read_keys = [KEY_PREFIX + key for key in reads]
        beside_keys = [KEY_PREFIX + key for key in beside]
        with cache_step():
            stored = cache.get_many(keys + guard_keys + read_keys + beside_keys)
            versions = tuple(int(stored.get(k, 0)) for k in guard_keys)
            values = tuple(int(stored.get(k) or 0) for k in beside_keys)
            if any(expected is not None and expected != v for (_, expected), v in zip(guards, versions)):
                return HitResult(False, (), stale=True, versions=versions, beside=values)
            current = []
            for (key, ceiling), cache_key in zip(counters, keys):
                count, reset_at = stored.get(cache_key, (0, 0.0))
                if now >= reset_at:
                    count, reset_at = 0, now + window
                if count >= ceiling:
                    return HitResult(False, (Window(key, ceiling, count, reset_at),), beside=values)
                current.append((key, ceiling, count + 1, reset_at))
            for (key, ceiling, count, reset_at), cache_key in zip(current, keys):
                cache.set(cache_key, (count, reset_at), timeout=max(reset_at - now, 0) + 1)
        amounts = tuple(_live_amount(stored.get(k), now) for k in read_keys)
        return HitResult(True, tuple(Window(*row) for row in current), versions=versions, amounts=amounts,
                         beside=values)

    def hits_many(self, hits) -> list[HitResult]:
        return [self.window_hit(counters, window, [], []) for counters, window in hits]

    def version_bump(self, keys) -> None:
        with cache_step():
            for key in keys:
                full = KEY_PREFIX + key
                cache.set(full, int(cache.get(full, 0)) + 1, timeout=None)

    # --- Amounts ------------------------------------------------------------------------------

    def amounts_get(self, keys) -> list[int | None]:
        full = [KEY_PREFIX + key for key in keys]
        now = time.time()
        stored = cache.get_many(full)
        return [_live_amount(stored.get(k), now) for k in full]

    def amounts_add(self, additions, pending, record) -> None:
        full = [(KEY_PREFIX + key, amount) for key, amount in additions]
        now = time.time()
        with cache_step():
            stored = cache.get_many([key for key, _ in full])
            marks = cache.get(KEY_PREFIX + pending.marks, {}) if pending is not None else {}
            waiting = {}
            for key, amount in full:
                value = stored.get(key)
                if _live_amount(value, now) is not None:
                    total, expires_at = value
                    cache.set(key, (total + amount, expires_at), timeout=max(expires_at - now, 0) + 60)
                elif marks.get(key, 0) > now * 1000:
                    waiting[f"{key}|{record}"] = amount
            if waiting:
                held = cache.get(KEY_PREFIX + pending.additions, {})
                cache.set(KEY_PREFIX + pending.additions, {**held, **waiting}, timeout=PENDING_MS / 1000)

    def amounts_rebuilding(self, pending, keys, until_ms) -> None:
        with cache_step():
            marks = cache.get(KEY_PREFIX + pending.marks, {})
            marks.update({KEY_PREFIX + key: until_ms for key in keys})
            cache.set(KEY_PREFIX + pending.marks, marks, timeout=max(until_ms / 1000 - time.time(), 0) + 1)

    def amounts_pending(self, pending, keys) -> dict[str, dict[str, int]]:
        return pending_of(cache.get(KEY_PREFIX + pending.additions, {}), keys)

    def amounts_settle(self, pending, entries, counted) -> list[int]:
        now, counted, totals = time.time(), set(counted), []
        with cache_step():
            marks = cache.get(KEY_PREFIX + pending.marks, {})
            waiting = cache.get(KEY_PREFIX + pending.additions, {})
            for key, expires_at, total in entries:
                full = KEY_PREFIX + key
                mine = {field: amount for field, amount in waiting.items() if field.startswith(full + "|")}
                for field, amount in mine.items():
                    del waiting[field]
                    if field[len(full) + 1:] not in counted:
                        total += amount
                marks.pop(full, None)
                held = _live_amount(cache.get(full), now)
                if held is None:
                    cache.set(full, (total, expires_at), timeout=max(expires_at - now, 0) + 60)
                    held = total
                totals.append(held)
            cache.set(KEY_PREFIX + pending.marks, marks, timeout=60)
            cache.set(KEY_PREFIX + pending.additions, waiting, timeout=PENDING_MS / 1000)
        return totals

    def amounts_forget(self, keys) -> None:
        with cache_step():
            cache.delete_many([KEY_PREFIX + key for key in keys])

    # --- Marks --------------------------------------------------------------------------------

    def mark_once(self, key: str, window: int) -> bool:
        full = KEY_PREFIX + key
        now = time.time()
        with cache_step():
            ends = cache.get(full)
            if ends is not None and ends > now:
                return False
            cache.set(full, now + window, timeout=window + 1)
            return True

    def marks_many(self, marks) -> list[bool]:
        return [self.mark_once(key, window) for key, window in marks]

    def unmark(self, keys) -> None:
        with cache_step():
            cache.delete_many([KEY_PREFIX + key for key in keys])

    # --- Plain values: stamps and cooldowns -------------------------------------------------

    def read(self, keys) -> list[int | None]:
        full = [KEY_PREFIX + key for key in keys]
        stored = cache.get_many(full)
        return [stored.get(k) for k in full]

    def write(self, *, put=(), drop=(), bump=()) -> None:
        with cache_step():
            for key, value, seconds in put:
                cache.set(KEY_PREFIX + key, value, timeout=seconds)
            if drop:
                cache.delete_many([KEY_PREFIX + key for key in drop])
            for key in bump:
                full = KEY_PREFIX + key
                cache.set(full, int(cache.get(full, 0)) + 1, timeout=None)

    def probe(self, cooldown_key: str, lock_key: str, lock_seconds: float) -> int:
        now_ms = time.time() * 1000
        with cache_step():
            ends = cache.get(KEY_PREFIX + cooldown_key)
            if not ends:
                return PROBE_NO_COOLDOWN
            if ends > now_ms:
                return int(ends)
            return PROBE_TAKEN if cache.add(KEY_PREFIX + lock_key, 1, timeout=lock_seconds) else PROBE_HELD

    # --- The deployments' loads (gateway/state/loads.py) ----------------------------------------

    # Not shared: the embedded default runs one web process, and a step per half second on the
    # database cache would contend with the calls' own writes. Each process counts its own.
    shares_loads = False

    def loads_trade(self, keys, args) -> None:
        return None

    # --- Tests ----------------------------------------------------------------------------------

    def reset(self) -> None:
        """Delete every key under the prefix from the cache. The database cache's table is not a
        model's, so the test database's flush leaves it as it is; a Redis cache (a test that runs
        this backend while the cache is Redis) holds them as ":1:gw:..."."""
        store = caches[DEFAULT_CACHE_ALIAS]
        prefix = store.make_key(KEY_PREFIX)
        if isinstance(store, DatabaseCache):
            table = store.cache_model_class._meta.db_table
            connection = connections[router.db_for_write(store.cache_model_class)]
            with connection.cursor() as cursor:
                cursor.execute(f"DELETE FROM {connection.ops.quote_name(table)} WHERE cache_key LIKE %s",
                               [prefix + "%"])
        elif isinstance(store, RedisCache):
            delete_under(store._cache.get_client(None, write=True), prefix)  # its writer (the Sentinels' primary)
        else:
            raise TypeError(f"the counters' keys cannot be listed in a {type(store).__name__}: "
                            "the database or the Redis cache holds them")
