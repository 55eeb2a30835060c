"""Webhook events taken in together: group commit for the hook view, so a burst
of events costs one transaction and one queue message per batch rather than per event.

Each event waits for its answer from `routines.ingest.ingest_many`, which one worker thread runs
for every event that arrived while the previous batch was being written: one query for the
routines, one Redis round trip for the duplicate marks, one for the ceilings, one transaction
for the accepted events and their runs. Alone, an event goes at once (no waiting for company);
under load, batches grow by themselves, and the cost per event falls.

Every answer is given after its batch committed, so an accepted event is stored before its 200,
as spec 4.7 wants. The runs are handed to the task queue after the answers: a run the broker did
not take (or whose process died first) stays queued, and the sweep enqueues it (routines/runs.py).
A batch that fails (the database is down) fails each of its events, whose marks are removed, so
their senders' retries are taken later. Nothing is kept in memory past the answer.
"""

from __future__ import annotations

import asyncio
import weakref

from gateway.celery import origin
from routines.ingest import Incoming, ingest_many
from routines.run_start import enqueue

MAX_BATCH = 200


class _Intake:
    def __init__(self) -> None:
        self.waiting: list[tuple[Incoming, asyncio.Future]] = []
        self.draining = False
        self.enqueueing: set[asyncio.Task] = set()

    async def take(self, item: Incoming) -> tuple[int, dict]:
        answer = asyncio.get_running_loop().create_future()
        self.waiting.append((item, answer, origin()))  # its request's id and trace, for its run
        if not self.draining:
            self.draining = True
            asyncio.get_running_loop().create_task(self._drain())
        return await answer

    async def _drain(self) -> None:
        from gateway.state.workers import in_worker

        try:
            while self.waiting:
                batch, self.waiting = self.waiting[:MAX_BATCH], self.waiting[MAX_BATCH:]
                committed: list[int] = []
                try:
                    answers = await in_worker(ingest_many)([item for item, _, _ in batch],
                                                           then=lambda *ids: committed.extend(ids))
                except BaseException as exc:  # each event's view raises it (a 503 for an outage)
                    for _, answer, _ in batch:
                        if not answer.done():
                            answer.set_exception(exc)
                    if not isinstance(exc, Exception):
                        raise
                    continue
                for (_, answer, _), result in zip(batch, answers):
                    if not answer.done():
                        answer.set_result(result)
                if committed:  # the answers go out while the runs are handed to the task queue
                    # a run per accepted event, in the events' order (routines.ingest.ingest_many)
                    origins = [queued_by for (_, _, queued_by), (_, body) in zip(batch, answers) if body.get("queued")]
                    task = asyncio.get_running_loop().create_task(in_worker(enqueue)(*committed, origins=origins))
                    self.enqueueing.add(task)
                    task.add_done_callback(self.enqueueing.discard)
        finally:
            self.draining = False


_intakes: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


async def take_in(item: Incoming) -> tuple[int, dict]:
    """The answer to one webhook event, taken in with whatever arrives meanwhile."""
    loop = asyncio.get_running_loop()
    intake = _intakes.get(loop)
    if intake is None:
        intake = _intakes[loop] = _Intake()
    return await intake.take(item)
