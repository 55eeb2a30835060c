"""OpenAI's Batch API: `POST /v1/batches` (a batch of the lines of an uploaded input file), `GET /v1/batches`
(a page, newest first, after the batch `after`), `GET /v1/batches/{id}` and `POST /v1/batches/{id}/cancel`,
in the shapes the openai SDK reads.

A batch is its account's: another account's id, or the id of an Anthropic message batch, is the 404 of an unknown
one. Its counts are its lines' (batches/progress.py); its output and error files are read through /v1/files
(compat/files.py). What a batch checks before it is made is batches/create.py's; how it runs, batches/runner.py's."""

from __future__ import annotations

from typing import Any

from accounts.endpoints import endpoint
from batches import finish, progress
from batches.create import create_openai
from batches.models import Batch
from gateway.limits import ratelimit
from gateway.web.body import read_json_object
from gateway.web.errors import ApiError
from gateway.web.output import respond

MAX_LIMIT, DEFAULT_LIMIT = 100, 20  # OpenAI's page of batches: 1 to 100, 20 unless asked
STAMPS = ("created_at", "in_progress_at", "expires_at", "finalizing_at", "completed_at", "failed_at", "expired_at",
          "cancelling_at", "cancelled_at")


def _seconds(moment) -> int | None:
    return None if moment is None else int(moment.timestamp())


def batch_object(batch: Batch, counts: progress.Counts) -> dict[str, Any]:
    """OpenAI's batch object; its times in Unix seconds, null until they happen."""
    return {"id": batch.id, "object": "batch", "endpoint": batch.endpoint, "errors": batch.errors,
            "input_file_id": batch.input_file_name, "completion_window": batch.completion_window,
            "status": batch.status, "output_file_id": batch.output_file_id, "error_file_id": batch.error_file_id,
            **{stamp: _seconds(getattr(batch, stamp)) for stamp in STAMPS},
            "request_counts": counts.openai(), "metadata": batch.metadata}


def find_batch(account, batch_id: str) -> Batch:
    # an id holding NUL names nothing (PostgreSQL's text cannot even be asked for it)
    found = None if "\x00" in batch_id else Batch.objects.filter(account=account, kind=Batch.Kind.OPENAI,
                                                                   id=batch_id).first()
    if found is None:
        raise ApiError(404, f"No such Batch object: {batch_id}", param="batch_id")
    return found


def _answer(batch: Batch):
    return respond(batch_object(batch, progress.counts(batch)))


@endpoint("POST", limit=ratelimit.V1, idempotent=True)  # an SDK's retried create makes one batch
def create_batch(request):
    """The batch `validating`, its input file read by the batch queue's worker; `output_expires_after` is refused,
    as this gateway keeps a batch's output files until they are deleted."""
    body = read_json_object(request)
    if body.get("output_expires_after") is not None:
        raise ApiError(400, "'output_expires_after' is not supported: a batch's output and error files are kept "
                            "until deleted (DELETE /v1/files/{id}).", code="unsupported_parameter",
                       param="output_expires_after")
    batch = create_openai(request.principal.account, input_file_id=body.get("input_file_id"),
                          endpoint=body.get("endpoint"), completion_window=body.get("completion_window"),
                          metadata=body.get("metadata"))
    return _answer(batch)


def _limit(request) -> int:
    try:
        limit = int(request.GET.get("limit", DEFAULT_LIMIT))
    except ValueError:
        limit = 0
    if not 1 <= limit <= MAX_LIMIT:
        raise ApiError(400, f"'limit' must be a whole number from 1 to {MAX_LIMIT}.", param="limit")
    return limit


@endpoint("GET", limit=ratelimit.V1)
def list_batches(request):
    """A page of the account's batches, newest first (by creation time, then id), after the batch `after`."""
    limit = _limit(request)
    account = request.principal.account
    rows = Batch.objects.filter(account=account, kind=Batch.Kind.OPENAI)
    after = request.GET.get("after")
    if after:
        mark = find_batch(account, after)
        rows = rows.filter(created_at__lte=mark.created_at).exclude(created_at=mark.created_at, id__gte=mark.id)
    found = list(rows.order_by("-created_at", "-id")[:limit + 1])
    page = found[:limit]
    counts = progress.counts_of([batch.id for batch in page])
    data = [batch_object(batch, counts[batch.id]) for batch in page]
    return respond({"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
                    "last_id": data[-1]["id"] if data else None, "has_more": len(found) > limit})


@endpoint("GET", limit=ratelimit.V1)
def retrieve_batch(request, batch_id: str):
    return _answer(find_batch(request.principal.account, batch_id))


@endpoint("POST", limit=ratelimit.V1)
def cancel_batch(request, batch_id: str):
    """`cancelling` until the lines in flight end, then `cancelled` (batches/finish.py). A batch cancelling or
    finalizing is answered as it is; one that has ended is a 400 naming its status."""
    batch = find_batch(request.principal.account, batch_id)
    if batch.ended:
        raise ApiError(400, f"Cannot cancel a batch with status '{batch.status}': it has ended.",
                       code="invalid_request_error", param="batch_id")
    return _answer(finish.cancel(batch))
