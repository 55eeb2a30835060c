"""One line of a batch, made as one call of its surface: the request the line holds goes to the very view that
answers it live, found by its path in the URLconf (so this app imports no surface), for the batch's account.

The endpoint wrapper admits it without a credential and outside the per-minute ceilings (accounts/endpoints.py
`admit_batch_line`); everything after is the live call's: the body's checks, the chain and its pools and
fallbacks, the quota and budget check, the response cache, the guardrails, the metering. The call is a row of
the calls log of its own (the live surface's name, tagged with the batch and the line's `custom_id`), and its
exchange carries the batch (`BatchUse`): the usage record takes the line's key and the batch price
(gateway/calls/metering.py). The answer is the response's status and JSON body, whatever the status; a
quota or a budget that refused the line is said apart (`waits`), for the runner to hold the batch."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from django.http import HttpRequest
from django.urls import resolve

from accounts.authentication import Principal
from gateway.calls.metering import BatchUse
from gateway.usage.call_log import SURFACES, own_call
from gateway.web.errors import ApiError

VIA = "batch"  # the principal's `via`: the batch's account, no credential


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any  # the response's JSON body (an error's too); None when it had none
    request_id: str
    waits: str = ""  # the refusal of a quota or a budget reached: the line is not answered, it waits


def line_request(path: str, body: dict[str, Any], account, request_id: str) -> HttpRequest:
    """The HTTP request a live client would have sent for the line, as the view reads it."""
    raw = json.dumps(body, separators=(",", ":")).encode()
    request = HttpRequest()
    request.method = "POST"
    request.path = request.path_info = path
    request.META = {"CONTENT_TYPE": "application/json", "CONTENT_LENGTH": str(len(raw)), "REMOTE_ADDR": "127.0.0.1",
                    "SERVER_NAME": "batch", "SERVER_PORT": "0", "QUERY_STRING": ""}
    request._body = raw
    request.request_id = request_id
    request.batch_principal = Principal(account=account, via=VIA)
    return request


def _waiting(status: int, body: Any) -> str:
    """The message of a quota's or a budget's refusal (gateway/limits/quotas.py `quota_check`), else ''."""
    if status != 403 or not isinstance(body, dict):
        return ""
    error = body.get("error")
    message = error.get("message") if isinstance(error, dict) else None
    if isinstance(message, str) and message.startswith(("Token quota reached", "Budget reached")):
        return message
    return ""


async def call_line(*, path: str, body: dict[str, Any], account, batch_id: str, custom_id: str,
                    usage_key: str) -> Answer:
    """Make the line's call; its answer, metered once the body is read (as a live call's is once sent)."""
    request_id = uuid.uuid4().hex
    request = line_request(path, body, account, request_id)
    match = resolve(path)
    request.resolver_match = match
    surface = SURFACES.get(match.route, match.route)
    with own_call(surface=surface, account=account, request_id=request_id,
                  tags={"batch": batch_id, "custom_id": custom_id[:200]}) as exchange:
        exchange.batch = BatchUse(batch_id, usage_key)
        try:
            response = await match.func(request, *match.args, **match.kwargs)
        except ApiError as exc:  # raised past the wrapper: rendered as the surface would
            exchange.status = exc.status
            return Answer(exc.status, {"error": {"message": exc.message, "type": "invalid_request_error",
                                                 "code": exc.code}}, request_id)
        exchange.answered(request, response.status_code)
        if response.streaming:  # the checks refuse `stream: true` on a line (batches/checks.py, create.py)
            response.close()
            exchange.status = 400
            return Answer(400, {"error": {"message": "A batch request cannot be streamed: leave 'stream' out.",
                                          "type": "invalid_request_error", "param": "stream", "code": None}},
                          request_id)
        content = response.content
        after = getattr(response, "after_send_in_loop", None)
        if after is not None:
            await after()  # the metering of the answer, at the batch's price
        response.close()
    try:
        parsed = json.loads(content) if content else None
    except ValueError:
        parsed = {"error": {"message": content.decode("utf-8", "replace")[:2000], "type": "server_error"}}
    return Answer(response.status_code, parsed, request_id, _waiting(response.status_code, parsed))
