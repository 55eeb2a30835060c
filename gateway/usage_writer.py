"""Usage records written in batches by one background thread per process.

A call's tokens go to the quota counters at once (so quotas stay exact across processes); its
usage record joins a queue that a writer thread inserts with one `bulk_create` every
USAGE_FLUSH_SECONDS or USAGE_BATCH_SIZE records. This keeps an INSERT and a commit off every
call. What is lost if a process dies: the records of its last fraction of a second, never the
quota counts. `flush()` writes what is queued (at exit, and in tests)."""

from __future__ import annotations

import atexit
import logging
import queue
import threading

from django.conf import settings
from django.db import IntegrityError, close_old_connections, connection

from gateway.models import UsageRecord

logger = logging.getLogger(__name__)


class UsageWriter:
    def __init__(self) -> None:
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def submit(self, record: UsageRecord) -> None:
        if not settings.USAGE_BATCHED:
            _insert([record])
            return
        self._queue.put(record)
        if self._thread is None or not self._thread.is_alive():
            self._start()

    def flush(self, timeout: float = 10.0) -> None:
        """Write everything submitted so far."""
        if self._thread is None or not self._thread.is_alive():
            self._drain_here()
            return
        done = threading.Event()
        self._queue.put(done)
        done.wait(timeout)

    def _start(self) -> None:
        with self._start_lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="usage-writer", daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            batch, waiters = [], []
            self._take(item, batch, waiters)
            deadline = settings.USAGE_FLUSH_SECONDS
            while len(batch) < settings.USAGE_BATCH_SIZE and not waiters:
                try:
                    self._take(self._queue.get(timeout=deadline), batch, waiters)
                except queue.Empty:
                    break
            try:
                _insert(batch)
            finally:
                close_old_connections()
                connection.close()
                for waiter in waiters:
                    waiter.set()

    @staticmethod
    def _take(item, batch: list, waiters: list) -> None:
        (waiters if isinstance(item, threading.Event) else batch).append(item)

    def _drain_here(self) -> None:
        batch = []
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if isinstance(item, UsageRecord):
                batch.append(item)
            else:
                item.set()
        _insert(batch)


def _insert(batch: list[UsageRecord]) -> None:
    if not batch:
        return
    try:
        UsageRecord.objects.bulk_create(batch)
    except IntegrityError:  # an account was deleted while its call ran: insert the others
        for record in batch:
            try:
                record.save(force_insert=True)
            except IntegrityError:
                logger.warning("usage of deleted account %s not recorded (%s)", record.account_id, record.model)
    except Exception:  # the database is down: the quota counts stand; the records are gone
        logger.exception("could not write %d usage records", len(batch))


usage_writer = UsageWriter()
atexit.register(usage_writer.flush)
