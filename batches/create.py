"""Making a batch from what a client sent: OpenAI's batch (an input file of this account's, read and checked
line by line later, by the validation task) and Anthropic's message batch (the requests in the body, checked
here and written as the batch's lines at once, as Anthropic answers a malformed request before any runs).

Every refusal is a 400 `ApiError` naming what is wrong: OpenAI's `param` for a batch, and, for a message
batch, the request's place in the body (`requests.3.custom_id`) at the head of the message, as Anthropic
words a request it cannot read. The surface's error shape is the path's (gateway/web/errors.py)."""

from __future__ import annotations

import re
import secrets
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from batches import checks, queue
from batches.models import Batch, BatchLine
from gateway.models import StoredFile
from gateway.web.errors import ApiError

COMPLETION_WINDOW = "24h"
WINDOW = timedelta(hours=24)
METADATA_PAIRS, METADATA_KEY, METADATA_VALUE = 16, 64, 512  # OpenAI's bounds on `metadata`
CUSTOM_ID = re.compile(r"[a-zA-Z0-9_-]{1,64}")  # Anthropic's pattern of a request's `custom_id`
MESSAGES = "/v1/messages"


def new_id(prefix: str) -> str:
    return prefix + secrets.token_hex(12)


def _refused(message: str, param: str, code: str = "invalid_value") -> ApiError:
    return ApiError(400, message, code=code, param=param)


def _required(value: Any, param: str) -> None:
    if value is None:
        raise _refused(f"Missing required parameter: '{param}'.", param, "missing_required_parameter")


def _check_metadata(metadata: Any) -> None:
    if metadata is None:
        return
    if not isinstance(metadata, dict):
        raise _refused("'metadata' must be an object of string keys and string values.", "metadata")
    if len(metadata) > METADATA_PAIRS:
        raise _refused(f"'metadata' may hold at most {METADATA_PAIRS} pairs; it holds {len(metadata)}.", "metadata")
    for key, value in metadata.items():
        if len(key) > METADATA_KEY:
            raise _refused(f"A 'metadata' key may be at most {METADATA_KEY} characters; '{key[:METADATA_KEY]}…' "
                           f"has {len(key)}.", "metadata")
        if not isinstance(value, str):
            raise _refused(f"The 'metadata' value of '{key}' must be a string.", "metadata")
        if len(value) > METADATA_VALUE:
            raise _refused(f"A 'metadata' value may be at most {METADATA_VALUE} characters; that of '{key}' has "
                           f"{len(value)}.", "metadata")


def _input_file(account, input_file_id: Any) -> StoredFile:
    """The account's file named by `input_file_id`; another account's is not found either (OpenAI's 404)."""
    if not isinstance(input_file_id, str) or not input_file_id:
        raise _refused("'input_file_id' must be the id of a file uploaded with purpose 'batch'.", "input_file_id")
    stored = StoredFile.objects.filter(account=account, id=input_file_id).first()
    if stored is None:
        raise ApiError(404, f"No such File object: {input_file_id}", param="input_file_id")
    if stored.purpose != "batch":
        raise _refused(f"The file {input_file_id} has purpose '{stored.purpose}'; a batch reads a file uploaded "
                       "with purpose 'batch'.", "input_file_id")
    return stored


def create_openai(account, *, input_file_id: Any, endpoint: Any, completion_window: Any, metadata: Any) -> Batch:
    """A batch `validating` its input file, its validation queued once the batch is written."""
    for value, param in ((input_file_id, "input_file_id"), (endpoint, "endpoint"),
                         (completion_window, "completion_window")):
        _required(value, param)
    if endpoint not in checks.ENDPOINTS:
        raise _refused(f"'endpoint' {endpoint!r} is not one a batch of this gateway calls: one of "
                       + ", ".join(checks.ENDPOINTS) + ".", "endpoint")
    if completion_window != COMPLETION_WINDOW:
        raise _refused(f"'completion_window' must be '{COMPLETION_WINDOW}'.", "completion_window")
    _check_metadata(metadata)
    if checks.holds_nul(input_file_id) or checks.holds_nul(metadata):
        raise _refused(checks.NUL_MESSAGE, "input_file_id" if checks.holds_nul(input_file_id) else "metadata")
    stored = _input_file(account, input_file_id)
    now = timezone.now()
    with transaction.atomic():
        batch = Batch.objects.create(
            id=new_id("batch_"), account=account, kind=Batch.Kind.OPENAI, endpoint=endpoint, input_file=stored,
            input_file_name=stored.id, completion_window=completion_window, metadata=metadata,
            status=Batch.Status.VALIDATING, created_at=now, expires_at=now + WINDOW)
        queue.enqueue(queue.VALIDATE, batch.id)
    return batch


def _anthropic_refusal(where: str, message: str) -> ApiError:
    return ApiError(400, f"{where}: {message}", code="invalid_request_error", param=where)


def _check_params(where: str, params: Any) -> None:
    if not isinstance(params, dict):
        raise _anthropic_refusal(where, "Input should be an object: the body of a Messages request.")
    for field in ("model", "max_tokens", "messages"):
        if field not in params:
            raise _anthropic_refusal(f"{where}.{field}", "Field required.")
    max_tokens = params["max_tokens"]
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise _anthropic_refusal(f"{where}.max_tokens", "Input should be a whole number of at least 1.")
    if not isinstance(params["messages"], list):
        raise _anthropic_refusal(f"{where}.messages", "Input should be a list of messages.")
    if params.get("stream"):
        raise _anthropic_refusal(f"{where}.stream", "A batch request cannot be streamed: leave 'stream' out.")


def _anthropic_lines(account, requests: Any) -> list[tuple[str, dict]]:
    """(custom_id, params) of each request, or the 400 of the first that cannot run."""
    if requests is None:
        raise _anthropic_refusal("requests", "Field required.")
    if not isinstance(requests, list):
        raise _anthropic_refusal("requests", "Input should be a list of requests.")
    if not requests:
        raise _anthropic_refusal("requests", "A message batch holds at least 1 request.")
    if len(requests) > settings.BATCH_MAX_LINES:
        raise _anthropic_refusal("requests", f"A message batch holds at most {settings.BATCH_MAX_LINES} requests; "
                                             f"this one has {len(requests)}.")
    seen: dict[str, int] = {}
    refusals: dict[str, str | None] = {}
    lines = []
    for index, request in enumerate(requests):
        where = f"requests.{index}"
        if not isinstance(request, dict):
            raise _anthropic_refusal(where, "Input should be an object with 'custom_id' and 'params'.")
        custom_id = request.get("custom_id")
        if custom_id is None:
            raise _anthropic_refusal(f"{where}.custom_id", "Field required.")
        if not isinstance(custom_id, str) or not CUSTOM_ID.fullmatch(custom_id):
            raise _anthropic_refusal(f"{where}.custom_id", "String should match pattern '^[a-zA-Z0-9_-]{1,64}$'.")
        if custom_id in seen:
            raise _anthropic_refusal(f"{where}.custom_id", f"The custom_id '{custom_id}' is already used by "
                                                           f"requests.{seen[custom_id]}; each must be unique.")
        seen[custom_id] = index
        if "params" not in request:
            raise _anthropic_refusal(f"{where}.params", "Field required.")
        params = request["params"]
        _check_params(f"{where}.params", params)
        if checks.holds_nul(params):
            raise _anthropic_refusal(f"{where}.params", checks.NUL_MESSAGE)
        model = params["model"]
        key = model if isinstance(model, str) else repr(model)
        if key not in refusals:
            refusals[key] = checks.model_refusal(model, account.group, MESSAGES)
        if refusals[key] is not None:
            raise _anthropic_refusal(f"{where}.params.model", refusals[key])
        lines.append((custom_id, params))
    return lines


def create_anthropic(account, requests: Any) -> Batch:
    """A message batch `in_progress` with its lines, written together, its launch queued once they are
    (batches/tasks.py `validate_batch`: a cloud's batch API where the operator chose it, else our workers)."""
    lines = _anthropic_lines(account, requests)
    now = timezone.now()
    with transaction.atomic():
        batch = Batch.objects.create(
            id=new_id("msgbatch_"), account=account, kind=Batch.Kind.ANTHROPIC, endpoint=MESSAGES,
            status=Batch.Status.IN_PROGRESS, created_at=now, in_progress_at=now, expires_at=now + WINDOW)
        BatchLine.objects.bulk_create([BatchLine(batch=batch, index=index, custom_id=custom_id, body=params)
                                       for index, (custom_id, params) in enumerate(lines)], batch_size=1000)
        queue.enqueue(queue.VALIDATE, batch.id)  # launched by a worker: forwarded to a cloud, or run here
    return batch
