"""How busy and how fast each deployment (a model on a server) is, for the pools' policies
(gateway/registry/pools.py: least-busy, latency) and the alias admin's figures.

On a call's way nothing here does I/O. The chain loop (gateway/calls/chain.py), for chat, embeddings
and audio alike, tells this process's book when a call to a deployment starts (`started`), when its
first byte came (`first_byte`, through the attempt's record) and when it ended (`ended`): a few
dictionary writes under a lock. The policies read the book (`in_flight`, `latency`, `last_tried`):
this process's own calls, counted at once, plus what the other processes said at the last trade.

The trade: a daemon thread, started by the first pooled pick (`watch`), sends this process's news
and reads everyone's every SYNC_SECONDS, in one step of the chosen backend (`loads_trade`: one Lua
script on Redis, LOADS_SCRIPT in gateway/state/redis/client.py), never on a call's way. Shared keys,
under the counters' prefix:

    gw:loads:{loads}:seen                 process → when it last traded (ms); a process silent for
                                          STALE_SECONDS is gone, and its calls in flight no longer count
    gw:loads:{loads}:flights:<model id>   process → its calls in flight to the deployment
    gw:loads:{loads}:latency:<model id>   e: the moving average of the time to first byte (µs), t: when
                                          it moved, r: when the deployment was last tried (ms)
    gw:loads:{loads}:calls:<quarter>      model id → calls started in that quarter of an hour (the
                                          admin's share)

One hash tag for them all (`{loads}`): the one script's keys are in one Redis Cluster slot, which is
right for what they are (a step per process every SYNC_SECONDS, never per call).

So a process sees the others' calls in flight at most SYNC_SECONDS late (its own at once), and the
moving latency merges every process's times. Without Redis (the embedded default: one web process)
the backend shares nothing (`shares_loads`), and each process counts its own. The thread, its lock,
backoff (up to STALE_SECONDS), log and fork handling are gateway/state/write_behind.py's; nothing is
traded at exit (the others stop counting a process silent for STALE_SECONDS).
"""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from gateway.state import backend
from gateway.state.write_behind import LogOnce, WriteBehind

logger = logging.getLogger(__name__)

SYNC_SECONDS = 0.5
STALE_SECONDS = 5.0  # a process not heard from for so long is gone
ALPHA = 0.2  # the weight of a new time to first byte in the moving average...
DECAY_SECONDS = 10.0  # ...at least 1 - exp(-gap / DECAY_SECONDS): after a quiet while, an old average counts less
QUARTER_SECONDS = 900  # calls are counted per quarter of an hour, for the admin's share of calls
KEEP_SECONDS = 60  # the processes' and the calls in flight's keys, while nobody trades
KEEP_LATENCY_SECONDS = 86400
TAG = "{loads}"  # the hash tag of every key here: one Redis Cluster slot for the one script


@dataclass(frozen=True)
class Load:
    """A deployment's figures, for the admin."""

    in_flight: int  # calls in flight, in every process
    latency_ms: float | None  # moving average of the time to first byte; None: never measured
    recent_calls: int  # calls started in this quarter of an hour and the one before


class Book:
    """This process's book of the deployments' loads; every write holds the lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.process = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.own: dict[int, int] = {}  # model id → this process's calls in flight
        self.others: dict[int, int] = {}  # model id → the other processes' calls in flight, at the last trade
        self.published: set[int] = set()  # deployments whose own count the shared state holds (not 0)
        self.ewma: dict[int, float] = {}  # model id → moving time to first byte (seconds)
        self.moved: dict[int, float] = {}  # model id → when it moved (Unix time)
        self.tried: dict[int, float] = {}  # model id → last tried (Unix time), here or anywhere
        self.samples: dict[int, tuple[float, int]] = {}  # times to first byte since the last trade: (sum, count)
        self.calls: dict[int, int] = {}  # calls started since the last trade
        self.recent: dict[int, int] = {}  # calls of the last two quarters, at the last trade
        self.quarters: dict[int, dict[int, int]] = {}  # quarter → model id → calls (counted here: no Redis)
        self.watched: set[int] = set()  # deployments of the pools this process picked from


_book = Book()


# --- On a call's way: no I/O --------------------------------------------------------------------


def started(model_id: int) -> None:
    """A call to the deployment starts (before its first byte)."""
    book = _book
    with book.lock:
        book.own[model_id] = book.own.get(model_id, 0) + 1
        book.calls[model_id] = book.calls.get(model_id, 0) + 1
        book.tried[model_id] = time.time()


def first_byte(model_id: int, seconds: float) -> None:
    """The deployment's first byte came `seconds` after the call started."""
    book = _book
    now = time.time()
    with book.lock:
        before = book.ewma.get(model_id)
        if before is None:
            book.ewma[model_id] = seconds
        else:
            gap = max(0.0, now - book.moved.get(model_id, now))  # the wall clock may step back (NTP)
            weight = max(ALPHA, 1 - math.exp(-gap / DECAY_SECONDS))
            book.ewma[model_id] = before + (seconds - before) * weight
        book.moved[model_id] = now
        total, count = book.samples.get(model_id, (0.0, 0))
        book.samples[model_id] = (total + seconds, count + 1)


def ended(model_id: int) -> None:
    """A call to the deployment ended (failed before its first byte, or its reply is over)."""
    book = _book
    with book.lock:
        count = book.own.get(model_id, 0) - 1
        if count > 0:
            book.own[model_id] = count
        else:
            book.own.pop(model_id, None)


def in_flight(model_id: int) -> int:
    """Calls in flight to the deployment: this process's now, the others' at the last trade."""
    return _book.own.get(model_id, 0) + _book.others.get(model_id, 0)


def latency(model_id: int) -> float | None:
    """The deployment's moving time to first byte (seconds); None when never measured."""
    return _book.ewma.get(model_id)


def last_tried(model_id: int) -> float:
    """When the deployment was last called, here or (at the last trade) anywhere; 0 when never."""
    return _book.tried.get(model_id, 0.0)


def tried_now(model_id: int) -> None:
    """The deployment is about to be probed: this process's other calls do not probe it too."""
    _book.tried[model_id] = time.time()


def watch(model_ids: Iterable[int]) -> None:
    """These deployments' shared figures are wanted (a pool was picked from): the trade reads them."""
    book = _book
    if not book.watched.issuperset(model_ids):
        with book.lock:
            book.watched.update(model_ids)
    if _trades.thread is None:
        _trades.start()


# --- The trade ------------------------------------------------------------------------------------


def trade() -> bool:
    """Send this process's news, read everyone's loads, in one step of the backend. False when the
    backend shares none (each process then counts its own). Raises what a failing Redis raises;
    the news not sent is kept for the next trade."""
    return _trades.flush()


def _trade() -> bool:
    book = _book
    now = time.time()
    with book.lock:
        ids = sorted(book.watched | book.own.keys() | book.published | book.samples.keys() | book.calls.keys())
        samples, book.samples = book.samples, {}
        calls, book.calls = book.calls, {}
        owns = {i: book.own.get(i, 0) if book.own.get(i, 0) > 0 or i in book.published else -1 for i in ids}
        tried = {i: book.tried.get(i, 0.0) for i in ids}
    if not ids:
        return False
    store = backend.current
    if not store.shares_loads:
        _count_here(calls, now)
        return False
    quarter = int(now // QUARTER_SECONDS)
    keys = [f"loads:{TAG}:seen", f"loads:{TAG}:calls:{quarter}", f"loads:{TAG}:calls:{quarter - 1}"]
    args: list = [book.process, int(now * 1000), int(STALE_SECONDS * 1000), ALPHA, int(DECAY_SECONDS * 1000),
                  KEEP_SECONDS * 1000, KEEP_LATENCY_SECONDS * 1000, 2 * QUARTER_SECONDS * 1000, len(ids)]
    for i in ids:
        total, count = samples.get(i, (0.0, 0))
        keys += [f"loads:{TAG}:flights:{i}", f"loads:{TAG}:latency:{i}"]
        args += [i, owns[i], calls.get(i, 0), int(total * 1_000_000), count, int(tried[i] * 1000)]
    try:
        out = store.loads_trade(keys, args)
    except Exception:
        _keep_for_later(samples, calls)
        raise
    with book.lock:
        for index, i in enumerate(ids):
            if owns[i] > 0:
                book.published.add(i)
            elif owns[i] == 0:
                book.published.discard(i)
            others, latency_us, tried_ms, recent = out[4 * index:4 * index + 4]
            book.others[i] = others
            if latency_us >= 0 and i not in book.samples:  # no time of its own since: everyone's average
                book.ewma[i], book.moved[i] = latency_us / 1_000_000, now
            book.tried[i] = max(book.tried.get(i, 0.0), tried_ms / 1000)
            book.recent[i] = recent
    return True


def _keep_for_later(samples: dict[int, tuple[float, int]], calls: dict[int, int]) -> None:
    book = _book
    with book.lock:
        for i, (total, count) in samples.items():
            more = book.samples.get(i, (0.0, 0))
            book.samples[i] = (total + more[0], count + more[1])
        for i, count in calls.items():
            book.calls[i] = book.calls.get(i, 0) + count


def _count_here(calls: dict[int, int], now: float) -> None:
    """Without shared loads: this process's calls of the last two quarters."""
    book = _book
    quarter = int(now // QUARTER_SECONDS)
    with book.lock:
        counts = book.quarters.setdefault(quarter, {})
        for i, count in calls.items():
            counts[i] = counts.get(i, 0) + count
        for old in [q for q in book.quarters if q < quarter - 1]:
            del book.quarters[old]
        book.recent = {}
        for counted in book.quarters.values():
            for i, count in counted.items():
                book.recent[i] = book.recent.get(i, 0) + count


def trade_quietly() -> None:
    """`trade`, never raising: Redis away, each process counts its own meanwhile (logged once)."""
    _trades.flush_quietly()


# --- For the admin and the tests --------------------------------------------------------------------


def board(model_ids: Iterable[int]) -> dict[int, Load]:
    """Each deployment's figures, traded afresh (the admin's page; one round trip)."""
    ids = list(model_ids)
    watch(ids)
    trade_quietly()
    book = _book
    return {i: Load(in_flight(i), None if (s := book.ewma.get(i)) is None else s * 1000, book.recent.get(i, 0))
            for i in ids}


def forget_all() -> None:
    """Drop this process's book (tests; a forked process): nothing watched, nothing in flight."""
    global _book
    _book = Book()


_trades = WriteBehind(
    "deployment-loads", _trade, every=SYNC_SECONDS, forget=forget_all, at_exit=False, backoff_max=STALE_SECONDS,
    log=LogOnce(logger, "deployment loads kept in this process for now: the shared state cannot be reached (%s)",
                "deployment loads shared again"))
