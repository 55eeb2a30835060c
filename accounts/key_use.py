"""When each API key was last used (issue 26), for the console: written at most once a minute per
key, never on the call's way.

The credential check of an API call runs from the process's cache with no database query
(accounts/principal_cache.py), and this keeps it so: `note_key_use` is a clock read and a
dictionary lookup (about 0.3 µs; docs/decisions.md, "Key last used"). At most once a minute per key
and process it also puts the key's hash and the time in a small dictionary of uses to write; a
daemon thread, started by the first use, writes them every API_KEY_USE_FLUSH_SECONDS (and once more
when the process exits), one conditional UPDATE per key:

    UPDATE accounts_apikey SET last_used_at = <use> WHERE key_hash = <hash>
      AND (last_used_at IS NULL OR last_used_at <= <use> - 60 s)

so whatever the number of processes the stored time moves at most once a minute per key. The write
is a `QuerySet.update`: no signal, so the credential caches of every process stay warm (saving the
row would move the account's version and make every process read the key again).

The time shown is at most a minute plus API_KEY_USE_FLUSH_SECONDS behind the last call; a process
killed hard loses its last uses. With USAGE_BATCHED off (the in-process tests, as for
gateway/usage/call_failures.py) no thread runs and `flush()` writes what was noted.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from datetime import datetime, timedelta, timezone

from django.conf import settings
from django.db.models import Q

from accounts.models import ApiKey
from accounts.secrets import digest

logger = logging.getLogger(__name__)

EVERY_SECONDS = 60  # the stored time moves at most this often per key
MAX_NOTED = 100_000  # keys this process remembers noting; beyond that it starts afresh

# (account id, the key's last 8 characters, which its preview shows) → when this process last took
# a use of it. The key's own text is not kept; a replaced key of the same account is another entry.
_noted: dict[tuple[int, str], float] = {}
_pending: dict[str, float] = {}  # key hash → time of the use to write
_lock = threading.Lock()
_flusher: threading.Thread | None = None
_unwritable_logged = False


def note_key_use(account_id: int, key: str) -> None:
    """An API call was let in with `key`. No I/O: safe on the event loop."""
    now = time.time()
    seen = (account_id, key[-8:])
    last = _noted.get(seen)
    if last is not None and 0 <= now - last < EVERY_SECONDS:
        return
    if len(_noted) >= MAX_NOTED:
        _noted.clear()
    _noted[seen] = now
    _pending[digest(key)] = now
    if _flusher is None and settings.USAGE_BATCHED:
        _start_flusher()


def flush() -> int:
    """Write the uses noted so far; returns how many keys' times moved. What the database
    refuses is kept for the next flush (raises its error)."""
    with _lock:
        taken = dict(_pending)
        _pending.clear()
    moved = 0
    try:
        for key_hash, at in list(taken.items()):
            used = datetime.fromtimestamp(at, tz=timezone.utc)
            stale = Q(last_used_at__isnull=True) | Q(last_used_at__lte=used - timedelta(seconds=EVERY_SECONDS))
            moved += ApiKey.objects.filter(stale, key_hash=key_hash).update(last_used_at=used)
            del taken[key_hash]
    finally:
        if taken:
            with _lock:
                for key_hash, at in taken.items():
                    _pending[key_hash] = max(at, _pending.get(key_hash, 0.0))
    return moved


def _flush_quietly() -> None:
    global _unwritable_logged
    from django.db import close_old_connections

    try:
        flush()
        _unwritable_logged = False
    except Exception as exc:  # noqa: BLE001 — the database away: kept for the next flush
        if not _unwritable_logged:
            logger.warning("API key last-used times kept in this process for now: the database cannot be "
                           "written (%s)", type(exc).__name__)
            _unwritable_logged = True
    finally:
        close_old_connections()


def _run() -> None:
    while True:
        time.sleep(float(settings.API_KEY_USE_FLUSH_SECONDS))
        _flush_quietly()


def _start_flusher() -> None:
    global _flusher
    with _lock:
        if _flusher is not None:
            return
        _flusher = threading.Thread(target=_run, name="api-key-use", daemon=True)
        _flusher.start()
        atexit.register(_flush_quietly)


def forget_all() -> None:
    """Drop what this process noted and did not write (tests)."""
    with _lock:
        _noted.clear()
        _pending.clear()


def _after_fork() -> None:
    """A forked process starts with nothing noted and no thread (the parent writes its own)."""
    global _flusher, _lock
    _flusher = None
    _lock = threading.Lock()
    _noted.clear()
    _pending.clear()


os.register_at_fork(after_in_child=_after_fork)
