"""A batch's counts, read from its lines in one query: what every surface and the console show of it."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count

from batches.models import Batch, BatchLine

Line = BatchLine.Status


@dataclass(frozen=True)
class Counts:
    queued: int = 0
    running: int = 0
    succeeded: int = 0
    errored: int = 0
    cancelled: int = 0
    expired: int = 0

    @property
    def total(self) -> int:
        return self.queued + self.running + self.succeeded + self.errored + self.cancelled + self.expired

    @property
    def ended(self) -> int:
        return self.succeeded + self.errored + self.cancelled + self.expired

    @property
    def processing(self) -> int:
        return self.queued + self.running

    def openai(self) -> dict[str, int]:
        """OpenAI's `request_counts`: a line that never ran (cancelled, expired) counts as failed, as OpenAI's do."""
        return {"total": self.total, "completed": self.succeeded,
                "failed": self.errored + self.cancelled + self.expired}

    def anthropic(self) -> dict[str, int]:
        """Anthropic's `request_counts`."""
        return {"processing": self.processing, "succeeded": self.succeeded, "errored": self.errored,
                "canceled": self.cancelled, "expired": self.expired}


def counts(batch: Batch | str) -> Counts:
    batch_id = batch.pk if isinstance(batch, Batch) else batch
    found = dict(BatchLine.objects.filter(batch_id=batch_id).values_list("status").annotate(n=Count("id")))
    return Counts(**{status: found.get(status, 0) for status in Line.values})


def counts_of(batch_ids: list[str]) -> dict[str, Counts]:
    """The counts of several batches in one query (a page of a list)."""
    found: dict[str, dict[str, int]] = {batch_id: {} for batch_id in batch_ids}
    rows = BatchLine.objects.filter(batch_id__in=batch_ids).values_list("batch_id", "status").annotate(n=Count("id"))
    for batch_id, status, n in rows:
        found[batch_id][status] = n
    return {batch_id: Counts(**{status: by.get(status, 0) for status in Line.values}) for batch_id, by in found.items()}
