"""The calls log's rows: the spool's lines (gateway/usage/call_log.py) written to the database
once each, and the rows swept after their retention.

`insert_lines` writes a batch in one INSERT per table, each idempotent by the call's key (a line
replayed after a crash between the commit and the spool file's unlink is skipped), without building a
model instance per row: it runs in the usage drainer's thread, whose CPU is taken from the event loop's
(gateway/usage/writer.py `_write_rows`). A U+0000 in a call's text (the model asked, a message, a
tag), which PostgreSQL's text and jsonb refuse, is written as U+FFFD on every database: the call is
kept. A line of a deleted account is dropped (its calls went with it); a deleted group is left empty.
The prompt and reply of a group that keeps them are redacted here
(gateway/telemetry/redact.py: about 11 ms for 64 KiB of text, which the call's own way never pays)
and cut to CALL_CAPTURE_MAX_BYTES, then written to CallCapture in the same transaction.

`call_log_sweep` deletes the rows past CALL_LOG_RETENTION_DAYS and the captured text past
CALL_CAPTURE_RETENTION_DAYS, in batches (the Celery beat task `sweep-call-log`, gateway/celery.py)."""

from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta, timezone

from django.conf import settings
from django.db import DataError, IntegrityError, connections, transaction
from django.utils import timezone as django_timezone

from gateway.models import CallCapture, CallRecord, account_group_model, account_model
from gateway.state.write_behind import holds_nul, without_nul
from gateway.telemetry.redact import configured_secrets, redact

logger = logging.getLogger(__name__)

# The row of a call as the INSERT takes it, and its PostgreSQL types (read from one JSON array).
COLUMNS = ("key", "created_at", "account_id", "group_id", "surface", "model_requested", "model", "status",
           "outcome", "error_code", "latency_ms", "ttft_ms", "input_tokens", "output_tokens", "cost_units", "cached",
           "fall_throughs", "request_id", "attempts", "tags", "guard")
POSTGRESQL_TYPES = ("varchar", "epoch", "bigint", "bigint", "varchar", "varchar", "varchar", "integer",
                    "varchar", "varchar", "double precision", "double precision", "integer", "integer", "bigint",
                    "boolean", "integer", "varchar", "jsonb", "jsonb", "jsonb")
CAPTURE_COLUMNS = ("call_id", "prompt", "reply", "created_at")  # call_id: the call's key (to_field)
CAPTURE_TYPES = ("varchar", "text", "text", "epoch")
AT = 1  # created_at
NEVER_TAKEN = (DataError, OverflowError, ValueError)  # a row the database refuses whatever its state
SWEEP_BATCH = 5000


def row_of(line: dict) -> tuple:
    """A spool line's row, in COLUMNS' order (KeyError, TypeError, ValueError: a line that cannot be read)."""
    at = datetime.fromtimestamp(float(line["t"]), tz=timezone.utc)
    attempts = line.get("at") or []
    if not isinstance(attempts, list):
        raise TypeError("attempts")
    tags = line.get("tg") or {}
    if not isinstance(tags, dict):
        raise TypeError("tags")
    guard = line.get("gd") or []
    if not isinstance(guard, list):
        raise TypeError("guard")
    return (str(line["k"]), at, _id(line.get("a")), _id(line.get("g")), str(line["s"])[:40],
            str(line.get("q") or "")[:300], str(line.get("m") or "")[:300], int(line["st"]), str(line["o"])[:16],
            str(line.get("e") or "")[:64], float(line["l"]), _float(line.get("f")), int(line.get("i") or 0),
            int(line.get("ot") or 0), int(line.get("$") or 0), bool(line.get("c")), int(line.get("ft") or 0),
            str(line.get("r") or "")[:64], attempts, tags, guard)


def capture_of(line: dict, row: tuple) -> tuple | None:
    """The captured prompt and reply of a line (None when its group keeps no text): redacted, then cut."""
    if "cp" not in line and "cr" not in line:
        return None
    secrets = configured_secrets()
    return (row[0], _kept(line.get("cp"), line.get("cpn"), secrets), _kept(line.get("cr"), line.get("crn"), secrets),
            row[AT])


def _kept(text, full_bytes, secrets) -> str:
    """Redacted, then cut to CALL_CAPTURE_MAX_BYTES (the spool holds a little more, so that a credential
    across the cut is redacted whole), the cut marked with the size the text had."""
    if not isinstance(text, str) or not text:
        return ""
    text = redact(text, secrets)
    limit = settings.CALL_CAPTURE_MAX_BYTES
    data = text.encode()
    if len(data) <= limit and not full_bytes:
        return text
    return data[:limit].decode(errors="ignore") + f"\n[… cut: {full_bytes or len(data)} bytes in all]"


def _id(value) -> int | None:
    return None if value is None else int(value)


def _float(value) -> float | None:
    return None if value is None else float(value)


def insert_lines(lines: list[dict]) -> None:
    """Write the calls of spool lines once each. Raises a DatabaseError when the database cannot take
    them now (the lines stay in the spool)."""
    rows, captures = [], []
    for line in lines:
        try:
            row = row_of(line)
            capture = capture_of(line, row)
        except (KeyError, TypeError, ValueError):
            logger.warning("calls log: a line that cannot be read is skipped: %.300r", line)
            continue
        rows.append(row)
        if capture is not None:
            captures.append(capture)
    if not rows:
        return
    accounts = set(account_model().objects.filter(pk__in={r[2] for r in rows if r[2] is not None})
                   .values_list("pk", flat=True))
    groups = set(account_group_model().objects.filter(pk__in={r[3] for r in rows if r[3] is not None})
                 .values_list("pk", flat=True))
    kept = [(*row[:3], row[3] if row[3] in groups else None, *row[4:]) for row in rows
            if row[2] is None or row[2] in accounts]
    keys = {row[0] for row in kept}
    captures = [capture for capture in captures if capture[0] in keys]
    try:
        with transaction.atomic():
            _write(CallRecord, COLUMNS, POSTGRESQL_TYPES, kept)
            _write(CallCapture, CAPTURE_COLUMNS, CAPTURE_TYPES, captures)
    except (IntegrityError, *NEVER_TAKEN):  # an account deleted meanwhile, a value out of range: one by one
        for row in kept:
            try:
                with transaction.atomic():
                    _write(CallRecord, COLUMNS, POSTGRESQL_TYPES, [row])
                    _write(CallCapture, CAPTURE_COLUMNS, CAPTURE_TYPES, [c for c in captures if c[0] == row[0]])
            except (IntegrityError, *NEVER_TAKEN) as exc:  # kept, it would stop every later call behind it
                logger.error("calls log: a call the database refuses, dropped (%s): %.500r", exc,
                             dict(zip(COLUMNS, row)))


def _write(model, columns: tuple, types: tuple, rows: list[tuple]) -> None:
    """One INSERT of many rows, a key already there skipped. PostgreSQL takes them as one JSON array;
    other databases row by row. JSON columns (the attempts, the tags) go as JSON text."""
    if not rows:
        return
    connection = connections["default"]
    table = connection.ops.quote_name(model._meta.db_table)
    names = ", ".join(connection.ops.quote_name(name) for name in columns)
    if connection.vendor == "postgresql":
        values = ", ".join(_postgresql_value(i, kind) for i, kind in enumerate(types))
        data = [[v.timestamp() if isinstance(v, datetime) else v for v in row] for row in rows]
        payload = json.dumps(data)
        if "\\u0000" in payload:  # jsonb and text refuse U+0000: written as U+FFFD (gateway/state/write_behind.py)
            payload = json.dumps(without_nul(data))
        with connection.cursor() as cursor:
            cursor.execute(f"INSERT INTO {table} ({names}) SELECT {values} FROM jsonb_array_elements(%s::jsonb) AS e "
                           "ON CONFLICT DO NOTHING", [payload])
        return
    if holds_nul(rows):  # as on PostgreSQL, so that a call reads the same on either
        rows = without_nul(rows)
    adapt = connection.ops.adapt_datetimefield_value
    data = [tuple(adapt(v) if isinstance(v, datetime) else json.dumps(v) if isinstance(v, (list, dict)) else v
                  for v in row)
            for row in rows]
    with connection.cursor() as cursor:
        cursor.executemany(f"INSERT INTO {table} ({names}) VALUES ({', '.join(['%s'] * len(columns))}) "
                           "ON CONFLICT DO NOTHING", data)


def _postgresql_value(index: int, kind: str) -> str:
    """The column `index` of a row of the JSON array, as its column takes it (a time goes as seconds since
    the epoch, to the microsecond)."""
    if kind == "jsonb":
        return f"(e->{index})::jsonb"
    if kind == "epoch":
        return f"to_timestamp((e->>{index})::double precision)"
    return f"(e->>{index})::{kind}"


def call_log_sweep(*, now: datetime | None = None) -> int:
    """Delete the captured text past CALL_CAPTURE_RETENTION_DAYS, then the calls past
    CALL_LOG_RETENTION_DAYS (their text with them), SWEEP_BATCH at a time. Returns the calls deleted."""
    now = now or django_timezone.now()
    CallCapture.objects.filter(created_at__lt=now - timedelta(days=settings.CALL_CAPTURE_RETENTION_DAYS)).delete()
    before = now - timedelta(days=settings.CALL_LOG_RETENTION_DAYS)
    deleted = 0
    while ids := list(CallRecord.objects.filter(created_at__lt=before).values_list("pk", flat=True)[:SWEEP_BATCH]):
        deleted += CallRecord.objects.filter(pk__in=ids).delete()[1].get(CallRecord._meta.label, 0)
    return deleted
