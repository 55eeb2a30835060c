"""The batch queue's tasks by their registered names, for the modules that enqueue them (creating a batch,
cancelling one): batches/tasks.py declares them under these names, and these modules find them in the Celery
app's registry (batches/apps.py loads it in every process), so none of them imports batches/tasks.py back."""

from django.db import transaction

from gateway.celery import app

VALIDATE = "batches.tasks.validate_batch"
RUN = "batches.tasks.run_batch"
SWEEP = "batches.tasks.sweep_batches"
POLL = "batches.tasks.poll_forwarded_batch"  # a batch forwarded to a cloud's batch API, read there (batches/forward.py)
QUEUE = "batches"  # the queue of their own: a worker of live work never takes a batch's (docs/batches.md)


def task(name: str):
    return app.tasks[name]


def enqueue(name: str, batch_id: str, countdown: float | None = None) -> None:
    """The task `name` for the batch, sent once the transaction that made the batch commits."""
    options = {"queue": QUEUE} if countdown is None else {"queue": QUEUE, "countdown": countdown}
    transaction.on_commit(lambda: task(name).apply_async((batch_id,), **options))
