"""Running a batch: one worker of the batch queue holds it at a time, claims its lines and makes each one's
call (batches/line_call.py), a few at once.

- The hold is a lease on the batch row (`runner`, `runner_until`), taken by a conditional update and renewed
  while the worker runs; a worker killed mid-batch leaves a lease that lapses, and the next run of the batch
  (its task delivered again, or the sweep) takes it. Lines the dead worker had in flight go back to the queue:
  their answers had not been saved, and the usage record a line takes is keyed by the line, so a line
  metered before its worker died and run again is one record.
- A line is claimed by a conditional update (queued → running, with the worker's token), and its answer is
  saved only while that claim holds: a line is answered once.
- At most BATCH_CONCURRENCY lines of a batch are in flight, and BATCH_CONCURRENCY_PER_SERVER lines of all
  batches to any one model server, across the batch workers (a slot each, gateway/state/slots.py), so the
  batch queue takes a bounded share of a server; its workers are not the live calls' (they never wait
  behind a batch).
- Before each round of claims the account's token quotas and budgets are read: a batch that reached one
  waits (its lines stay queued, `waiting_for` says why) and is looked at again after BATCH_WAIT_SECONDS. The
  per-minute ceilings do not apply to a batch.
- A line refused by the server in a way worth trying again (429, 5xx) is retried after a doubling wait, up to
  BATCH_LINE_ATTEMPTS tries; its last answer is kept.
- A worker gives the batch back after BATCH_SLICE_SECONDS, or at once when asked to stop, and queues its next
  slice, so batches share the queue's workers and a deploy waits only for the lines in flight; cancelled,
  expired or run to its last line, the batch is finalized (batches/finish.py)."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
import uuid
from datetime import timedelta
from enum import Enum

from celery import signals
from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from batches import finish
from batches import metrics as batch_metrics
from batches.checks import capability_of
from batches.line_call import Answer, call_line
from batches.models import Batch, BatchLine
from batches.queue import QUEUE, RUN, enqueue
from gateway.limits.quotas import quota_check
from gateway.registry.routing import plan_chain
from gateway.state import slots
from gateway.state.workers import in_worker
from gateway.web.errors import ApiError, outage_of
from routines.durable import durably

log = logging.getLogger(__name__)

Status, Line = Batch.Status, BatchLine.Status
RETRYABLE = {429, 500, 502, 503, 504, 529}
OUTAGE_PAUSE_SECONDS = 2.0  # a round that met an outage of Redis or the database waits this long
SLOT_FIRST_WAIT, SLOT_MOST_WAIT = 0.02, 0.5  # a line waiting for its server's slot looks again after these
# The batch (a cancel, its window) is read and its hold renewed at most this often, not at each line's end: a
# worker's database trips per line stay few (the live calls share the database and the CPU), a cancel is seen
# within this, and the hold (BATCH_LEASE_SECONDS) outlasts it. The quota is read before every claim.
LOOK_EVERY_SECONDS = 1.0
stopping = threading.Event()  # the worker was asked to stop: batches are given back at their next round


@signals.worker_init.connect
def _lower_priority(sender=None, **_kwargs) -> None:
    """A worker that takes the batch queue alone runs at a lower CPU priority (BATCH_WORKER_NICENESS): on a
    host it shares with web processes, the live calls get the CPU first and a batch takes what is left."""
    queues = getattr(getattr(getattr(sender, "app", None), "amqp", None), "queues", None)
    taken = set(getattr(queues, "consume_from", None) or ())
    if taken == {QUEUE} and settings.BATCH_WORKER_NICENESS > 0:
        os.nice(settings.BATCH_WORKER_NICENESS)
        log.info("the batch worker runs at niceness %d", os.getpriority(os.PRIO_PROCESS, 0))


@signals.worker_shutting_down.connect
def _worker_stopping(**_kwargs) -> None:
    """A batch's worker asked to stop (a deploy, Ctrl-C) gives its batch back at once, for the next worker to
    go on with: its lines in flight end first, no new one starts. The batch queue's worker runs its tasks in
    its own process (`--pool threads`), where this signal is sent."""
    stopping.set()


class Outcome(str, Enum):
    ENDED = "ended"  # finalized
    HELD = "held"  # another worker holds it, or it is not running
    WAITING = "waiting"  # a quota or a budget reached: looked at again later
    SLICED = "sliced"  # given back after its slice; its next slice is queued
    LOST = "lost"  # the lease was taken by another worker meanwhile


def take(batch_id: str, token: str) -> bool:
    now = timezone.now()
    lapsed = Q(runner_until__isnull=True) | Q(runner_until__lt=now)
    return bool(Batch.objects.filter(lapsed, pk=batch_id, status__in=(Status.IN_PROGRESS, Status.CANCELLING),
                                     upstream_id="")  # a batch forwarded to a cloud runs there
                .update(runner=token, runner_until=now + timedelta(seconds=settings.BATCH_LEASE_SECONDS)))


def renew(batch_id: str, token: str) -> bool:
    until = timezone.now() + timedelta(seconds=settings.BATCH_LEASE_SECONDS)
    return bool(Batch.objects.filter(pk=batch_id, runner=token).update(runner_until=until))


def release(batch_id: str, token: str) -> None:
    Batch.objects.filter(pk=batch_id, runner=token).update(runner="", runner_until=None)


def requeue_lost(batch_id: str, token: str) -> int:
    """Lines left running by a worker that no longer holds the batch: their answers were never saved."""
    return BatchLine.objects.filter(batch_id=batch_id, status=Line.RUNNING).exclude(claim=token).update(
        status=Line.QUEUED, claim="")


def run_batch(batch_id: str) -> Outcome:
    """Run the batch for one slice, if no other worker holds it (see the module's docstring)."""
    token = uuid.uuid4().hex
    if not take(batch_id, token):
        return Outcome.HELD
    try:
        requeue_lost(batch_id, token)
        outcome = asyncio.run(Driver(batch_id, token).drive())
    finally:
        release(batch_id, token)
    if outcome in (Outcome.SLICED, Outcome.WAITING):  # the next slice, or the next look at a waiting batch
        enqueue(RUN, batch_id, countdown=settings.BATCH_WAIT_SECONDS if outcome == Outcome.WAITING else None)
    return outcome


class Driver:
    def __init__(self, batch_id: str, token: str) -> None:
        self.batch_id = batch_id
        self.token = token
        self.batch = Batch.objects.select_related("account", "account__group").get(pk=batch_id)
        self.in_flight: set[asyncio.Task] = set()
        self.server_of_model: dict[str, str] = {}
        self.held: dict[str, str] = {}  # the server slots the lines in flight hold: token -> slot name
        self.looked_at = float("-inf")  # when the batch and the quota were last read (time.monotonic())

    async def drive(self) -> Outcome:
        ends_at = time.monotonic() + settings.BATCH_SLICE_SECONDS
        outcome = None
        while outcome is None:
            outcome = await self._round(ends_at)
        await self._settle()
        if outcome == Outcome.ENDED:
            await in_worker(self._end)()
        return outcome

    async def _round(self, ends_at: float) -> Outcome | None:
        """One round: the batch read again (a cancel, the window), the quota read, lines claimed up to the
        room in flight, then a wait for one to end. An Outcome ends the slice."""
        now = time.monotonic()
        if now >= self.looked_at + LOOK_EVERY_SECONDS:  # the batch, read again at most this often
            try:
                held, status = await in_worker(self._refresh)()
            except Exception as exc:
                if outage_of(exc) is None:
                    raise
                await self._pause()
                return None
            if not held:
                return Outcome.LOST
            if status == Status.CANCELLING or finish.expired(self.batch):
                return Outcome.ENDED
            self.looked_at = now
        if now >= ends_at or stopping.is_set():
            return Outcome.SLICED
        waiting = await self._quota_refusal()
        if waiting is None:  # an outage: nothing claimed this round
            await self._pause()
            return None
        if waiting:
            await in_worker(self._wait_for)(waiting)
            return Outcome.WAITING
        room = settings.BATCH_CONCURRENCY - len(self.in_flight)
        claimed = await in_worker(self._claim)(room) if room > 0 else []
        for line in claimed:
            task = asyncio.create_task(self._run_line(line))
            self.in_flight.add(task)
        if not self.in_flight:
            next_try = await in_worker(self._next_try)()
            if next_try is None:
                return Outcome.ENDED
            await asyncio.sleep(max(0.05, min(next_try, settings.BATCH_LEASE_SECONDS / 3)))
            return None
        done, _ = await asyncio.wait(self.in_flight, timeout=settings.BATCH_LEASE_SECONDS / 3,
                                     return_when=asyncio.FIRST_COMPLETED)
        self.in_flight -= done
        for task in done:
            task.result()  # a line's own failure was kept on it; what escapes here is the driver's to raise
        return None

    async def _pause(self) -> None:
        await asyncio.sleep(OUTAGE_PAUSE_SECONDS)

    async def _settle(self) -> None:
        """Wait for the lines in flight (a cancelled or expired batch bills what it had sent), the hold and the
        slots renewed meanwhile: a slow model's call must not let another worker take its line."""
        while self.in_flight:
            done, _ = await asyncio.wait(self.in_flight, timeout=settings.BATCH_LEASE_SECONDS / 3)
            self.in_flight -= done
            if self.in_flight:
                try:
                    await in_worker(self._refresh)()
                except Exception as exc:
                    if outage_of(exc) is None:
                        raise

    def _refresh(self) -> tuple[bool, str]:
        held = renew(self.batch_id, self.token)
        self._keep_slots()
        self.batch.refresh_from_db(fields=["status", "expires_at", "waiting_for"])
        return held, self.batch.status

    async def _quota_refusal(self) -> str | None:
        """The refusal of a token quota or a budget the account reached, '' when none, None on an outage."""
        try:
            await in_worker(quota_check)(account=self.batch.account)
        except ApiError as refused:
            return refused.message
        except Exception as exc:
            if outage_of(exc) is None:
                raise
            return None
        if self.batch.waiting_for:
            await in_worker(self._wait_for)("")
        return ""

    def _wait_for(self, reason: str) -> None:
        Batch.objects.filter(pk=self.batch_id).update(waiting_for=reason)
        self.batch.waiting_for = reason

    def _claim(self, room: int) -> list[BatchLine]:
        now = timezone.now()
        ready = Q(next_try_at__isnull=True) | Q(next_try_at__lte=now)
        lines = list(BatchLine.objects.filter(ready, batch_id=self.batch_id, status=Line.QUEUED).order_by("index")
                     .only("id", "index", "custom_id", "body", "tries")[:room])
        if not lines:
            return []
        ids = [line.pk for line in lines]
        taken = BatchLine.objects.filter(id__in=ids, status=Line.QUEUED).update(status=Line.RUNNING, claim=self.token)
        if taken == len(lines):  # the batch's holder is the only claimer: read once, claimed whole
            return lines
        return list(BatchLine.objects.filter(id__in=ids, claim=self.token, status=Line.RUNNING).order_by("index"))

    def _next_try(self) -> float | None:
        """Seconds until a waiting line may be tried again (0: one is ready), None when no line waits."""
        line = (BatchLine.objects.filter(batch_id=self.batch_id, status__in=(Line.QUEUED, Line.RUNNING))
                .order_by("next_try_at").first())
        if line is None:
            return None
        if line.status == Line.RUNNING or line.next_try_at is None:
            return 0.0
        return max(0.0, (line.next_try_at - timezone.now()).total_seconds())

    def _server_of(self, model: str) -> str:
        """The server the model is served by first (its chain's first target); '' when the group may not use
        it (the call itself answers why, and holds no server's slot)."""
        try:
            chain = plan_chain(model, group=self.batch.account.group, capability=capability_of(self.batch.endpoint))
        except ApiError:
            return ""
        return chain[0].server.name if chain else ""

    async def _slot(self, line: BatchLine) -> str:
        """Wait for a slot of the server the line's model goes to (at most BATCH_CONCURRENCY_PER_SERVER
        lines of every batch at once, across the batch workers); the slot's name, '' when none is needed."""
        model = str(line.body.get("model", ""))
        if model not in self.server_of_model:
            self.server_of_model[model] = await in_worker(self._server_of)(model)
        server = self.server_of_model[model]
        if not server:
            return ""
        name, token = f"batch-server:{server}", f"{self.token}:{line.pk}"
        wait = SLOT_FIRST_WAIT
        while not await in_worker(slots.take)(name, token, cap=settings.BATCH_CONCURRENCY_PER_SERVER,
                                              ttl=settings.BATCH_LEASE_SECONDS):
            await asyncio.sleep(wait)
            wait = min(wait * 2, SLOT_MOST_WAIT)
        self.held[token] = name
        return name

    def _keep_slots(self) -> None:
        by_name: dict[str, list[str]] = {}
        for token, name in self.held.items():
            by_name.setdefault(name, []).append(token)
        for name, tokens in by_name.items():
            slots.keep(name, tokens, ttl=settings.BATCH_LEASE_SECONDS)

    async def _run_line(self, line: BatchLine) -> None:
        token = f"{self.token}:{line.pk}"
        try:
            try:
                name = await self._slot(line)
                answer = await call_line(path=self.batch.endpoint, body=line.body, account=self.batch.account,
                                         batch_id=self.batch_id, custom_id=line.custom_id, usage_key=line.usage_key)
            finally:
                if (name := self.held.pop(token, "")):
                    await in_worker(slots.give_back)(name, token)
        except Exception as exc:  # an outage, or a fault of ours: the line goes back, tried again later
            log.warning("batch %s line %s: its call failed (%s); tried again", self.batch_id, line.index,
                        exc.__class__.__name__, exc_info=outage_of(exc) is None)
            await in_worker(self._back)(line, count=outage_of(exc) is None)
            return
        await in_worker(self._keep)(line, answer)

    def _back(self, line: BatchLine, *, count: bool) -> None:
        tries = line.tries + (1 if count else 0)
        if count and tries >= settings.BATCH_LINE_ATTEMPTS:
            self._keep(line, Answer(500, {"error": {"message": "The gateway could not make this request.",
                                                    "type": "server_error", "code": "internal_error"}}, ""))
            return
        wait = settings.BATCH_RETRY_SECONDS * (2 ** max(tries - 1, 0))
        durably(lambda: BatchLine.objects.filter(pk=line.pk, claim=self.token, status=Line.RUNNING).update(
            status=Line.QUEUED, claim="", tries=tries, next_try_at=timezone.now() + timedelta(seconds=wait)),
            what=f"batch {self.batch_id} line {line.index}: back to the queue")

    def _keep(self, line: BatchLine, answer: Answer) -> None:
        """Save the line's answer while its claim holds; a retryable one sends it back to wait instead."""
        mine = BatchLine.objects.filter(pk=line.pk, claim=self.token, status=Line.RUNNING)
        if answer.waits:  # a quota or a budget: not the line's fault, nor a try
            durably(lambda: mine.update(status=Line.QUEUED, claim=""), what=f"batch {self.batch_id}: line back")
            return
        tries = line.tries + 1
        if answer.status in RETRYABLE and tries < settings.BATCH_LINE_ATTEMPTS:
            wait = settings.BATCH_RETRY_SECONDS * (2 ** (tries - 1))
            durably(lambda: mine.update(status=Line.QUEUED, claim="", tries=tries,
                                        next_try_at=timezone.now() + timedelta(seconds=wait)),
                    what=f"batch {self.batch_id} line {line.index}: tried again later")
            batch_metrics.line_ended("retried")
            return
        status = Line.SUCCEEDED if 200 <= answer.status < 300 else Line.ERRORED
        durably(lambda: mine.update(status=status, tries=tries, status_code=answer.status, result=answer.body,
                                    request_id=answer.request_id, ended_at=timezone.now()),
                what=f"batch {self.batch_id} line {line.index}: its answer")
        batch_metrics.line_ended(status)

    def _end(self) -> None:
        """Cancelled, expired or done: the lines not yet run end so, then the batch is finalized."""
        self.batch.refresh_from_db(fields=["status", "expires_at"])
        if self.batch.status == Status.CANCELLING:
            finish.end_waiting(self.batch_id, Line.CANCELLED)
            end_as = Status.CANCELLED
        elif finish.expired(self.batch):
            finish.end_waiting(self.batch_id, Line.EXPIRED)
            end_as = Status.EXPIRED
        else:
            end_as = Status.COMPLETED
        requeue_lost(self.batch_id, self.token)  # none should be left; a line still running is queued, then ended
        if end_as != Status.COMPLETED:
            finish.end_waiting(self.batch_id, Line.CANCELLED if end_as == Status.CANCELLED else Line.EXPIRED)
        finish.finalize(self.batch_id, end_as=end_as)
