"""The checks a batch's requests pass before any of them runs: an OpenAI input file read line by line (a line
that is not a JSON object, a method other than POST, a URL other than the batch's endpoint, a `custom_id`
missing or used twice, a body that is not an object, a stream, a model the account's group may not use), each
failure named with its line, as OpenAI's `errors` list does; nothing runs when one line fails. A model is
checked by the group's routing (gateway/registry/routing.py), so a batch refuses what a live call would."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings

from batches.models import Batch, BatchLine
from gateway.files import store
from gateway.registry.routing import plan_chain
from gateway.web.errors import ApiError

MAX_ERRORS = 100  # the errors listed; the count past them is said in the last one
ENDPOINTS = ("/v1/chat/completions", "/v1/responses", "/v1/embeddings")


class LinesInvalid(Exception):
    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__(f"{len(errors)} invalid lines")
        self.errors = errors


def _error(code: str, message: str, line: int | None = None, param: str | None = None) -> dict[str, Any]:
    return {"code": code, "message": message, "param": param, "line": line}


def holds_nul(value: Any) -> bool:
    """Whether a JSON value holds the NUL character in a string or a key: PostgreSQL's JSON and text refuse it,
    so such a request cannot be kept as a batch's line (a live call never keeps its body)."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(holds_nul(key) or holds_nul(item) for key, item in value.items())
    if isinstance(value, list):
        return any(holds_nul(item) for item in value)
    return False


NUL_MESSAGE = "A string here holds the NUL character (\\u0000), which a batch cannot keep."


def capability_of(endpoint: str) -> str:
    return "embeddings" if endpoint == "/v1/embeddings" else "chat"


def model_refusal(model: Any, group, endpoint: str) -> str | None:
    """Why the group may not call `model` on `endpoint`, or None when it may."""
    if not isinstance(model, str) or not model:
        return "The request body has no 'model'."
    try:
        plan_chain(model, group=group, capability=capability_of(endpoint))
    except ApiError as refused:
        return refused.message
    return None


def line_problems(number: int, entry: Any, endpoint: str, seen: set[str], models: dict[str, str | None],
                  group) -> list[dict[str, Any]]:
    """What is wrong with one parsed input line (numbered from 1), nothing when it may run."""
    if not isinstance(entry, dict):
        return [_error("invalid_json_line", "This line is not a JSON object.", number)]
    problems = []
    custom_id = entry.get("custom_id")
    if holds_nul(entry):
        return [_error("invalid_request", NUL_MESSAGE, number)]
    if not isinstance(custom_id, str) or not custom_id:
        problems.append(_error("missing_required_parameter", "'custom_id' is required: a string.", number,
                               "custom_id"))
    elif len(custom_id) > 512:
        problems.append(_error("invalid_custom_id", "'custom_id' may be at most 512 characters.", number, "custom_id"))
    elif custom_id in seen:
        problems.append(_error("duplicate_custom_id", f"The custom_id '{custom_id}' is used by an earlier line.",
                               number, "custom_id"))
    else:
        seen.add(custom_id)
    if entry.get("method") != "POST":
        problems.append(_error("invalid_method", "'method' must be POST.", number, "method"))
    if entry.get("url") != endpoint:
        problems.append(_error("mismatched_endpoint", f"The line's url is {entry.get('url')!r}, but the batch's "
                                                      f"endpoint is {endpoint}.", number, "url"))
    body = entry.get("body")
    if not isinstance(body, dict):
        problems.append(_error("invalid_request", "'body' must be a JSON object.", number, "body"))
        return problems
    if body.get("stream"):
        problems.append(_error("invalid_request", "A batch request cannot be streamed: leave 'stream' out.", number,
                               "body.stream"))
    model = body.get("model")
    key = model if isinstance(model, str) else repr(model)
    if key not in models:
        models[key] = model_refusal(model, group, endpoint)
    if models[key] is not None:
        problems.append(_error("model_not_found", models[key], number, "body.model"))
    return problems


def read_openai_lines(batch: Batch) -> list[BatchLine]:
    """The batch's lines, unsaved, read from its input file; LinesInvalid with every problem found (the first
    MAX_ERRORS of them) when any line fails."""
    if batch.input_file is None:
        raise LinesInvalid([_error("invalid_file", f"The input file {batch.input_file_name} was deleted.",
                                   param="input_file_id")])
    lines: list[BatchLine] = []
    errors: list[dict[str, Any]] = []
    seen: set[str] = set()
    models: dict[str, str | None] = {}
    group = batch.account.group
    with store.open_file(batch.input_file) as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            if len(lines) >= settings.BATCH_MAX_LINES:
                errors.append(_error("too_many_requests_in_batch",
                                     f"A batch may hold at most {settings.BATCH_MAX_LINES} requests.", number))
                break
            try:
                entry = json.loads(raw)
            except ValueError:
                errors.append(_error("invalid_json_line", "This line is not valid JSON.", number))
                continue
            problems = line_problems(number, entry, batch.endpoint, seen, models, group)
            if problems:
                errors.extend(problems)
                continue
            lines.append(BatchLine(batch=batch, index=len(lines), custom_id=entry["custom_id"], body=entry["body"]))
    if not lines and not errors:
        errors.append(_error("empty_file", "The input file holds no requests."))
    if errors:
        if len(errors) > MAX_ERRORS:
            left = len(errors) - MAX_ERRORS + 1
            errors = errors[:MAX_ERRORS - 1] + [_error("too_many_errors", f"{left} more errors are not listed.")]
        raise LinesInvalid(errors)
    return lines
