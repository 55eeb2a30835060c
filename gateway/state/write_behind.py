"""Write-behind: what a process notes on a call's way, with no I/O there, and writes later from a
daemon thread of its own. One helper for every such buffer of the gateway: the usage and calls spools'
drainer (gateway/usage/writer.py, gateway/usage/call_log.py), the daily failure counts
(gateway/usage/call_failures.py), the API keys' last uses (accounts/key_use.py), the model servers'
health (gateway/registry/server_health.py) and the deployments' loads (gateway/state/loads.py).

A buffer says what it keeps and how to write it; the helper owns the rest, the same for all:

- the thread: a daemon, started by the buffer's first use (or by `start`), named after the buffer.
  It writes every `every` seconds (a number, or a function: the setting read anew), the first time
  at once when the buffer asks (`write_at_start`: the usage drainer takes over what dead processes
  left as soon as a process starts);
- the flush under a lock: one write at a time, from the thread, a test or the exit;
- backoff: after a write that failed, the thread waits twice as long each time (at most `backoff_max`,
  never less than `every`), and is back to `every` after one that went through;
- a failure that repeats is logged once: the first of a run, then once when a write goes through
  again (`LogOnce`);
- fork safety (os.register_at_fork): a forked child starts with an empty buffer, no thread (the
  parent's is not copied; its first use starts its own) and fresh locks (the parent's thread may
  have held one at the fork);
- a write at exit (atexit), of the buffers that hold something;
- its place in the process's registry (gateway/state/per_process.py): `reset_all` empties it (and
  stops its thread), `flush_all` writes it.

Two kinds of buffer. Given `merge`, the helper keeps the buffer, a dictionary: `put(key, value)` adds
to it under a lock (`merge(old, new)` when the key waits already), and a flush hands what it took to
`write(taken)`; what `write` left in `taken` when it raised is put back for the next flush (so a
write may take out what it wrote, one by one). Without `merge`, the buffer keeps its own (a spool,
a book of loads, a record of health) and `write()` writes what it holds.

`background` is False in the in-process tests (tests/conftest.py): their data lives in each test's
transaction, which no other thread sees, so nothing is written behind their back; they call
`per_process.flush_all()` where they need the records. A test of the threads turns it on.

What a database cannot take must not cost a record: PostgreSQL's text and jsonb refuse U+0000, which a
caller may send (a model name, a message, a tag). The writers behind replace it with U+FFFD
(`without_nul`) rather than drop the row.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from gateway.state import per_process

logger = logging.getLogger(__name__)

background = True  # False: no thread is started (the in-process tests)

BACKOFF_MAX_SECONDS = 30.0
DOUBLINGS = 16  # the backoff's exponent stops growing here (the pause is capped long before)
EXIT_RETRY_SECONDS = 0.05
STOP_SECONDS = 5.0

_MISSING = object()


class Busy(Exception):
    """Another flush held the lock for longer than the caller would wait."""


def describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class LogOnce:
    """A failure that repeats, logged once: the first of a run (`failed`), then once when the thing
    works again (`recovered`). `failing` is a %-format taking the error's description."""

    def __init__(self, log: logging.Logger, failing: str, recovered: str, *, level: int = logging.WARNING) -> None:
        self.logger = log
        self.failing_message = failing
        self.recovered_message = recovered
        self.level = level
        self.failing = False

    def failed(self, exc: BaseException) -> None:
        if not self.failing:
            self.failing = True
            self.logger.log(self.level, self.failing_message, describe(exc))

    def recovered(self) -> None:
        if self.failing:
            self.failing = False
            self.logger.warning(self.recovered_message)

    def reset(self) -> None:
        self.failing = False


class WriteBehind:
    """One buffer's thread, flush, backoff, log, fork and exit handling (the module's docstring)."""

    def __init__(self, name: str, write: Callable[..., Any], *, every: float | Callable[[], float], log: LogOnce,
                 merge: Callable[[Any, Any], Any] | None = None, forget: Callable[[], object] | None = None,
                 after_fork: Callable[[], object] | None = None, pending: Callable[[], object] | None = None,
                 write_at_start: bool = False, at_exit: bool = True, exit_seconds: float = 0.0,
                 backoff_max: float = BACKOFF_MAX_SECONDS, periodic: dict | None = None) -> None:
        """`write`: the buffer's write (`write(taken)` with `merge`, else `write()`), raising when it
        failed; the thread's writes pass it `periodic` as keywords besides (a write may do less on the
        thread's turn than when a flush or the exit asks for everything). `forget`: drops what the
        buffer keeps of its own besides (tests, and a forked child unless `after_fork` says otherwise).
        `pending`: whether a buffer without `merge` holds something to write at exit. `exit_seconds`:
        how long the write at exit is retried."""
        self.name = name
        self._write = write
        self._every = every if callable(every) else (lambda: every)
        self._merge = merge
        self._forget = forget
        self._after_fork_hook = after_fork if after_fork is not None else forget
        self._pending = pending
        self.write_at_start = write_at_start
        self.at_exit = at_exit
        self.exit_seconds = exit_seconds
        self.backoff_max = backoff_max
        self.periodic = periodic or {}
        self.log = log
        self.buffer: dict = {}
        self._start_failed = False
        self._fresh()
        weak = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: (s := weak()) is not None and s._after_fork())
        _made.append(weak)
        self._entry = per_process.register(name, reset=self.reset, flush=self.flush_quietly)

    def _fresh(self) -> None:
        self.lock = threading.Lock()  # one flush at a time
        self._buffer_lock = threading.Lock()
        self._start_lock = threading.Lock()
        self._stopping = threading.Event()
        self.thread: threading.Thread | None = None
        self.failures = 0  # writes failed in a row
        self.log.reset()

    # --- the caller's side: no I/O --------------------------------------------------------------

    def put(self, key: Any, value: Any) -> None:
        """Keep `value` under `key` (merged with what waits there) and start the thread if it is not."""
        with self._buffer_lock:
            old = self.buffer.get(key, _MISSING)
            self.buffer[key] = value if old is _MISSING else self._merge(old, value)
        if self.thread is None:
            self.start()

    def start(self) -> None:
        """Start the buffer's thread, once per process (not while `background` is off). Never raises:
        a thread that cannot start leaves the buffer to the next use, and to the exit."""
        if self.thread is not None or not background:
            return
        with self._start_lock:
            if self.thread is not None:
                return
            stopping = self._stopping = threading.Event()
            thread = threading.Thread(target=self._run, args=(stopping,), name=self.name, daemon=True)
            try:
                thread.start()
            except RuntimeError:
                if not self._start_failed:
                    self._start_failed = True
                    logger.exception("%s: its thread cannot start; what it keeps waits for the next use", self.name)
                return
            self.thread = thread

    def pending(self) -> bool:
        """Whether the buffer holds something to write."""
        if self._merge is not None:
            return bool(self.buffer)
        return bool(self._pending()) if self._pending is not None else False

    # --- writing ----------------------------------------------------------------------------------

    def flush(self, *args: Any, wait: float = -1, **kwargs: Any) -> Any:
        """Write what the buffer holds, in the caller's thread, under the lock; returns what the
        buffer's write returns and raises what it raises (what was not written stays). `wait`: the
        most seconds to wait for another flush (Busy after them; -1: as long as it takes)."""
        if not self.lock.acquire(timeout=wait):
            raise Busy(self.name)
        try:
            if self._merge is None:
                return self._write(*args, **kwargs)
            with self._buffer_lock:
                taken, self.buffer = self.buffer, {}
            try:
                return self._write(taken, *args, **kwargs)
            except BaseException:
                self._give_back(taken)
                raise
        finally:
            self.lock.release()

    def flush_quietly(self, *args: Any, wait: float = -1, **kwargs: Any) -> bool:
        """`flush`, never raising: True when the write went through. A failure is logged once for
        its run (`LogOnce`) and lengthens the thread's next pause (backoff)."""
        try:
            self.flush(*args, wait=wait, **kwargs)
        except Busy:
            return False
        except Exception as exc:
            self.failures = min(self.failures + 1, DOUBLINGS)
            self.log.failed(exc)
            return False
        self.failures = 0
        self.log.recovered()
        return True

    def pause(self) -> float:
        """Seconds until the thread's next write: `every`, or after failed writes twice as long for each
        (at most `backoff_max`, never less than `every`)."""
        every = float(self._every())
        if not self.failures:
            return every
        return min(every * 2 ** self.failures, max(self.backoff_max, every))

    def _give_back(self, taken: dict) -> None:
        if not taken:
            return
        with self._buffer_lock:
            for key, value in taken.items():
                now = self.buffer.get(key, _MISSING)
                self.buffer[key] = value if now is _MISSING else self._merge(value, now)

    # --- the thread ---------------------------------------------------------------------------------

    def _run(self, stopping: threading.Event) -> None:
        from django.db import connections

        if not self.write_at_start:
            stopping.wait(self.pause())
        while not stopping.is_set():
            try:
                self.flush_quietly(**self.periodic)
            except Exception:  # never let the thread die
                logger.exception("%s: write behind", self.name)
            finally:
                try:
                    connections.close_all()  # this thread's own connection, given back
                except Exception:  # noqa: BLE001
                    pass
            stopping.wait(self.pause())

    def stop(self, timeout: float = STOP_SECONDS) -> None:
        """Stop the thread (tests); what the buffer holds stays. The next use starts another."""
        thread = self.thread
        self._stopping.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        self.thread = None

    def reset(self) -> None:
        """Drop what the buffer holds and stop its thread: as in a process just started (tests)."""
        self.stop()
        with self._buffer_lock:
            self.buffer = {}
        self.failures = 0
        self.log.reset()
        if self._forget is not None:
            self._forget()

    def _after_fork(self) -> None:
        """In a forked child: an empty buffer, no thread, fresh locks; the parent writes its own."""
        self._fresh()
        self.buffer = {}
        if self._after_fork_hook is not None:
            self._after_fork_hook()

    def close(self) -> None:
        """Stop the thread and leave the registries (a buffer made for a while: tests)."""
        self.stop()
        per_process.unregister(self._entry)
        _made[:] = [weak for weak in _made if weak() not in (None, self)]

    def write_at_exit(self) -> None:
        """What the buffer holds, written before the process ends, tried again for `exit_seconds`."""
        if not self.at_exit or not self.pending():
            return
        deadline = time.monotonic() + self.exit_seconds
        while not self.flush_quietly(wait=max(deadline - time.monotonic(), STOP_SECONDS)):
            if time.monotonic() >= deadline:
                return
            time.sleep(EXIT_RETRY_SECONDS)


_made: list[weakref.ref[WriteBehind]] = []


@atexit.register
def _write_all_at_exit() -> None:
    for weak in list(_made):
        behind = weak()
        if behind is None:
            continue
        try:
            behind.write_at_exit()
        except Exception:  # noqa: BLE001 — the others are still written
            logger.exception("%s: not written at exit", behind.name)


# --- What a database takes ------------------------------------------------------------------------

REPLACEMENT = "\ufffd"


def holds_nul(value: Any) -> bool:
    """Whether a string in `value` (lists, tuples and dicts looked into) may hold U+0000: a look at
    its repr, in C. A yes for a text that only spells a backslash and x00 costs a walk for nothing."""
    return "\\x00" in repr(value)


def without_nul(value: Any) -> Any:
    """`value` with every U+0000 in its strings (and dict keys) replaced by U+FFFD, the character that
    stands for one that could not be kept; lists, tuples and dicts are walked, other values kept."""
    if isinstance(value, str):
        return value.replace("\x00", REPLACEMENT)
    if isinstance(value, dict):
        return {without_nul(k): without_nul(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(without_nul(v) for v in value)
    return value
