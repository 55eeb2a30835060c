"""When each API key was last used, for the console: written at most once a minute per
key, never on the call's way.

The credential check of an API call runs from the process's cache with no database query
(accounts/principal_cache.py), and this keeps it so: `note_key_use` is a clock read and a
dictionary lookup (about 0.3 µs; docs/decisions/0114-keys-in-the-console.md, "Key last used"). At
most once a minute per key and process it also puts the key's hash and the time in a small
dictionary of uses to write; a daemon thread, started by the first use, writes them every
API_KEY_USE_FLUSH_SECONDS (and once more when the process exits), one conditional UPDATE per key:

    UPDATE accounts_apikey SET last_used_at = <use> WHERE key_hash = <hash>
      AND (last_used_at IS NULL OR last_used_at <= <use> - 60 s)

so whatever the number of processes the stored time moves at most once a minute per key. The write
is a `QuerySet.update`: no signal, so the credential caches of every process stay warm (saving the
row would move the account's version and make every process read the key again).

The time shown is at most a minute plus API_KEY_USE_FLUSH_SECONDS behind the last call; a process
killed hard loses its last uses. The thread, its lock, backoff, log, fork and exit handling are
gateway/state/write_behind.py's; what is here is what to keep (the newest use per key) and how to
write it.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta, timezone

from django.conf import settings
from django.db.models import Q

from accounts.models import ApiKey
from accounts.secrets import digest
from gateway.state.write_behind import LogOnce, WriteBehind

logger = logging.getLogger(__name__)

EVERY_SECONDS = 60  # the stored time moves at most this often per key
MAX_NOTED = 100_000  # keys this process remembers noting; beyond that it starts afresh

# (account id, the key's last 8 characters, which its preview shows) → when this process last took
# a use of it. The key's own text is not kept; a replaced key of the same account is another entry.
_noted: dict[tuple[int, str], float] = {}


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
    _uses.put(digest(key), now)  # key hash → time of the use to write (the newest)


def flush() -> int:
    """Write the uses noted so far; returns how many keys' times moved. What the database
    refuses is kept for the next flush (raises its error)."""
    return _uses.flush()


def _write(taken: dict[str, float]) -> int:
    """One conditional UPDATE per key; each key written is taken out of `taken` (the rest goes back)."""
    moved = 0
    for key_hash, at in list(taken.items()):
        used = datetime.fromtimestamp(at, tz=timezone.utc)
        stale = Q(last_used_at__isnull=True) | Q(last_used_at__lte=used - timedelta(seconds=EVERY_SECONDS))
        moved += ApiKey.objects.filter(stale, key_hash=key_hash).update(last_used_at=used)
        del taken[key_hash]
    return moved


_uses = WriteBehind(
    "api-key-use", _write, merge=max, every=lambda: settings.API_KEY_USE_FLUSH_SECONDS, forget=_noted.clear,
    log=LogOnce(logger, "API key last-used times kept in this process for now: the database cannot be written (%s)",
                "API key last-used times written again"))


def forget_all() -> None:
    """Drop what this process noted and did not write (tests: the state of another process)."""
    _uses.reset()
