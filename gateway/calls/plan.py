"""The checks of a model call that need the database or the counters, in one synchronous step:
the chain (model exists, allowed to the group, remote servers; a pool's pick), the token quota and the
budgets in money."""

from __future__ import annotations

from typing import Any

from gateway.limits.quotas import quota_check
from gateway.registry.pools import NO_KEYS, Affinity
from gateway.registry.routing import plan_chain
from gateway.registry.snapshot import Target
from gateway.web.errors import ApiError

MAX_MESSAGES = 200  # spec 8.6, fixed
MAX_MESSAGE_CHARS = 200_000  # spec 8.6, fixed; a message of blocks: this many blocks
SESSION_HEADER = "X-Session-Id"
MAX_AFFINITY_CHARS = 512  # a longer session or user is no key (a pool spreads such calls by its policy)


def call_plan(*, account, model_id: Any, capability: str = "chat", quota_used=None,
              affinity: Affinity = NO_KEYS) -> list[Target]:
    """`quota_used`: the token and spend windows read with the request's ceilings, when the caller has them.
    `affinity`: what ties the call to others (`affinity_of`), for a pool that keeps them together."""
    chain = plan_chain(model_id, group=account.group, capability=capability, affinity=affinity)
    quota_check(account=account, used=quota_used)
    return chain


def affinity_of(request, body: dict[str, Any] | None = None, *, conversation_id: Any = None) -> Affinity:
    """What ties a call to others, for a pool's affinity: its session — the `X-Session-Id` header, else
    the native conversation it continues — and the request's `user` field (on /v1/messages,
    `metadata.user_id`). Values that are not short text are not keys."""
    session = request.headers.get(SESSION_HEADER) if request is not None else None
    if not session and conversation_id is not None and not isinstance(conversation_id, bool):
        session = f"conversation:{conversation_id}"
    user = None
    if isinstance(body, dict):
        user = body.get("user")
        metadata = body.get("metadata")
        if not isinstance(user, str) and isinstance(metadata, dict):
            user = metadata.get("user_id")
    return Affinity(session=_key(session), user=_key(user))


def _key(value: Any) -> str | None:
    return value if isinstance(value, str) and value and len(value) <= MAX_AFFINITY_CHARS else None


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
