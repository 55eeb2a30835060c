"""The body the playground page sends, read as the chat form the model call takes:

    {"model": "oa/echo-1", "messages": [{"role": "system" | "user" | "assistant", "content": "..."}],
     "temperature": 0.7, "max_tokens": 256}

A wrong field is a 400 naming it, in the chat completions' error shape (the page shows it as the API
would answer it); the fixed size limits of a /v1 request apply (gateway/calls/plan.py)."""

from __future__ import annotations

from typing import Any

from gateway.calls.plan import check_chat_size
from gateway.web.errors import ApiError
from gateway.web.validation import check_field_types, check_items

FIELDS = {"model": "string", "messages": "array", "temperature": "number", "max_tokens": "integer"}
MESSAGE_FIELDS = {"role": "string", "content": "string"}
ROLES = ("system", "user", "assistant")
MAX_TEMPERATURE = 2  # OpenAI's range, 0 to 2


def chat_of(body: dict[str, Any]) -> dict[str, Any]:
    """The chat form of the page's body: the fields above, nothing else sent on."""
    check_field_types(body, FIELDS)
    if not body.get("model"):
        raise _wrong("model", "Pick a model or an alias.")
    messages = body.get("messages")
    check_items(messages, MESSAGE_FIELDS, name="messages")
    check_chat_size(body)
    for index, message in enumerate(messages):
        if message.get("role") not in ROLES:
            raise _wrong(f"messages[{index}].role", f"messages[{index}].role must be one of {', '.join(ROLES)}.")
        if not isinstance(message.get("content"), str):
            raise _wrong(f"messages[{index}].content", f"messages[{index}].content must be a string.")
    if all(m["role"] == "system" for m in messages):
        raise _wrong("messages", "Write a message: a system prompt alone asks nothing.")
    chat = {"model": body["model"], "messages": [{"role": m["role"], "content": m["content"]} for m in messages]}
    temperature = body.get("temperature")
    if temperature is not None:
        if not 0 <= temperature <= MAX_TEMPERATURE:
            raise _wrong("temperature", f"'temperature' must be between 0 and {MAX_TEMPERATURE}.")
        chat["temperature"] = temperature
    max_tokens = body.get("max_tokens")
    if max_tokens is not None:
        if max_tokens < 1:
            raise _wrong("max_tokens", "'max_tokens' must be at least 1.")
        chat["max_tokens"] = max_tokens
    return chat


def _wrong(param: str, message: str) -> ApiError:
    return ApiError(400, message, code="invalid_request_error", param=param)
