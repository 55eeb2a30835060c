"""The checks of a model call that need the database or the counters, in one synchronous step:
the chain (model exists, allowed to the group, remote servers) and the token quota."""

from __future__ import annotations

from typing import Any

from gateway.limits.quotas import quota_check
from gateway.registry.routing import plan_chain
from gateway.registry.snapshot import Target
from gateway.web.errors import ApiError

MAX_MESSAGES = 200  # spec 8.6, fixed
MAX_MESSAGE_CHARS = 200_000  # spec 8.6, fixed; a message of blocks: this many blocks


def call_plan(*, account, model_id: Any, capability: str = "chat", quota_used=None) -> list[Target]:
    """`quota_used`: the windows read with the request's ceilings, when the caller has them."""
    chain = plan_chain(model_id, group=account.group, capability=capability)
    quota_check(account_id=account.pk, group=account.group, used=quota_used)
    return chain


def check_chat_size(body: dict[str, Any]) -> None:
    """The fixed size limits of a /v1 request (spec 8.6), on the chat form of the request."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "'messages' must be a non-empty list.", code="invalid_request_error", param="messages")
    if len(messages) > MAX_MESSAGES:
        raise ApiError(400, f"A request may hold at most {MAX_MESSAGES} messages; it has {len(messages)}.",
                       code="invalid_request_error", param="messages")
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise ApiError(400, f"messages[{index}] must be an object.", code="invalid_request_error",
                           param=f"messages[{index}]")
        content = message.get("content")
        too_long = (
            (isinstance(content, str) and len(content) > MAX_MESSAGE_CHARS)
            or (isinstance(content, list) and (
                len(content) > MAX_MESSAGE_CHARS
                or any(isinstance(p, dict) and len(p.get("text") or "") > MAX_MESSAGE_CHARS for p in content)
            ))
        )
        if too_long:
            raise ApiError(400, f"messages[{index}] is longer than {MAX_MESSAGE_CHARS} characters (or blocks).",
                           code="invalid_request_error", param=f"messages[{index}].content")
