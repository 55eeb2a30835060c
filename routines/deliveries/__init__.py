"""Delivering an answered run's output to its targets, one small module per kind of target.

Each target of an answered run is a Delivery row, created `pending` together with the answer
(routines/runs.py) and sent by a task of its own, `routines.tasks.deliver_run_target`.
`send_delivery` is one try: it claims the row with a conditional update (a pending row that no
other task holds, with tries left), sends through the kind's `send(run, target, text)` and records
the outcome. A retryable failure (5xx, timeout) with tries left raises RetryableDeliveryError,
which Celery retries with exponential backoff (`autoretry_for`, `retry_backoff`): no task sleeps
between tries. A delivery that succeeded is never claimed again. An `inapp` message is written in
the same transaction as its outcome, so it exists once; the other kinds are sent at least once
(a worker killed between the send and its record sends again when the delivery is taken up)."""

from __future__ import annotations

import importlib
import logging
import uuid
from datetime import timedelta

from django.conf import settings
from django.db.models import F, Q
from django.utils import timezone

from gateway.telemetry import tracing
from routines import queue
from routines.deliveries.base import DeliveryFailed, scrubbed
from routines.durable import DATABASE_DOWN, durably
from routines.models import Delivery
from routines.targets import parse_target

log = logging.getLogger(__name__)

MODULES = {
    "inapp": "routines.deliveries.inapp",
    "email": "routines.deliveries.email",
    "webhook": "routines.deliveries.webhook",
    "telegram": "routines.deliveries.telegram",
    "whatsapp": "routines.deliveries.whatsapp",
}
IN_DATABASE = {"inapp"}  # sent by a database write: one transaction with the outcome


class RetryableDeliveryError(Exception):
    """A retryable DeliveryFailed with tries left: raised out of the task for Celery to retry."""


def sender_for(target: str):
    """The `send` function of the target's kind (imported on first use)."""
    try:
        kind = parse_target(target).kind
    except ValueError as exc:
        raise DeliveryFailed(f"Not a delivery target: {exc}.") from None
    return importlib.import_module(MODULES[kind]).send


def allowed_attempts() -> int:
    return max(settings.DELIVERY_RETRY_ATTEMPTS, 1)


def task_seconds() -> int:
    """Time limit of a delivery task: a few request timeouts and the retries of its record."""
    return int(settings.DELIVERY_TIMEOUT_SECONDS * 3 + settings.ROUTINE_WRITE_RETRY_SECONDS + 30)


def held_for(*, waiting: bool = False) -> timedelta:
    """How long a task holds a delivery: its time limit, plus the longest backoff when it waits
    for a retry. Past it the sweep takes the delivery up again."""
    seconds = task_seconds() + 30 + (settings.DELIVERY_RETRY_BACKOFF_MAX_SECONDS if waiting else 0)
    return timedelta(seconds=seconds)


def new_deliveries(run, targets: list[str]) -> list[Delivery]:
    """The pending deliveries of a run that was just answered (in the caller's transaction),
    each held for its first task (by that task's id), which is enqueued once the answer is saved."""
    busy_until = timezone.now() + held_for()
    return Delivery.objects.bulk_create([
        Delivery(run=run, target=target, status=Delivery.Status.PENDING, attempts=0, task_id=uuid.uuid4().hex,
                 busy_until=busy_until) for target in targets])


def enqueue_delivery(delivery_id: int, task_id: str | None = None) -> bool:
    """Enqueue a try of the delivery: as the task that holds it (`task_id`), or as a new task
    that takes it once no other task holds it."""
    try:
        queue.task(queue.DELIVER).apply_async((delivery_id,), task_id=task_id or uuid.uuid4().hex)
        return True
    except Exception:  # the broker is down: the delivery stays pending, and the sweep enqueues it
        log.exception("could not enqueue delivery %s; the sweep will", delivery_id)
        return False


def claim_delivery(delivery_id: int, task_id: str) -> Delivery | None:
    """Take a pending delivery for one try (and count it); None when it ended, has no tries left
    or another task holds it. A retry of the holding task (same id) takes it at once."""
    now = timezone.now()
    free = Q(busy_until__isnull=True) | Q(busy_until__lt=now) | Q(task_id=task_id)
    taken = (Delivery.objects.filter(free, pk=delivery_id, status=Delivery.Status.PENDING,
                                     attempts__lt=allowed_attempts())
             .update(task_id=task_id, busy_until=now + held_for(), attempts=F("attempts") + 1))
    if not taken:
        return None
    return Delivery.objects.select_related("run", "run__routine", "run__routine__account").get(pk=delivery_id)


def send_delivery(delivery_id: int, *, task_id: str, last_try: bool = False) -> int | None:
    """One try of a delivery. Returns its run's id when the delivery ended with this try (the
    caller then settles the run), None when there was nothing to do. Raises
    RetryableDeliveryError when the try failed retryably and tries are left (`last_try`: the
    task has no retries left whatever the count says)."""
    delivery = claim_delivery(delivery_id, task_id)
    if delivery is None:
        return None
    run, target = delivery.run, delivery.target
    what = f"delivery {delivery_id} of run {run.pk}"
    if tracing.ENABLED:  # the try's task span: which delivery, to what kind of target (its address may be secret)
        tracing.annotate({"gateway.delivery.id": delivery_id, "gateway.run.id": run.pk,
                          "gateway.delivery.target_kind": target.partition(":")[0],
                          "gateway.delivery.attempt": delivery.attempts})
    try:
        sender = sender_for(target)
        if parse_target(target).kind in IN_DATABASE:
            ended = durably(lambda: _sent_in_database(sender, delivery, task_id), what=what)
            return run.pk if ended else None
        sender(run, target, run.output)
        failure = None
    except DeliveryFailed as exc:
        failure = exc
    except DATABASE_DOWN:  # the record of an inapp delivery could not be written: nothing was sent
        raise
    except Exception as exc:  # a bug or an unexpected library error: the delivery records it
        log.exception("%s failed unexpectedly", what)
        failure = DeliveryFailed(f"Unexpected error: {exc.__class__.__name__}")
    if failure is not None:  # a receiver's or a provider's words: they may echo a token or the secret
        failure.message = scrubbed(failure.message, run.routine)
    if failure is None:
        ended = durably(lambda: _record(delivery, task_id, Delivery.Status.SUCCEEDED, ""), what=what)
    elif failure.retryable and not last_try and delivery.attempts < allowed_attempts():
        log.info("%s to a %s target failed (%s); it will be tried again", what, target.partition(":")[0],
                 failure.message)
        durably(lambda: _waiting(delivery, task_id, failure.message), what=what)
        raise RetryableDeliveryError(failure.message)
    else:
        ended = durably(lambda: _record(delivery, task_id, Delivery.Status.FAILED, failure.message), what=what)
    return run.pk if ended else None


def give_up_delivery(delivery_id: int, error: str) -> bool:
    """End a pending delivery that no task holds any more and has no tries left (its worker died
    on the last one)."""
    return bool(Delivery.objects.filter(pk=delivery_id, status=Delivery.Status.PENDING,
                                        attempts__gte=allowed_attempts())
                .update(status=Delivery.Status.FAILED, error=scrubbed(error), busy_until=None))


def _mine(delivery: Delivery, task_id: str):
    return Delivery.objects.filter(pk=delivery.pk, status=Delivery.Status.PENDING, task_id=task_id)


def _record(delivery: Delivery, task_id: str, status: str, error: str) -> bool:
    return bool(_mine(delivery, task_id).update(status=status, error=error, busy_until=None))


def _waiting(delivery: Delivery, task_id: str, error: str) -> None:
    _mine(delivery, task_id).update(error=error, busy_until=timezone.now() + held_for(waiting=True))


def _sent_in_database(sender, delivery: Delivery, task_id: str) -> bool:
    if not _record(delivery, task_id, Delivery.Status.SUCCEEDED, ""):
        return False  # another task ended it meanwhile: nothing written
    sender(delivery.run, delivery.target, delivery.run.output)
    return True
