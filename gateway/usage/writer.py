"""Usage records: on disk at once, in the database soon after, never only in memory.

`submit` appends the record to this process's spool file (gateway/usage/spool.py): one `write()`, no
database on the caller's path. A drainer thread per process writes the spool to the database
every USAGE_FLUSH_SECONDS (USAGE_BATCH_SIZE records per INSERT), takes over the spool files of
dead processes (when it starts, then every USAGE_ORPHAN_SCAN_SECONDS), then runs `after_cycle`:
the quotas' step that drops the counters whose addition failed (gateway/limits/quotas.py) and the
calls log's drain (gateway/usage/call_log.py), wired in gateway/apps.py. Every insert is idempotent
by the record's `key`, so a file replayed twice (a kill between the commit and the unlink) writes
nothing twice. While the database is down the records stay in the spool; the drainer retries with
a backoff of at most BACKOFF_MAX_SECONDS, logs once per outage and never gives up.

When a drainer runs on the host (gateway/usage/host_drain.py: under gunicorn, its dirty worker), the
thread's periodic cycle only lets this process's files go (the usage spool's and the calls log's) and
the drainer writes them, out of the web worker's GIL; a flush and the write at exit still write.

The spool is the durable part and stays here; the drainer's thread, its lock, backoff, log, fork and
exit handling are gateway/state/write_behind.py's, as for every buffer written behind. A value the
database can never take is dropped with an error (`insert_rows`), but never for a U+0000 in its
text, which is written as U+FFFD (`without_nul`).

The spool directory is USAGE_SPOOL_DIR/<database tag>: processes on other databases (a test run, a
benchmark) never write each other's records.

`flush()` writes what is spooled now (at exit, and in tests and the benchmark).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.db import DataError, IntegrityError, connections, transaction

from gateway.models import UsageRecord, account_model
from gateway.state.write_behind import LogOnce, WriteBehind, holds_nul, without_nul
from gateway.usage import host_drain
from gateway.usage.spool import Spool

logger = logging.getLogger(__name__)

BACKOFF_MAX_SECONDS = 2.0


def record_to_line(record: UsageRecord) -> dict:
    """The spool's line of a record. `c` (answered from the response cache), `ci` (cached input tokens),
    `cw` (input tokens written to the provider's prompt cache), `$` (cost, in COST_UNITS), `tg` (the
    call's tags) and `b` (a batch line's batch) only when set: a line without them, as every line spooled
    before they existed, is a live record not cached that cost nothing, without tags."""
    line = {"k": record.key, "a": record.account_id, "m": record.model, "s": record.surface,
            "i": record.input_tokens, "o": record.output_tokens, "r": record.request_id,
            "t": record.created_at.isoformat()}
    if record.cached:
        line["c"] = 1
    if record.cached_input_tokens:
        line["ci"] = record.cached_input_tokens
    if record.cache_write_input_tokens:
        line["cw"] = record.cache_write_input_tokens
    if record.cost_units:
        line["$"] = record.cost_units
    if record.tags:
        line["tg"] = record.tags
    if record.batch_id:
        line["b"] = record.batch_id
    return line


def record_from_line(line: dict) -> UsageRecord:
    return UsageRecord(**dict(zip(COLUMNS, full_row_from_line(line))))


# The row of a record as the INSERT takes it; `key` is unique, so a row written twice is written once.
# The columns after `created_at` came later: a row without them (an older shape) takes LATER_DEFAULTS.
COLUMNS = ("key", "account_id", "model", "surface", "input_tokens", "output_tokens", "request_id", "created_at",
           "cached", "cached_input_tokens", "cost_units", "tags", "cache_write_input_tokens", "batch_id")
POSTGRESQL_TYPES = ("varchar", "bigint", "varchar", "varchar", "integer", "integer", "varchar", "timestamptz",
                    "boolean", "integer", "bigint", "jsonb", "integer", "varchar")
AT = COLUMNS.index("created_at")  # written as text
TAGS = COLUMNS.index("tags")  # written as JSON text on SQLite
LATER_DEFAULTS = (False, 0, 0, {}, 0, "")


def row_from_line(line: dict) -> tuple:
    """The record's row up to its time (the shape the records had first)."""
    return (line["k"], int(line["a"]), line["m"], line["s"], int(line["i"]), int(line["o"]), line.get("r", ""),
            datetime.fromisoformat(line["t"]))


def full_row_from_line(line: dict) -> tuple:
    """The record's row in COLUMNS' order."""
    tags = line.get("tg") or {}
    batch_id = line.get("b") or ""
    if not isinstance(tags, dict):
        raise TypeError("tags")
    if not isinstance(batch_id, str):
        raise TypeError("batch")
    return (*row_from_line(line), bool(line.get("c", False)), int(line.get("ci", 0)), int(line.get("$", 0)), tags,
            int(line.get("cw", 0)), batch_id)


def amounts_from_line(line: dict) -> tuple[str, int, datetime, int, int]:
    """What a spooled record adds to its account's quota and budget windows (the rebuild,
    gateway/limits/quotas.py): key, account, time, tokens, cost in COST_UNITS."""
    return (line["k"], int(line["a"]), datetime.fromisoformat(line["t"]), int(line["i"]) + int(line["o"]),
            int(line.get("$", 0)))


def insert(records: list[UsageRecord]) -> None:
    insert_rows([tuple(getattr(record, name) for name in COLUMNS) for record in records])


# A row the database refuses whatever its state: PostgreSQL's DataError (a value out of its column's
# range or length); SQLite's driver refuses an integer past 64 bits before the database sees it.
NEVER_TAKEN = (DataError, OverflowError)


def insert_rows(rows: list[tuple]) -> None:
    """Write rows (in COLUMNS' order; one of an older, shorter shape takes LATER_DEFAULTS) once each: a key already in
    the database is skipped; a row whose account is gone is dropped with a warning, one the database
    can never take (DataError; on SQLite, whose columns take text of any length, the OverflowError of
    a number past 64 bits) with an error. Raises a DatabaseError when the database cannot take them
    now (down, read-only)."""
    if not rows:
        return
    rows = [row if len(row) == len(COLUMNS) else (*row, *LATER_DEFAULTS[len(row) - AT - 1:]) for row in rows]
    Account = account_model()
    accounts = set(Account.objects.filter(pk__in={row[1] for row in rows}).values_list("pk", flat=True))
    kept = []
    for row in rows:
        if row[1] in accounts:
            kept.append(row)
        else:
            logger.warning("usage of deleted account %s not recorded (%s, %s tokens)", row[1], row[2], row[4] + row[5])
    try:
        with transaction.atomic():
            _write_rows(kept)
    except (IntegrityError, *NEVER_TAKEN):  # an account deleted since it was looked up: insert the others
        for row in kept:
            try:
                with transaction.atomic():
                    _write_rows([row])
            except IntegrityError:
                logger.warning("usage of deleted account %s not recorded (%s)", row[1], row[2])
            except NEVER_TAKEN:  # kept, it would stop every later record behind it
                logger.error("usage record the database refuses, dropped: %s", dict(zip(COLUMNS, row)))


def _write_rows(rows: list[tuple]) -> None:
    """One INSERT of many rows, without building a model instance per row: the drainer thread's
    CPU is taken from the event loop's thread (the GIL), and the ORM's bulk_create spent 20 µs a
    row on it, the most of the p99 at c=16 once the reference cycles were gone (bench/README.md).
    PostgreSQL takes the batch as one JSON array (3 µs a row; arrays per column cost twice that,
    adapted value by value); other databases take it row by row."""
    if not rows:
        return
    connection = connections["default"]
    table = connection.ops.quote_name(UsageRecord._meta.db_table)
    names = ", ".join(connection.ops.quote_name(name) for name in COLUMNS)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            values = ", ".join(f"(e->>{i})::{kind}" for i, kind in enumerate(POSTGRESQL_TYPES))
            data = [[*row[:AT], row[AT].isoformat(), *row[AT + 1:]] for row in rows]
            payload = json.dumps(data)
            if "\\u0000" in payload:  # jsonb and text refuse U+0000: written as U+FFFD (gateway/state/write_behind.py)
                payload = json.dumps(without_nul(data))
            cursor.execute(f"INSERT INTO {table} ({names}) SELECT {values} FROM jsonb_array_elements(%s::jsonb) AS e "
                           "ON CONFLICT DO NOTHING", [payload])
        else:
            if holds_nul(rows):  # as on PostgreSQL, so that a record reads the same on either
                rows = without_nul(rows)
            adapt = connection.ops.adapt_datetimefield_value
            cursor.executemany(f"INSERT INTO {table} ({names}) VALUES ({', '.join(['%s'] * len(COLUMNS))}) "
                               "ON CONFLICT DO NOTHING",
                               [(*row[:AT], adapt(row[AT]), *row[AT + 1:TAGS], json.dumps(row[TAGS]), *row[TAGS + 1:])
                                for row in rows])


def _insert_lines(lines: list[dict]) -> None:
    rows = []
    for line in lines:
        try:
            rows.append(full_row_from_line(line))
        except (KeyError, TypeError, ValueError):
            logger.warning("usage spool: a record that cannot be read is skipped: %r", line)
    insert_rows(rows)


def database_tag() -> str:
    """A short name for the database records go to (its engine, host, port and name)."""
    s = settings.DATABASES["default"]
    ident = f"{s['ENGINE']}|{s.get('HOST') or ''}|{s.get('PORT') or ''}|{s['NAME']}"
    return hashlib.sha256(ident.encode()).hexdigest()[:12]


class UsageWriter:
    def __init__(self) -> None:
        # what runs after each cycle that went through, given whether the cycle let the files go (gateway/apps.py)
        self.after_cycle: list = []
        self.also_pending: list = []  # what else those steps would write (the calls log: the write at exit)
        self._spool: Spool | None = None
        self._place: tuple = (None, None)
        self._spool_lock = threading.Lock()
        self._last_scan = float("-inf")
        self.drains_host = False  # this process is the host's drainer (`drain_host`)
        self._host_lock = host_drain.DrainerLock()
        self.drainer = WriteBehind(
            "usage-drainer", self._cycle, every=lambda: settings.USAGE_FLUSH_SECONDS, backoff_max=BACKOFF_MAX_SECONDS,
            forget=self._forget, after_fork=self._after_fork, pending=self._pending, write_at_start=True,
            exit_seconds=5.0, periodic={"periodic": True},
            log=LogOnce(logger, "usage records kept in the spool until the database answers: %s",
                        "database answers again: spooled usage records written", level=logging.ERROR))

    # --- the caller's side ------------------------------------------------------------------------

    def submit(self, record: UsageRecord) -> None:
        """Keep the record so that it reaches the database; never raises."""
        try:
            self.spool().append(record_to_line(record))
        except Exception:
            logger.exception("usage spool not writable: writing the record to the database directly")
            try:
                insert([record])
            except Exception:
                logger.exception("usage record LOST (spool and database both failed): %s", record_to_line(record))
            return
        if self.drainer.thread is None:
            self.drainer.start()

    def spool(self) -> Spool:
        """This process's spool (for the database and spool directory of the settings now)."""
        place = (settings.USAGE_SPOOL_DIR, settings.DATABASES["default"]["NAME"])
        spool = self._spool
        if spool is not None and place[0] is self._place[0] and place[1] is self._place[1]:
            return spool
        directory = Path(settings.USAGE_SPOOL_DIR) / database_tag()
        if spool is None or spool.directory != directory:
            with self._spool_lock:
                if self._spool is None or self._spool.directory != directory:
                    if self._spool is not None:
                        self._spool.close()
                    self._spool = Spool(directory)
                spool = self._spool
        self._place = place
        return spool

    def spooled(self) -> list[dict]:
        """The records in this host's spool files for this database, not all yet in it."""
        return list(self.spool().records())

    def start(self) -> None:
        """Start this process's drainer thread (once; again in a forked child). It takes over
        the files of dead processes first."""
        self.drainer.start()

    def drain_host(self) -> None:
        """Make this process the host's drainer: its thread holds the drainer's lock and, each cycle,
        takes over every file let go or left in the spools (gateway/usage/host_drain.py)."""
        self.drains_host = True
        self.drainer.start()

    def flush(self, timeout: float = 10.0) -> bool:
        """Write everything spooled so far (this process's files and those of dead processes), in
        the caller's thread. True when nothing is left; never raises."""
        deadline = time.monotonic() + timeout
        while True:
            if self.drainer.flush_quietly(scan=True, wait=max(deadline - time.monotonic(), 0.1)):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the drainer thread (tests); what is spooled stays spooled."""
        self.drainer.stop(timeout)

    def close(self) -> None:
        """A writer made for a while (tests): its thread stopped, out of the registries, its files let go."""
        self.drainer.close()
        if self._spool is not None:
            self._spool.close()

    # --- the drainer's write ----------------------------------------------------------------------

    def _cycle(self, *, scan: bool | None = None, periodic: bool = False) -> None:
        """Write this process's spool (and, with `scan`, every USAGE_ORPHAN_SCAN_SECONDS, at each flush
        that is not the thread's turn, and at each cycle of the host's drainer: the files of dead
        processes and those let go), then run the `after_cycle` steps. On the thread's turn (`periodic`)
        of a process whose host has a drainer, the files are let go instead. Raises what the database
        raised (the files stay)."""
        spool = self.spool()
        if self.drains_host:
            self._host_lock.hold(spool.directory)
        elif periodic and host_drain.present(spool.directory):
            spool.release()
            for step in self.after_cycle:
                step(hand_off=True)
            return
        if scan is None:
            scan = (not periodic or self.drains_host
                    or time.monotonic() - self._last_scan >= settings.USAGE_ORPHAN_SCAN_SECONDS)
        if scan:
            spool.take_over(_insert_lines, batch=settings.USAGE_BATCH_SIZE)
            self._last_scan = time.monotonic()
        spool.replay(_insert_lines, batch=settings.USAGE_BATCH_SIZE)
        for step in self.after_cycle:
            step(hand_off=False, scan=scan)

    def _pending(self) -> bool:
        return (self._spool is not None and self._spool.pending() > 0) or any(check() for check in self.also_pending)

    def _forget(self) -> None:
        """Tests: this process's spooled records go with the test's data (its files removed)."""
        if self._spool is not None:
            self._spool.discard()
        self._last_scan = float("-inf")
        self._host_lock.let_go()
        self.drains_host = False

    def _after_fork(self) -> None:
        """The child's spool starts empty (gateway/usage/spool.py closes the parent's files in it); the
        parent's drainer lock stays the parent's."""
        self._spool_lock = threading.Lock()
        self._last_scan = float("-inf")
        self._host_lock.let_go()
        self.drains_host = False


usage_writer = UsageWriter()
