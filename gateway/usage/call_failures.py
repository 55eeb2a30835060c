"""Daily counts of failed model calls, for the usage console: a model that failed before its
first byte and the next one was tried (`fell_through`), one that failed last in its chain so the
call was answered with an error (`chain_failed`), a refusal by the model server (`refused`: a 4xx
such as 404 for a wrong base URL, whether it was answered at once or, on /v1, the next model was
tried; /metrics counts the same attempts as outcome="refused").

Counting is on the failure path only, and costs a dictionary addition under a lock: the
proxied call's path never waits on the database for it. A thread of the process writes what was
counted every USAGE_FLUSH_SECONDS (one upsert per day, model and kind) and at exit. What a process
counted in its last USAGE_FLUSH_SECONDS is lost if it is killed; while the database is down the
counts are kept and written once it answers. These are figures for the operator, not a record like
the usage records (which the spool keeps whatever happens). The thread, its lock, backoff, log, fork
and exit handling are gateway/state/write_behind.py's; what is here is what to count and how to
write the counts."""

from __future__ import annotations

import logging
from datetime import date, datetime, timezone

from django.conf import settings
from django.db import connections, transaction

from gateway.state.write_behind import LogOnce, WriteBehind, holds_nul, without_nul

logger = logging.getLogger(__name__)

FELL_THROUGH = "fell_through"
CHAIN_FAILED = "chain_failed"
REFUSED = "refused"


def count(*, model: str, kind: str) -> None:
    """Count one failure of `model` today (UTC). Never raises, never touches the database."""
    try:
        _counts.put((datetime.now(timezone.utc).date(), model[:300], kind), 1)
    except Exception:  # counted or not, the call goes on
        logger.exception("call failure not counted")


def flush() -> bool:
    """Write what was counted so far (one upsert per day, model and kind). True when nothing is
    left; when the database refuses, the counts are kept for the next flush. Never raises."""
    return _counts.flush_quietly()


def _write_counts(taken: dict[tuple[date, str, str], int]) -> None:
    if taken:
        _write(taken)


def _write(counts: dict[tuple[date, str, str], int]) -> None:
    from gateway.models import CallFailureDaily

    connection = connections["default"]
    table = connection.ops.quote_name(CallFailureDaily._meta.db_table)
    rows = [(day.isoformat(), model, kind, n) for (day, model, kind), n in sorted(counts.items())]
    if holds_nul(rows):  # PostgreSQL's text refuses U+0000 (gateway/state/write_behind.py)
        rows = without_nul(rows)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO {table} AS c (day, model, kind, count) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (day, model, kind) DO UPDATE SET count = c.count + excluded.count", rows)


def forget_all() -> None:
    """Drop what was counted and not written (tests)."""
    _counts.reset()


_counts = WriteBehind(
    "call-failures", _write_counts, merge=lambda old, new: old + new, every=lambda: settings.USAGE_FLUSH_SECONDS,
    log=LogOnce(logger, "call failure counts kept until the database answers (%s)",
                "call failure counts written again"))
