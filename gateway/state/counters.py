"""Fixed-window counters shared by every process: the one place that counts requests.

`window_hit` checks several counters and adds one to each only when none of them has reached its
ceiling, all in one atomic step. A window starts at its first hit and lasts `window` seconds; a
refused request adds nothing. The step is taken by the backend chosen at start-up
(gateway/state/backend.py): one Lua script on Redis, so any number of web processes share one
count, or, on the embedded default (one web process), a step on the Django cache made atomic
across the processes that share its database.

Each function here hands its step to `backend.current`; the ones that have nothing to do return
before asking it.
"""

from __future__ import annotations

import time
from typing import NamedTuple

from gateway.state import backend
from gateway.state.windows import HitResult


def account_tag(account_id: int) -> str:
    """The hash tag in every key of an account's (`{a<id>}`): Redis Cluster keeps the keys of one tag in one
    slot, so one script may step an account's ceilings, version and amounts (docs/scaling.md, "Key layout")."""
    return f"{{a{account_id}}}"


def window_hit(
    counters: list[tuple[str, int]],
    window: int,
    *,
    guards: list[tuple[str, int | None]] = (),
    reads: list[str] = (),
    beside: list[str] = (),
) -> HitResult:
    """Count one hit against every `(key, ceiling)` pair, or against none of them.

    In the same atomic step: `guards` are version keys compared with the values the caller
    expects (None: any); when one differs nothing is counted and `stale` is set, so the caller
    can refresh what it cached and try again. `reads` are amount keys whose totals come back. The
    keys of a step are one account's (one Redis Cluster slot); `beside` are other integers read in
    the same round trip, not in the step (`HitResult.beside`)."""
    return backend.current.window_hit(counters, window, list(guards), list(reads), list(beside))


def hits_many(hits: list[tuple[list[tuple[str, int]], int]]) -> list[HitResult]:
    """`window_hit` for each `(counters, window)`, in order, in one round trip to Redis."""
    if not hits:
        return []
    return backend.current.hits_many(hits)


def version_bump(keys: list[str]) -> None:
    """Move version keys on, so whatever was cached under the old values is refreshed."""
    if keys:
        backend.current.version_bump(keys)


# --- Amounts: running totals per window (token quotas) ------------------------------------
#
# An amount is a cache of what the usage records add up to (gateway/limits/quotas.py): a missing key
# (never set, expired, or lost with a Redis restart) reads as None and is rebuilt from the records.
# `amounts_add` adds a record's amounts to the keys that exist; a missing key stays missing, so an
# addition never starts a total that a rebuild then counts again. But a record the rebuild does not
# see (made after it read the records) must not be lost either: while a key is being rebuilt
# (`amounts_rebuilding`), the additions to it are kept aside by record (`Pending`), and the rebuild's
# `amounts_settle` takes in those of the records it did not count.


class Pending(NamedTuple):
    """Where the additions to one owner's amounts wait while they are rebuilt (keys of its hash tag)."""

    marks: str  # amount key → until when (ms) it is being rebuilt
    additions: str  # "<amount key>|<record>" → the record's amount, made while the key was being rebuilt


def amounts_get(keys: list[str]) -> list[int | None]:
    """Current totals of `keys`; None for a key that is missing (to be rebuilt)."""
    if not keys:
        return []
    return backend.current.amounts_get(keys)


def amounts_add(additions: list[tuple[str, int]], *, pending: Pending | None = None, record: str = "") -> None:
    """Add each `(key, amount)` of `record` to its key where the key exists, all in one atomic step; a
    missing key stays missing, and where it is being rebuilt the amount waits in `pending`. Amounts
    of 0 or less are left out."""
    if additions := [(key, amount) for key, amount in additions if amount > 0]:
        backend.current.amounts_add(additions, pending if record else None, record)


def amounts_rebuilding(pending: Pending, keys: list[str], seconds: float) -> None:
    """`keys` are being rebuilt for the next `seconds`: the additions to them wait in `pending`."""
    backend.current.amounts_rebuilding(pending, keys, int((time.time() + seconds) * 1000))


def amounts_pending(pending: Pending, keys: list[str]) -> dict[str, dict[str, int]]:
    """The additions waiting for each of `keys`: key → {record: amount}."""
    return backend.current.amounts_pending(pending, keys)


def amounts_settle(pending: Pending, entries: list[tuple[str, float, int]], counted: set[str]) -> list[int]:
    """End a rebuild: set each `(key, expires_at, total)` that is still missing, to live until its
    window ends, to `total` plus the additions waiting for it whose record is not in `counted` (the
    records `total` holds); return the totals now held (a key set meanwhile keeps its own)."""
    if not entries:
        return []
    return backend.current.amounts_settle(pending, entries, sorted(counted))


def amounts_forget(keys: list[str]) -> None:
    """Drop totals that may be wrong (an addition that may not have landed): they are rebuilt."""
    if keys:
        backend.current.amounts_forget(keys)


# --- Marks: "seen within the last N seconds" (webhook duplicate window) --------------------
#
# A mark's end is stored with it, so the application's clock (not Redis's) decides when it lapses.


def mark_once(key: str, window: int) -> bool:
    """Set a mark that lives `window` seconds; False when a live one was already set."""
    return backend.current.mark_once(key, window)


def marks_many(marks: list[tuple[str, int]]) -> list[bool]:
    """`mark_once` for each `(key, window)`, in order, in one round trip to Redis."""
    if not marks:
        return []
    return backend.current.marks_many(marks)


def unmark(*keys: str) -> None:
    """Forget marks (events that were not accepted after all), in one step."""
    if keys:
        backend.current.unmark(keys)
