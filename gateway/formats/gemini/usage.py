"""Gemini's `usageMetadata` and finish reasons in the chat form's words, for the stream (`streams`) and
for whole replies alike."""

from __future__ import annotations

from typing import Any

from gateway.formats.anthropic.to_chat import as_object

# Gemini's FinishReason → the chat form's finish_reason. A reason not named here (OTHER, LANGUAGE,
# MALFORMED_FUNCTION_CALL, a later one) ends the reply as "stop": the model stopped, for no reason the
# chat form has a word for.
FINISH_REASONS = {
    "STOP": "stop", "MAX_TOKENS": "length",
    **dict.fromkeys(("SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY",
                     "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION"), "content_filter"),
}


def finish_reason(reason: str, *, called_tools: bool) -> str:
    """The chat finish_reason of a candidate's `finishReason`. Gemini ends a turn of function calls with
    STOP; the chat form says "tool_calls"."""
    found = FINISH_REASONS.get(reason, "stop")
    return "tool_calls" if called_tools and found == "stop" else found


def _count(metadata: dict, key: str) -> int:
    value = metadata.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def gemini_usage(usage_metadata: Any) -> dict:
    """usageMetadata → the chat form's usage. The prompt counts the tool-use prompt too (what a
    server-side tool read, billed as input); the completion counts the thoughts, as OpenAI's
    completion_tokens counts reasoning, with them in completion_tokens_details.reasoning_tokens. Cached
    content tokens are part of promptTokenCount, as OpenAI's cached_tokens are part of prompt_tokens.
    The details are there only when there are some, as `anthropic.replies.chat_usage` gives them."""
    metadata = as_object(usage_metadata)
    prompt = _count(metadata, "promptTokenCount") + _count(metadata, "toolUsePromptTokenCount")
    thoughts = _count(metadata, "thoughtsTokenCount")
    completion = _count(metadata, "candidatesTokenCount") + thoughts
    usage: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": completion,
                             "total_tokens": prompt + completion}
    if cached := _count(metadata, "cachedContentTokenCount"):
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    if thoughts:
        usage["completion_tokens_details"] = {"reasoning_tokens": thoughts}
    return usage
