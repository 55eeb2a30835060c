"""How a batch ends: cancelled by its owner, expired when its window closes, or run to its last line; then
finalized once, an OpenAI batch writing its output and error files (JSON lines carrying each request's
`custom_id`, as OpenAI's SDK reads them). Every step is a conditional update, so that two workers (one that
lost its hold, one that took it) end a batch once."""

from __future__ import annotations

import json
import tempfile
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from batches import forward
from batches.models import Batch, BatchLine
from batches.queue import RUN, VALIDATE, enqueue
from gateway.files import store
from routines.durable import durably

Status, Line = Batch.Status, BatchLine.Status
CANCELLED_MESSAGE = "The batch was cancelled before this request ran."
EXPIRED_MESSAGE = "The batch's completion window closed before this request ran."


def cancel(batch: Batch) -> Batch:
    """Ask a batch to stop: `cancelling` until its lines in flight have ended (they are billed), the rest then
    `cancelled` by its worker. A batch still being validated stops there; an ended batch is left as it is. A
    batch forwarded to a cloud's batch API is cancelled there (a network call, batches/forward.py), and ended
    here by its poll once the cloud has ended it."""
    now = timezone.now()
    was = batch.status
    moved = was in (Status.VALIDATING, Status.IN_PROGRESS) and Batch.objects.filter(pk=batch.pk, status=was).update(
        status=Status.CANCELLING, cancelling_at=now)
    batch.refresh_from_db()
    if moved and batch.upstream_id:
        forward.cancel_upstream(batch)
    elif was in (Status.VALIDATING, Status.IN_PROGRESS):
        enqueue(VALIDATE if was == Status.VALIDATING else RUN, batch.pk)
    return batch


def end_waiting(batch_id: str, line_status: str) -> int:
    """Every line not yet run ends as `line_status` (cancelled or expired); the lines in flight are left."""
    return BatchLine.objects.filter(batch_id=batch_id, status=Line.QUEUED).update(
        status=line_status, ended_at=timezone.now(), claim="")


def finalize(batch_id: str, *, end_as: str) -> None:
    """Once every line has ended: `finalizing`, the files written (an OpenAI batch), then `end_as`
    (completed, cancelled or expired) with its timestamp. Done twice, the second does nothing."""
    now = timezone.now()
    moved = Batch.objects.filter(pk=batch_id, status__in=(Status.IN_PROGRESS, Status.CANCELLING)).update(
        status=Status.FINALIZING, finalizing_at=now, runner_until=None)
    batch = Batch.objects.select_related("account").get(pk=batch_id)
    if not moved and batch.status != Status.FINALIZING:
        return
    files = _write_files(batch) if batch.kind == Batch.Kind.OPENAI else {}
    stamp = {Status.COMPLETED: "completed_at", Status.CANCELLED: "cancelled_at", Status.EXPIRED: "expired_at"}[end_as]
    durably(lambda: Batch.objects.filter(pk=batch_id, status=Status.FINALIZING).update(
        status=end_as, **{stamp: timezone.now()}, **files), what=f"batch {batch_id}: its end")


def _write_files(batch: Batch) -> dict:
    """The output file (the answered lines) and the error file (the others), each only when it has a line;
    a file written by an earlier try of the same finalizing is replaced."""
    files = {}
    for field, statuses, suffix in (("output_file", (Line.SUCCEEDED,), "output"),
                                    ("error_file", (Line.ERRORED, Line.CANCELLED, Line.EXPIRED), "error")):
        lines = BatchLine.objects.filter(batch=batch, status__in=statuses).order_by("index")
        if not lines.exists():
            continue
        with tempfile.SpooledTemporaryFile(max_size=8 * 1024 * 1024) as content:
            for line in lines.iterator(chunk_size=1000):
                content.write(json.dumps(output_line(batch, line), separators=(",", ":")).encode() + b"\n")
            size = content.tell()
            content.seek(0)
            stored = store.save_file(batch.account, content, filename=f"{batch.pk}_{suffix}.jsonl", size=size,
                                     purpose=store.BATCH_OUTPUT, quota=False, expires_at=store.output_expiry())
        old = getattr(batch, f"{field}_id")
        files[f"{field}_id"] = stored.pk
        if old:
            transaction.on_commit(lambda old=old: store.delete_file_id(old))
    return files


def output_line(batch: Batch, line: BatchLine) -> dict:
    """One line of an OpenAI batch's output or error file."""
    entry = {"id": f"batch_req_{batch.pk.removeprefix('batch_')}{line.index:06d}", "custom_id": line.custom_id,
             "response": None, "error": None}
    if line.status in (Line.CANCELLED, Line.EXPIRED):
        cancelled = line.status == Line.CANCELLED
        entry["error"] = {"code": "batch_cancelled" if cancelled else "batch_expired",
                          "message": CANCELLED_MESSAGE if cancelled else EXPIRED_MESSAGE}
    else:
        entry["response"] = {"status_code": line.status_code, "request_id": line.request_id, "body": line.result}
    return entry


def expired(batch: Batch, now: datetime | None = None) -> bool:
    return (now or timezone.now()) >= batch.expires_at
