"""Writes that must land: a run's answer, a delivery's outcome, a run's end. Each is one
transaction, tried again with a doubling wait while the database is unreachable (a restart, a
failover), up to a deadline that keeps the task inside its time limit. Past it the error is
logged and raised, never swallowed: the sweep (routines/runs.py) takes up what was left."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction

log = logging.getLogger(__name__)

DATABASE_DOWN = (OperationalError, InterfaceError)
FIRST_WAIT_SECONDS = 0.2
MOST_WAIT_SECONDS = 5.0

T = TypeVar("T")


def durably(write: Callable[[], T], *, what: str, deadline: float | None = None) -> T:
    """`write()` in a transaction, retried while the database is unreachable for at most
    ROUTINE_WRITE_RETRY_SECONDS, and not past `deadline` (time.monotonic()) when one is given."""
    limit = time.monotonic() + settings.ROUTINE_WRITE_RETRY_SECONDS
    deadline = limit if deadline is None else min(deadline, limit)
    wait = FIRST_WAIT_SECONDS
    tries = 0
    while True:
        tries += 1
        try:
            with transaction.atomic():
                return write()
        except DATABASE_DOWN as exc:
            left = deadline - time.monotonic()
            if left <= 0:
                log.error("%s: the database is still unreachable after %d tries; given up (%s)", what, tries, exc)
                raise
            log.warning("%s: the database is unreachable (%s); trying again in %.1fs", what, exc, min(wait, left))
            _drop_connection()
            time.sleep(min(wait, left))
            wait = min(wait * 2, MOST_WAIT_SECONDS)


def _drop_connection() -> None:
    """A broken connection is closed so the next try opens a new one (not inside an outer
    transaction: that one is the caller's to end)."""
    if not connection.in_atomic_block:
        try:
            connection.close()
        except Exception:  # closing a dead connection may fail too; the next try reconnects
            pass
