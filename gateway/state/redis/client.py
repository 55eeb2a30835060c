"""The gateway's Redis: one client per URL for the whole process, the prefix of every key the
gateway keeps there, and the Lua scripts that make each shared step atomic (gateway/state/
redis/backend.py runs them from synchronous code, gateway/state/redis/loop.py from the event loop).

Time is read from `time.time()` in the application and passed to the scripts, not read from
Redis, so every process agrees with the clock the rest of the service uses, and tests can move it.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from functools import lru_cache

from gateway.state.windows import HitResult, Window

KEY_PREFIX = "gw:"  # also the prefix of the same keys in the Django cache (gateway/state/cache_backend.py)

logger = logging.getLogger(__name__)

# KEYS: n counters, then g guard keys (versions), then r keys to read (amounts).
# ARGV: now (ms), window (ms), n, g, r, n ceilings, g expected versions ("" = any).
# Returns {-1, v1..vg} when a guard differs from what was expected (nothing written);
# {i, count, reset} naming the first counter that refused (nothing written);
# or {0, count1, reset1, ..., v1..vg, amount1..amountr} when the hit was counted, an amount
# being -1 when its key is missing (never set, expired, or lost with Redis: to be rebuilt).
HIT_SCRIPT = """
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

PENDING_MS = 120_000  # how long pending additions outlive the last one (a rebuild that never settled)

# KEYS: the amounts, then (with a record) the owner's rebuild marks and pending additions
# (gateway/state/counters.py `Pending`). ARGV: the record ('' for none), now (ms), then what to add to
# each amount, in order. Adds to each key that exists; the others stay missing, and where one is being
# rebuilt (its mark's end is to come), the record's amount waits in the pending additions.
ADD_SCRIPT = """
local record, now, n = ARGV[1], tonumber(ARGV[2]), #ARGV - 2
for i = 1, n do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    redis.call('INCRBY', KEYS[i], ARGV[i + 2])
  elseif record ~= '' and tonumber(redis.call('HGET', KEYS[n + 1], KEYS[i]) or '0') > now then
    redis.call('HSET', KEYS[n + 2], KEYS[i] .. '|' .. record, ARGV[i + 2])
    redis.call('PEXPIRE', KEYS[n + 2], PENDING_MS)
  end
end
return 0
""".replace("PENDING_MS", str(PENDING_MS))

# KEYS: the rebuild marks, the pending additions, then the amounts. ARGV: n, then per amount its total and
# its life (s), then the records the totals hold. Sets each amount still missing to its total plus its
# pending additions of the other records; drops its mark and pending additions either way. Returns the
# amounts now held.
SETTLE_SCRIPT = """
local n = tonumber(ARGV[1])
local counted = {}
for j = 2 + 2 * n, #ARGV do counted[ARGV[j]] = true end
local waiting = redis.call('HGETALL', KEYS[2])
local out = {}
for i = 1, n do
  local key = KEYS[2 + i]
  local head = key .. '|'
  local held = redis.call('GET', key)
  local total = tonumber(ARGV[2 * i])
  for f = 1, #waiting, 2 do
    local field = waiting[f]
    if string.sub(field, 1, #head) == head then
      if not counted[string.sub(field, #head + 1)] then total = total + tonumber(waiting[f + 1]) end
      redis.call('HDEL', KEYS[2], field)
    end
  end
  if held then
    out[i] = tonumber(held)
  else
    redis.call('SET', key, total, 'EX', ARGV[1 + 2 * i])
    out[i] = total
  end
  redis.call('HDEL', KEYS[1], key)
end
return out
"""

# KEYS: the mark. ARGV: now (ms), window (ms). Returns 1 when the mark was set (first sight),
# 0 when a live mark was already there. The mark's end is stored with it, so the application's
# clock (not Redis's) decides when it lapses.
MARK_SCRIPT = """
local now, window = tonumber(ARGV[1]), tonumber(ARGV[2])
local ends = tonumber(redis.call('GET', KEYS[1]) or '0')
if ends > now then return 0 end
redis.call('SET', KEYS[1], now + window, 'PX', window + 1000)
return 1
"""

# KEYS: a server's cooldown, its probe lock. ARGV: now (ms), the lock's life (ms).
# Returns PROBE_NO_COOLDOWN (cleared by another caller), PROBE_TAKEN (this caller probes),
# PROBE_HELD (another caller probes), or the end (ms) of a cooldown that was renewed meanwhile.
PROBE_SCRIPT = """
local ends = tonumber(redis.call('GET', KEYS[1]) or '0')
if ends == 0 then return -1 end
if ends > tonumber(ARGV[1]) then return ends end
if redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[2]) then return 0 end
return -2
"""
PROBE_NO_COOLDOWN, PROBE_TAKEN, PROBE_HELD = -1, 0, -2

# The deployments' loads (gateway/state/loads.py), traded by one process in one step.
# KEYS: the processes heard from (a hash: process → ms), the calls of this quarter and of the one
# before (hashes: deployment → calls), then per deployment its calls in flight (a hash: process →
# calls) and its latency (a hash: e = moving time to first byte in µs, t = when it moved, r = last tried).
# ARGV: process, now (ms), stale (ms), alpha, decay (ms), keep (ms), keep of latencies (ms),
# keep of a quarter's calls (ms), n, then six per deployment: id, this process's calls in flight
# (-1: nothing to say), calls started, the times to first byte added up (µs), how many, last tried (ms).
# Returns four per deployment: the other live processes' calls in flight, the moving latency (µs,
# -1 when none), the last try (ms, 0 when none), the calls of the two quarters.
LOADS_SCRIPT = """
local process, now, stale = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local alpha, decay, keep = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local keep_latency, keep_calls, n = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
redis.call('HSET', KEYS[1], process, now)
redis.call('PEXPIRE', KEYS[1], keep)
local alive = {}
local seen = redis.call('HGETALL', KEYS[1])
for i = 1, #seen, 2 do
  if now - tonumber(seen[i + 1]) < stale then alive[seen[i]] = true else redis.call('HDEL', KEYS[1], seen[i]) end
end
local out = {}
for d = 1, n do
  local a = 9 + (d - 1) * 6
  local id, own, calls = ARGV[a + 1], tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  local total, count, tried = tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5]), tonumber(ARGV[a + 6])
  local flights, latency = KEYS[2 + 2 * d], KEYS[3 + 2 * d]
  if own > 0 then
    redis.call('HSET', flights, process, own)
    redis.call('PEXPIRE', flights, keep)
  elseif own == 0 then
    redis.call('HDEL', flights, process)
  end
  if calls > 0 then
    redis.call('HINCRBY', KEYS[2], id, calls)
    redis.call('PEXPIRE', KEYS[2], keep_calls)
  end
  if count > 0 then
    local held = redis.call('HMGET', latency, 'e', 't')
    local mean, e = total / count, tonumber(held[1])
    if e then
      local weight = 1 - (1 - alpha) ^ count
      local aged = 1 - math.exp(-(now - tonumber(held[2] or now)) / decay)
      if aged > weight then weight = aged end
      e = e + (mean - e) * weight
    else
      e = mean
    end
    redis.call('HSET', latency, 'e', string.format('%.1f', e), 't', now)
  end
  if tried > tonumber(redis.call('HGET', latency, 'r') or '0') then redis.call('HSET', latency, 'r', tried) end
  if count > 0 or tried > 0 then redis.call('PEXPIRE', latency, keep_latency) end
  local others = 0
  local held = redis.call('HGETALL', flights)
  for i = 1, #held, 2 do
    if held[i] ~= process then
      if alive[held[i]] then others = others + tonumber(held[i + 1]) else redis.call('HDEL', flights, held[i]) end
    end
  end
  local now_latency = redis.call('HMGET', latency, 'e', 'r')
  out[#out + 1] = others
  out[#out + 1] = math.floor(tonumber(now_latency[1] or '-1'))
  out[#out + 1] = tonumber(now_latency[2] or '0')
  out[#out + 1] = tonumber(redis.call('HGET', KEYS[2], id) or '0') + tonumber(redis.call('HGET', KEYS[3], id) or '0')
end
return out
"""


def client_for(url: str, sentinels=None):
    """The process's client of the Redis at `url` (redis-py pools its connections); with `sentinels`
    (gateway/state/redis/sentinel.py), of the primary they name, with `url`'s database and password."""
    return one_client(url, sentinels)


@lru_cache(maxsize=None)
def one_client(url: str, sentinels):
    """`client_for`'s cache: one client per (url, sentinels) (`one_client.cache_clear()` forgets them)."""
    import redis

    if sentinels is not None:
        from gateway.state.redis.sentinel import master_client

        return master_client(url, sentinels, on_primary=lambda address: primary_seen(address, url, sentinels))
    return redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)


# --- After a Sentinel failover ----------------------------------------------------------------------
# The new primary holds what was replicated to it before the switch: a quota or budget amount may lack the last
# additions the old primary took (replication is asynchronous). So after a switch they are dropped, once for the
# whole deployment, and rebuilt from the usage records when next read, as after a Redis restart. The first process
# to connect to a primary it had not seen sets `gw:primary` to its address (SWITCH_SCRIPT): when it held another
# (or nothing), that process drops the amounts, in a thread of its own (the connection it was making goes on).
AMOUNT_PREFIXES = ("tokens:", "spend:")  # the quota and budget amounts' keys (gateway/limits/quotas.py)
PRIMARY_KEY = "primary"
SWITCH_SCRIPT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
return 1
"""
_primary_seen: str | None = None  # this process's last primary ("host:port")
_primary_lock = threading.Lock()


def primary_seen(address, url: str, sentinels) -> None:
    """The Sentinels named `address` as the primary (at a new connection of the client of `url` and `sentinels`):
    when this process had not seen it yet, `forget_after_switch` runs in a thread."""
    global _primary_seen
    where = f"{address[0]}:{address[1]}"
    if where == _primary_seen:
        return
    with _primary_lock:
        if where == _primary_seen:
            return
        _primary_seen = where
    threading.Thread(target=forget_after_switch, args=(where, url, sentinels), name="redis-switch",
                     daemon=True).start()


def forget_after_switch(where: str, url: str, sentinels) -> bool:
    """When `gw:primary` did not name `where` yet: name it, and drop the quota and budget amounts. True when
    they were dropped; on a failure, the next connection tries again."""
    global _primary_seen
    try:
        client = client_for(url, sentinels)
        if not int(client.eval(SWITCH_SCRIPT, 1, KEY_PREFIX + PRIMARY_KEY, where)):
            return False
        for prefix in AMOUNT_PREFIXES:
            delete_under(client, KEY_PREFIX + prefix)
    except Exception as exc:
        with _primary_lock:
            _primary_seen = None
        logger.warning("Redis primary %s: the quota amounts could not be dropped after the switch (%s: %s); "
                       "tried again at the next connection", where, type(exc).__name__, exc)
        return False
    logger.warning("Redis primary is now %s (Sentinel): the quota and budget amounts are dropped, to be rebuilt "
                   "from the usage records", where)
    return True


@lru_cache(maxsize=None)
def script_sha(script: str) -> str:
    """The SHA-1 Redis knows a script by (EVALSHA)."""
    return hashlib.sha1(script.encode("utf-8")).hexdigest()


def hit_script_call(counters, window, guards, reads) -> tuple[list[str], list]:
    """The KEYS and ARGV of one `HIT_SCRIPT` step."""
    now_ms = int(time.time() * 1000)
    n, g = len(counters), len(guards)
    keys = [KEY_PREFIX + k for k, _ in counters] + [KEY_PREFIX + k for k, _ in guards] + [KEY_PREFIX + k for k in reads]
    args = [now_ms, window * 1000, n, g, len(reads), *[c for _, c in counters],
            *["" if v is None else v for _, v in guards]]
    return keys, args


def hit_script_result(raw, counters, g: int, beside=()) -> HitResult:
    """The reply of one `HIT_SCRIPT` step, read back, with the MGET reply of the keys read beside it."""
    out = [int(x) for x in raw]
    n = len(counters)
    beside = tuple(int(value or 0) for value in beside)
    if out[0] == -1:
        return HitResult(False, (), stale=True, versions=tuple(out[1:]), beside=beside)
    if out[0]:
        key, ceiling = counters[out[0] - 1]
        return HitResult(False, (Window(key, ceiling, out[1], out[2] / 1000),), beside=beside)
    windows = tuple(
        Window(key, ceiling, out[1 + 2 * i], out[2 + 2 * i] / 1000) for i, (key, ceiling) in enumerate(counters)
    )
    rest = out[1 + 2 * n:]
    amounts = tuple(None if amount < 0 else amount for amount in rest[g:])
    return HitResult(True, windows, versions=tuple(rest[:g]), amounts=amounts, beside=beside)


def add_script_call(additions, pending, record: str) -> tuple[list[str], list]:
    """The KEYS and ARGV of one `ADD_SCRIPT` step (`pending`: counters.Pending, or None)."""
    keys = [KEY_PREFIX + key for key, _ in additions]
    if pending is not None:
        keys += [KEY_PREFIX + pending.marks, KEY_PREFIX + pending.additions]
    return keys, [record, int(time.time() * 1000), *(amount for _, amount in additions)]


def settle_script_call(pending, entries, counted) -> tuple[list[str], list]:
    """The KEYS and ARGV of one `SETTLE_SCRIPT` step."""
    now = time.time()
    keys = [KEY_PREFIX + pending.marks, KEY_PREFIX + pending.additions, *(KEY_PREFIX + key for key, _, _ in entries)]
    args = [len(entries)]
    for _, expires_at, total in entries:
        args += [total, max(int(expires_at - now) + 60, 1)]
    return keys, [*args, *counted]


def pending_of(fields: dict, keys) -> dict[str, dict[str, int]]:
    """A pending additions hash (HGETALL's reply, "<amount key>|<record>" → amount) for `keys` (without the
    prefix): key → {record: amount}."""
    out: dict[str, dict[str, int]] = {key: {} for key in keys}
    for field, amount in fields.items():
        key, _, record = (field.decode() if isinstance(field, bytes) else field).partition("|")
        key = key.removeprefix(KEY_PREFIX)
        if key in out:
            out[key][record] = int(amount)
    return out


def scripts_in_one_trip(client, script: str, calls: list[tuple[list, list]], *, also=()) -> list:
    """One script run once per `(keys, args)`: EVALSHA in a pipeline, then the commands of `also`
    (`("MGET", key, ...)`), whose replies follow the scripts'. Not redis-py's `Script` in a
    pipeline, which asks Redis whether the script is loaded (SCRIPT EXISTS) on every execution: a
    second round trip. A Redis that lost its scripts (it restarted) refuses them all (NOSCRIPT);
    the script is loaded and the calls made again."""
    if not calls:
        return []
    from redis.exceptions import NoScriptError

    sha = script_sha(script)
    for attempt in (1, 2):
        pipe = client.pipeline(transaction=False)
        for keys, args in calls:
            pipe.evalsha(sha, len(keys), *keys, *args)
        for command in also:
            pipe.execute_command(*command)
        try:
            return pipe.execute()
        except NoScriptError:
            if attempt == 2:
                raise
            client.script_load(script)


def delete_under(client, prefix: str) -> None:
    """Delete every key that starts with `prefix` (the tests' reset, the amounts after a failover), a
    thousand at a time: one DEL per key in a pipeline, as keys of many slots may not share a command on
    Redis Cluster."""
    keys = list(client.scan_iter(prefix + "*", count=1000))
    for start in range(0, len(keys), 1000):
        delete_each(client, keys[start:start + 1000])


def delete_each(client, keys) -> None:
    """Delete `keys` (with the prefix) in one round trip, a DEL each: they may be in different slots."""
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.delete(key)
    pipe.execute()
