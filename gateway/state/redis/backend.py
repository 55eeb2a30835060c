"""The shared state in Redis (REDIS_URL set): every step one Lua script or one pipeline, so any
number of web and worker processes share one count (gateway/state/backend.py chooses it).

Keys are given without the prefix; this backend adds `KEY_PREFIX`. The same steps from the event
loop are gateway/state/redis/loop.py's, with the same scripts and keys.
"""

from __future__ import annotations

import time

from gateway.state.redis.client import (
    ADD_SCRIPT,
    HIT_SCRIPT,
    KEY_PREFIX,
    LOADS_SCRIPT,
    MARK_SCRIPT,
    PROBE_SCRIPT,
    SETTLE_SCRIPT,
    add_script_call,
    client_for,
    delete_each,
    delete_under,
    hit_script_call,
    hit_script_result,
    pending_of,
    scripts_in_one_trip,
    settle_script_call,
)
from gateway.state.windows import HitResult


class RedisBackend:
    """Counters, amounts, marks, stamps and cooldowns in the Redis at `url`."""

    on_loop = True  # its steps may also run from the event loop (gateway/state/redis/loop.py)

    def __init__(self, url: str, sentinels=None, *, cache=None) -> None:
        self.url = url
        self.cache = cache  # the Django cache's backend, whose keys `reset` also deletes
        self.sentinels = sentinels  # gateway/state/redis/sentinel.py's `Sentinels`: ask them for the primary
        self.client = client_for(url, sentinels)
        self.hit_script = self.client.register_script(HIT_SCRIPT)
        self.add_script = self.client.register_script(ADD_SCRIPT)
        self.settle_script = self.client.register_script(SETTLE_SCRIPT)
        self.mark_script = self.client.register_script(MARK_SCRIPT)
        self.probe_script = self.client.register_script(PROBE_SCRIPT)
        self.loads_script = self.client.register_script(LOADS_SCRIPT)

    def __repr__(self) -> str:
        return f"RedisBackend({self.url!r}{'' if self.sentinels is None else f', {self.sentinels!r}'})"

    # --- Windows: fixed-window counters (gateway/state/counters.py says how they count) ---------

    def window_hit(self, counters, window, guards, reads, beside=()) -> HitResult:
        keys, args = hit_script_call(counters, window, guards, reads)
        if not beside:
            return hit_script_result(self.hit_script(keys=keys, args=args), counters, len(guards))
        raw, values = scripts_in_one_trip(self.client, HIT_SCRIPT, [(keys, args)],
                                          also=[("MGET", *(KEY_PREFIX + key for key in beside))])
        return hit_script_result(raw, counters, len(guards), values)

    def hits_many(self, hits) -> list[HitResult]:
        replies = scripts_in_one_trip(self.client, HIT_SCRIPT,
                                      [hit_script_call(counters, window, [], []) for counters, window in hits])
        return [hit_script_result(reply, counters, 0) for (counters, _), reply in zip(hits, replies)]

    def version_bump(self, keys) -> None:
        pipe = self.client.pipeline(transaction=False)
        for key in keys:
            pipe.incr(KEY_PREFIX + key)
        pipe.execute()

    # --- Amounts: running totals --------------------------------------------------------------

    def amounts_get(self, keys) -> list[int | None]:
        values = self.client.mget([KEY_PREFIX + key for key in keys])
        return [int(v) if v is not None else None for v in values]

    def amounts_add(self, additions, pending, record) -> None:
        keys, args = add_script_call(additions, pending, record)
        self.add_script(keys=keys, args=args)

    def amounts_rebuilding(self, pending, keys, until_ms) -> None:
        pipe = self.client.pipeline(transaction=True)
        pipe.hset(KEY_PREFIX + pending.marks, mapping={KEY_PREFIX + key: until_ms for key in keys})
        pipe.pexpireat(KEY_PREFIX + pending.marks, until_ms + 1000)
        pipe.execute()

    def amounts_pending(self, pending, keys) -> dict[str, dict[str, int]]:
        return pending_of(self.client.hgetall(KEY_PREFIX + pending.additions), keys)

    def amounts_settle(self, pending, entries, counted) -> list[int]:
        keys, args = settle_script_call(pending, entries, counted)
        return [int(value) for value in self.settle_script(keys=keys, args=args)]

    def amounts_forget(self, keys) -> None:
        self.client.delete(*(KEY_PREFIX + key for key in keys))

    # --- Marks: "seen within the last N seconds" ------------------------------------------------

    def mark_once(self, key: str, window: int) -> bool:
        return bool(int(self.mark_script(keys=[KEY_PREFIX + key], args=[int(time.time() * 1000), window * 1000])))

    def marks_many(self, marks) -> list[bool]:
        now_ms = int(time.time() * 1000)
        replies = scripts_in_one_trip(self.client, MARK_SCRIPT,
                                      [([KEY_PREFIX + key], [now_ms, window * 1000]) for key, window in marks])
        return [bool(int(reply)) for reply in replies]

    def unmark(self, keys) -> None:
        delete_each(self.client, [KEY_PREFIX + key for key in keys])

    # --- Plain values: stamps and cooldowns (gateway/registry) --------------------------------

    def read(self, keys) -> list[int | None]:
        """The integers held at `keys` (None where missing), in one MGET."""
        return [int(v) if v is not None else None for v in self.client.mget([KEY_PREFIX + key for key in keys])]

    def write(self, *, put=(), drop=(), bump=()) -> None:
        """In one transaction: set each `(key, value, seconds)`, delete `drop`, add one to `bump`."""
        pipe = self.client.pipeline(transaction=True)
        for key, value, seconds in put:
            pipe.set(KEY_PREFIX + key, value, px=int(seconds * 1000))
        if drop:
            pipe.delete(*(KEY_PREFIX + key for key in drop))
        for key in bump:
            pipe.incr(KEY_PREFIX + key)
        pipe.execute()

    def probe(self, cooldown_key: str, lock_key: str, lock_seconds: float) -> int:
        """`PROBE_SCRIPT`'s answer for a cooldown that may have ended: its PROBE_* code, or the
        end (ms) of a cooldown renewed meanwhile."""
        return int(self.probe_script(keys=[KEY_PREFIX + cooldown_key, KEY_PREFIX + lock_key],
                                     args=[int(time.time() * 1000), int(lock_seconds * 1000)]))

    # --- The deployments' loads (gateway/state/loads.py) ----------------------------------------

    shares_loads = True

    def loads_trade(self, keys, args) -> list[int]:
        """One `LOADS_SCRIPT` step: this process's news in, everyone's loads out."""
        return [int(value) for value in self.loads_script(keys=[KEY_PREFIX + key for key in keys], args=args)]

    # --- Tests ----------------------------------------------------------------------------------

    def reset(self) -> None:
        """Delete every key under the prefix: every counter, amount, mark, stamp and cooldown; and what
        the Django cache keeps under it (the model servers' health, gateway/registry/server_health.py,
        kept 30 days by server id), which would outlive a test's database and show a new server of the
        same id as healthy."""
        delete_under(self.client, KEY_PREFIX)
        if self.cache is not None:
            self.cache.reset()
