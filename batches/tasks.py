"""Celery tasks of the batch queue. Each is acknowledged only after it ends (`acks_late`), so a worker killed
mid-task leaves its message to be delivered again; a batch is held by a lease (batches/runner.py), so a
second delivery while the first still runs does nothing, and one after its worker died takes it up. The sweep
(beat) queues a run for every batch no worker holds, and the validation of a batch whose message was lost."""

from __future__ import annotations

import logging
from datetime import timedelta

from celery import shared_task
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from batches import checks, runner
from batches import metrics as batch_metrics
from batches.models import Batch, BatchLine
from batches.queue import QUEUE, RUN, SWEEP, VALIDATE, enqueue

log = logging.getLogger(__name__)
Status = Batch.Status
VALIDATING_GRACE_SECONDS = 120  # a batch still validating this long after it was made is validated again


@shared_task(name=VALIDATE, acks_late=True, reject_on_worker_lost=True, queue=QUEUE)
def validate_batch(batch_id: str) -> str:
    """Read and check an OpenAI batch's input file: `failed` with its errors and nothing run, or its lines
    written and the batch `in_progress`, queued to run. A batch cancelled meanwhile is `cancelled`."""
    batch = Batch.objects.select_related("account", "account__group", "input_file").filter(pk=batch_id).first()
    if batch is None:
        return "gone"
    now = timezone.now()
    if batch.status == Status.CANCELLING and not batch.lines.exists():
        Batch.objects.filter(pk=batch_id, status=Status.CANCELLING).update(status=Status.CANCELLED, cancelled_at=now)
        return "cancelled"
    if batch.status != Status.VALIDATING:
        return batch.status
    try:
        lines = checks.read_openai_lines(batch)
    except checks.LinesInvalid as invalid:
        Batch.objects.filter(pk=batch_id, status=Status.VALIDATING).update(
            status=Status.FAILED, failed_at=now, errors={"object": "list", "data": invalid.errors})
        return "failed"
    with transaction.atomic():
        BatchLine.objects.filter(batch_id=batch_id).delete()  # a try of this task killed midway
        BatchLine.objects.bulk_create(lines, batch_size=1000)
        moved = Batch.objects.filter(pk=batch_id, status=Status.VALIDATING).update(
            status=Status.IN_PROGRESS, in_progress_at=timezone.now())
        if not moved:  # cancelled while its lines were read: its run ends them at once, as cancelled
            Batch.objects.filter(pk=batch_id, status=Status.CANCELLING, in_progress_at__isnull=True).update(
                in_progress_at=timezone.now())
        enqueue(RUN, batch_id)
    return "in_progress"


@shared_task(name=RUN, acks_late=True, reject_on_worker_lost=True, queue=QUEUE)
def run_batch(batch_id: str) -> str:
    return runner.run_batch(batch_id).value


@shared_task(name=SWEEP, queue=QUEUE)
def sweep_batches() -> int:
    """A run for each running batch no worker holds (its worker died, or its message was lost), a validation
    for each batch left validating; and the batch queue's depth for /metrics. The number queued."""
    now = timezone.now()
    queued = 0
    free = Q(runner_until__isnull=True) | Q(runner_until__lt=now)
    for batch_id in Batch.objects.filter(free, status__in=(Status.IN_PROGRESS, Status.CANCELLING),
                                         upstream_id="").values_list(
            "pk", flat=True):
        enqueue(RUN, batch_id)
        queued += 1
    stale = now - timedelta(seconds=VALIDATING_GRACE_SECONDS)
    for batch_id in Batch.objects.filter(status=Status.VALIDATING, created_at__lt=stale).values_list("pk", flat=True):
        enqueue(VALIDATE, batch_id)
        queued += 1
    batch_metrics.queue_depth(BatchLine.objects.filter(status=BatchLine.Status.QUEUED).count())
    return queued


