"""Gemini's `usageMetadata`, finish reasons and log probabilities in the chat form's words, for the
stream (`streams`) and for whole replies alike."""

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


def chat_logprobs(result: Any) -> dict:
    """A candidate's `logprobsResult` → a chat choice's `logprobs`: each chosen token with its log
    probability, its UTF-8 bytes, and the top tokens at its step (`topCandidates`, when asked for).
    Raises TypeError for a result that is not what Gemini sends."""
    if not isinstance(result, dict):
        raise TypeError
    chosen, top = result.get("chosenCandidates", []), result.get("topCandidates", [])
    if not isinstance(chosen, list) or not isinstance(top, list):
        raise TypeError
    content = []
    for i, candidate in enumerate(chosen):
        alternatives = as_object(top[i]).get("candidates") or [] if i < len(top) else []
        if not isinstance(alternatives, list):
            raise TypeError
        content.append({**_token(candidate), "top_logprobs": [_token(other) for other in alternatives]})
    return {"content": content, "refusal": None}


def _token(candidate: Any) -> dict:
    token, logprob = as_object(candidate).get("token", ""), as_object(candidate).get("logProbability", 0.0)
    if not isinstance(token, str) or not isinstance(logprob, (int, float)) or isinstance(logprob, bool):
        raise TypeError
    return {"token": token, "logprob": logprob, "bytes": list(token.encode("utf-8"))}
