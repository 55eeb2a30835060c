"""Anthropic's Message Batches API under /v1/messages/batches: create (the requests in the body), list (a page,
newest first, around `before_id` or `after_id`), retrieve, cancel, delete (once ended) and the results (JSON
Lines, once ended), in the shapes the anthropic SDK reads; every refusal in Anthropic's error shape, as on
/v1/messages (gateway/web/paths.py).

A message batch is a Batch of kind `anthropic` whose lines are /v1/messages calls (batches/runner.py). Its
`processing_status` is read from the batch's status: still to run or running is `in_progress`, asked to stop
`canceling`, any end `ended`. Another account's id, or an OpenAI batch's, is the 404 of an unknown one."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.http import StreamingHttpResponse

from accounts.endpoints import endpoint
from batches import finish, progress
from batches.create import create_anthropic
from batches.models import Batch, BatchLine
from gateway.limits import ratelimit
from gateway.state.workers import in_worker
from gateway.web.body import read_json_object
from gateway.web.errors import ANTHROPIC_TYPES, ApiError
from gateway.web.output import respond, timestamp

MAX_LIMIT, DEFAULT_LIMIT = 1000, 20  # Anthropic's page: 1 to 1000, 20 unless asked
RESULTS_PAGE = 500  # lines read from the database at a time while the results are sent
Status, Line = Batch.Status, BatchLine.Status
CANCELING = (Status.CANCELLING,)
RUNNING = (Status.VALIDATING, Status.IN_PROGRESS, Status.FINALIZING)
END_STAMPS = {Status.COMPLETED: "completed_at", Status.CANCELLED: "cancelled_at", Status.EXPIRED: "expired_at",
              Status.FAILED: "failed_at"}


def processing_status(batch: Batch) -> str:
    if batch.status in RUNNING:
        return "in_progress"
    return "canceling" if batch.status in CANCELING else "ended"


def results_url(request, batch: Batch) -> str | None:
    """Where the results are read, an absolute URL as Anthropic gives it (the SDK fetches it as it is): on the
    gateway's public address when PUBLIC_BASE_URL names it (behind a proxy), else on the one the client called."""
    if not batch.ended:
        return None
    base = settings.PUBLIC_BASE_URL.rstrip("/") or request.build_absolute_uri("/").rstrip("/")
    return f"{base}/v1/messages/batches/{batch.id}/results"


def batch_object(request, batch: Batch, counts: progress.Counts) -> dict[str, Any]:
    """Anthropic's message batch; its times RFC 3339 in UTC, null until they happen."""
    ended_at = getattr(batch, END_STAMPS[batch.status]) if batch.status in END_STAMPS else None
    return {"id": batch.id, "type": "message_batch", "processing_status": processing_status(batch),
            "request_counts": counts.anthropic(), "ended_at": timestamp(ended_at),
            "created_at": timestamp(batch.created_at), "expires_at": timestamp(batch.expires_at),
            "cancel_initiated_at": timestamp(batch.cancelling_at), "archived_at": None,
            "results_url": results_url(request, batch)}


def find_batch(account, batch_id: str) -> Batch:
    # an id holding NUL names nothing (PostgreSQL's text cannot even be asked for it)
    found = None if "\x00" in batch_id else Batch.objects.filter(account=account, kind=Batch.Kind.ANTHROPIC,
                                                                   id=batch_id).first()
    if found is None:
        raise ApiError(404, f"No message batch with id '{batch_id}'.", param="message_batch_id")
    return found


def _answer(request, batch: Batch):
    return respond(batch_object(request, batch, progress.counts(batch)))


@endpoint("POST", limit=ratelimit.V1, idempotent=True)  # an SDK's retried create makes one batch
def create_batch(request):
    """The batch with its lines, `in_progress` at once (its requests were checked here: batches/create.py)."""
    body = read_json_object(request)
    return _answer(request, create_anthropic(request.principal.account, body.get("requests")))


def _page_params(request) -> tuple[int, str | None, str | None]:
    query = request.GET
    try:
        limit = int(query.get("limit", DEFAULT_LIMIT))
    except ValueError:
        limit = 0
    if not 1 <= limit <= MAX_LIMIT:
        raise ApiError(400, f"limit: Input should be a whole number from 1 to {MAX_LIMIT}.", param="limit")
    before, after = query.get("before_id") or None, query.get("after_id") or None
    if before and after:
        raise ApiError(400, "Give before_id or after_id, not both.", param="before_id")
    return limit, before, after


@endpoint("GET", limit=ratelimit.V1)
def list_batches(request):
    """Newest first (by creation time, then id). `after_id`: the page just older than that batch; `before_id`:
    the page just newer, still newest first; `has_more` says whether more lie beyond it that way."""
    limit, before, after = _page_params(request)
    account = request.principal.account
    rows = Batch.objects.filter(account=account, kind=Batch.Kind.ANTHROPIC)
    if before:
        mark = find_batch(account, before)
        rows = rows.filter(created_at__gte=mark.created_at).exclude(created_at=mark.created_at, id__lte=mark.id)
        found = list(rows.order_by("created_at", "id")[:limit + 1])
        page = found[:limit][::-1]
    else:
        if after:
            mark = find_batch(account, after)
            rows = rows.filter(created_at__lte=mark.created_at).exclude(created_at=mark.created_at, id__gte=mark.id)
        found = list(rows.order_by("-created_at", "-id")[:limit + 1])
        page = found[:limit]
    counts = progress.counts_of([batch.id for batch in page])
    data = [batch_object(request, batch, counts[batch.id]) for batch in page]
    return respond({"data": data, "has_more": len(found) > limit, "first_id": data[0]["id"] if data else None,
                    "last_id": data[-1]["id"] if data else None})


@endpoint("GET", limit=ratelimit.V1)
def retrieve_batch(request, batch_id: str):
    return _answer(request, find_batch(request.principal.account, batch_id))


def _not_ended(batch: Batch, doing: str) -> ApiError:
    return ApiError(400, f"Message batch {batch.id} has processing_status '{processing_status(batch)}': {doing}.",
                    param="message_batch_id")


@endpoint("POST", limit=ratelimit.V1)
def cancel_batch(request, batch_id: str):
    """`canceling` until the requests in flight end; the rest end `canceled`. An ended batch is a 400."""
    batch = find_batch(request.principal.account, batch_id)
    if batch.ended:
        raise _not_ended(batch, "it has ended and can no longer be canceled")
    return _answer(request, finish.cancel(batch))


@endpoint("DELETE", limit=ratelimit.V1)
def delete_batch(request, batch_id: str):
    """The batch and its lines; only once it has ended (cancel one in progress first), as Anthropic's."""
    batch = find_batch(request.principal.account, batch_id)
    if not batch.ended:
        raise _not_ended(batch, "a batch can be deleted only once it has ended; cancel it first")
    batch.delete()
    return respond({"id": batch_id, "type": "message_batch_deleted"})


def error_body(line: BatchLine) -> dict[str, Any]:
    """Anthropic's error body of an errored request: the /v1/messages answer's own, or, for one given in
    another shape (an OpenAI-shaped refusal of the gateway's), the same said in Anthropic's."""
    result = line.result if isinstance(line.result, dict) else {}
    error = result.get("error") if isinstance(result.get("error"), dict) else {}
    kind = error.get("type") if result.get("type") == "error" else None
    if kind not in set(ANTHROPIC_TYPES.values()) | {"api_error"}:
        kind = ANTHROPIC_TYPES.get(line.status_code or 500, "api_error")
    message = error.get("message") if isinstance(error.get("message"), str) else "The request failed."
    return {"type": "error", "error": {"type": kind, "message": message}, "request_id": line.request_id or None}


def result_line(line: BatchLine) -> dict[str, Any]:
    """One line of the results: the request's `custom_id` and how it ended."""
    if line.status == Line.SUCCEEDED:
        result = {"type": "succeeded", "message": line.result}
    elif line.status == Line.ERRORED:
        result = {"type": "errored", "error": error_body(line)}
    else:
        result = {"type": "canceled" if line.status == Line.CANCELLED else "expired"}
    return {"custom_id": line.custom_id, "result": result}


def _ended_batch(account, batch_id: str) -> Batch:
    batch = find_batch(account, batch_id)
    if not batch.ended:
        raise _not_ended(batch, "its results can be read once it has ended")
    return batch


def _lines_after(batch_id: str, index: int) -> list[BatchLine]:
    return list(BatchLine.objects.filter(batch_id=batch_id, index__gt=index).order_by("index")
                .only("index", "custom_id", "status", "status_code", "request_id", "result")[:RESULTS_PAGE])


@endpoint("GET", limit=ratelimit.V1)
async def results(request, batch_id: str):
    """One JSON line per request, in the order they were sent, read a page of lines at a time off the event
    loop, so a large batch is never held whole."""
    batch = await in_worker(_ended_batch)(request.principal.account, batch_id)
    read = in_worker(_lines_after)

    async def lines():
        last = -1
        while page := await read(batch.id, last):
            yield b"".join(json.dumps(result_line(line), separators=(",", ":")).encode() + b"\n" for line in page)
            last = page[-1].index

    response = StreamingHttpResponse(lines(), content_type="application/x-jsonl")
    response["Content-Disposition"] = f'attachment; filename="{batch.id}_results.jsonl"'
    return response
