"""Slots: at most `cap` holders of a named set at once, across every process that shares Redis (in this
process alone without Redis: the embedded default runs one batch worker). A holder takes a slot with a token
and gives it back; a slot not renewed within `ttl` seconds is free again, so a holder killed mid-call leaks
nothing past its ttl. The batch queue holds a slot per line in flight to a model server (batches/runner.py).

    if slots.take("server:vllm", token, cap=4, ttl=30): ...; slots.give_back("server:vllm", token)

The set is a sorted set of tokens scored by when they lapse, read and written in one script on Redis's own
clock, so hosts whose clocks differ agree."""

from __future__ import annotations

import threading
import time

from gateway.state import backend, per_process
from gateway.state.redis.backend import RedisBackend
from gateway.state.redis.client import KEY_PREFIX

TAKE_SCRIPT = """
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ms)
local ttl = tonumber(ARGV[3])
if redis.call('ZSCORE', KEYS[1], ARGV[1]) or redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], ms + ttl, ARGV[1])
  redis.call('PEXPIRE', KEYS[1], ttl)
  return 1
end
return 0
"""
KEEP_SCRIPT = """
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local ttl = tonumber(ARGV[1])
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], 'XX', ms + ttl, ARGV[i]) end
redis.call('PEXPIRE', KEYS[1], ttl)
return 1
"""

_here: dict[str, dict[str, float]] = {}  # without Redis: name -> token -> when it lapses (time.monotonic())
_lock = threading.Lock()


def _key(name: str) -> str:
    return f"{KEY_PREFIX}slots:{name}"


def take(name: str, token: str, *, cap: int, ttl: float) -> bool:
    """Take a slot of `name` for `token` (or renew the one it holds); False when `cap` are held."""
    shared = backend.current
    if isinstance(shared, RedisBackend):
        return bool(shared.client.eval(TAKE_SCRIPT, 1, _key(name), token, cap, int(ttl * 1000)))
    now = time.monotonic()
    with _lock:
        held = _here.setdefault(name, {})
        for other in [t for t, lapses in held.items() if lapses <= now]:
            del held[other]
        if token in held or len(held) < cap:
            held[token] = now + ttl
            return True
        return False


def keep(name: str, tokens: list[str], *, ttl: float) -> None:
    """Renew the slots `tokens` hold (a holder whose calls outlast `ttl` renews them while it lives)."""
    if not tokens:
        return
    shared = backend.current
    if isinstance(shared, RedisBackend):
        shared.client.eval(KEEP_SCRIPT, 1, _key(name), int(ttl * 1000), *tokens)
        return
    with _lock:
        held = _here.get(name, {})
        for token in tokens:
            if token in held:
                held[token] = time.monotonic() + ttl


def give_back(name: str, token: str) -> None:
    shared = backend.current
    if isinstance(shared, RedisBackend):
        shared.client.zrem(_key(name), token)
        return
    with _lock:
        _here.get(name, {}).pop(token, None)


def _forget_all() -> None:
    with _lock:
        _here.clear()


per_process.register("slots", reset=_forget_all)  # the tests' reset (Redis's slots go with its keys)
