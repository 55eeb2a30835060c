"""One registry of what a process keeps for itself between requests: the buffers written behind the
callers' backs (gateway/state/write_behind.py: the usage and calls spools' drainer, the daily failure
counts, the API keys' last uses, the model servers' health, the deployments' loads) and the caches of
the process (the credentials, the model registry, the cooldowns, the quota counters to drop).

Each registers itself when its module is imported, with how to drop what it holds (`reset`) and, for
a buffer, how to write what it holds now (`flush`). So a test starts from nothing with one call,
`reset_all()` (tests/conftest.py `_fresh_state`, before and after every test), and has what its
process buffered written where it needs it with another, `flush_all()`; no test resets a module by
hand, and a new cache or buffer cannot be forgotten by the tests' reset.

    per_process.register("credentials", reset=forget_all)
    per_process.flush_all()   # every buffer written, in the order they registered; True when all went
    per_process.reset_all()   # every buffer and cache of the process emptied

Nothing here runs in production but the registration: a running process never resets itself (a
forked child does, through each buffer's own fork handler), and its buffers are written by their
threads and at exit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, eq=False)
class Entry:
    name: str
    reset: Callable[[], object]
    flush: Callable[[], object] | None


_entries: list[Entry] = []  # in the order of registration


def register(name: str, *, reset: Callable[[], object], flush: Callable[[], object] | None = None) -> Entry:
    """`name`'s state: `reset` drops it, `flush` (a buffer's) writes it and says whether that went
    through (anything but False). Returns the entry, for `unregister`."""
    entry = Entry(name, reset, flush)
    _entries.append(entry)
    return entry


def unregister(entry: Entry) -> None:
    """Leave the registry (a buffer made for a while: a test's)."""
    _entries[:] = [e for e in _entries if e is not entry]


def names() -> list[str]:
    return [entry.name for entry in _entries]


def flush_all() -> bool:
    """Write what every buffer of this process holds, in the caller's thread. True when every one
    went through; a buffer that failed keeps what it holds (its own log says why)."""
    ok = True
    for entry in list(_entries):
        if entry.flush is not None and entry.flush() is False:
            ok = False
    return ok


def reset_all() -> None:
    """Drop what every buffer and cache of this process holds (tests)."""
    for entry in list(_entries):
        entry.reset()
