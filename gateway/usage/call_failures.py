"""Daily counts of failed model calls, for the usage console: a model that failed before its
first byte and the next one was tried (`fell_through`), one that failed last in its chain so the
call was answered with an error (`chain_failed`), a refusal by the model server (`refused`: a 4xx
such as 404 for a wrong base URL, whether it was answered at once or, on /v1, the next model was
tried; /metrics counts the same attempts as outcome="refused").

Counting is on the failure path only, and costs a dictionary addition under a lock: the
proxied call's path never waits on the database for it. A timer thread of the process writes
what was counted every USAGE_FLUSH_SECONDS (one upsert per day, model and kind) and at exit.
What a process counted in its last USAGE_FLUSH_SECONDS is lost if it is killed; while the
database is down the counts are kept and written once it answers. These are figures for the
operator, not a record like the usage records (which the spool keeps whatever happens).

USAGE_BATCHED=false (the in-process tests): no timer and nothing at exit; `flush()` writes what
was counted, in the caller's transaction."""

from __future__ import annotations

import atexit
import logging
import os
import threading
from datetime import date, datetime, timezone

from django.conf import settings
from django.db import connections, transaction

logger = logging.getLogger(__name__)

FELL_THROUGH = "fell_through"
CHAIN_FAILED = "chain_failed"
REFUSED = "refused"

_counts: dict[tuple[date, str, str], int] = {}
_lock = threading.Lock()
_timer: threading.Timer | None = None


def count(*, model: str, kind: str) -> None:
    """Count one failure of `model` today (UTC). Never raises, never touches the database."""
    global _timer
    key = (datetime.now(timezone.utc).date(), model[:300], kind)
    try:
        with _lock:
            _counts[key] = _counts.get(key, 0) + 1
            if _timer is None and settings.USAGE_BATCHED:
                _timer = threading.Timer(settings.USAGE_FLUSH_SECONDS, _flush_from_timer)
                _timer.daemon = True
                _timer.name = "call-failures"
                _timer.start()
    except Exception:  # a thread that cannot start: the counts stay, written by the next flush
        logger.exception("call failure counts not scheduled for writing")


def flush() -> bool:
    """Write what was counted so far (one upsert per day, model and kind). True when nothing is
    left; when the database refuses, the counts are kept for the next flush. Never raises."""
    with _lock:
        taken = dict(_counts)
        _counts.clear()
    if not taken:
        return True
    try:
        _write(taken)
        return True
    except Exception as exc:
        with _lock:
            for key, n in taken.items():
                _counts[key] = _counts.get(key, 0) + n
        logger.warning("call failure counts kept until the database answers (%s)", exc)
        return False


def _write(counts: dict[tuple[date, str, str], int]) -> None:
    from gateway.models import CallFailureDaily

    connection = connections["default"]
    table = connection.ops.quote_name(CallFailureDaily._meta.db_table)
    rows = [(day.isoformat(), model, kind, n) for (day, model, kind), n in sorted(counts.items())]
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO {table} AS c (day, model, kind, count) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (day, model, kind) DO UPDATE SET count = c.count + excluded.count", rows)


def _flush_from_timer() -> None:
    global _timer
    with _lock:
        _timer = None
    try:
        if not flush():
            with _lock:  # try again a moment later
                if _timer is None and _counts:
                    _timer = threading.Timer(max(settings.USAGE_FLUSH_SECONDS, 1.0), _flush_from_timer)
                    _timer.daemon = True
                    _timer.start()
    finally:
        connections.close_all()  # this thread's own connection


def forget_all() -> None:
    """Drop what was counted and not written (tests)."""
    global _timer
    with _lock:
        _counts.clear()
        if _timer is not None:
            _timer.cancel()
            _timer = None


def _flush_at_exit() -> None:
    if settings.USAGE_BATCHED:
        flush()


def _after_fork() -> None:
    global _lock, _timer
    _lock = threading.Lock()
    _timer = None
    _counts.clear()  # the parent writes its own


os.register_at_fork(after_in_child=_after_fork)
atexit.register(_flush_at_exit)
