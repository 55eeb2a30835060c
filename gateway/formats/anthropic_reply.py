"""Anthropic Messages <-> the neutral chat format: whole replies, both ways, and the usage and
stop-reason mappings the streams (anthropic_stream.py) share. Plain dict building (per request)."""

from __future__ import annotations

import json
import time
from typing import Any

from gateway.formats.anthropic import FINISH_TO_STOP, STOP_TO_FINISH, _new_id, _obj, _parse_args


def _chat_usage(usage: Any) -> dict:
    """Anthropic usage → chat usage. Anthropic's input_tokens excludes cache reads and writes, which
    OpenAI's prompt_tokens includes (with the reads in prompt_tokens_details.cached_tokens)."""
    usage = _obj(usage)
    cached = usage.get("cache_read_input_tokens") or 0
    prompt = (usage.get("input_tokens") or 0) + cached + (usage.get("cache_creation_input_tokens") or 0)
    completion = usage.get("output_tokens") or 0
    out = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    if cached:
        out["prompt_tokens_details"] = {"cached_tokens": cached}
    return out


def _messages_usage(usage: Any) -> dict:
    usage = _obj(usage)
    cached = _obj(usage.get("prompt_tokens_details")).get("cached_tokens") or 0
    out = {"input_tokens": max((usage.get("prompt_tokens") or 0) - cached, 0),
           "output_tokens": usage.get("completion_tokens") or 0}
    if cached:
        out["cache_read_input_tokens"] = cached
    return out


def _stop_reason(finish_reason: Any, has_tool_calls: bool) -> str:
    if has_tool_calls and finish_reason in (None, "stop"):  # some servers say "stop" after tool calls
        return "tool_use"
    return FINISH_TO_STOP.get(finish_reason, "end_turn")


def messages_to_chat_response(message: dict) -> dict:
    texts: list[str] = []
    calls: list[dict] = []
    for block in message.get("content") or []:
        kind = _obj(block).get("type")
        if kind == "text":
            texts.append(block.get("text") or "")
        elif kind == "tool_use":
            arguments = json.dumps(block.get("input") or {}, ensure_ascii=False)
            calls.append({"id": block.get("id") or _new_id("call_"), "type": "function",
                          "function": {"name": block.get("name") or "", "arguments": arguments}})
    content = "".join(texts) if texts or not calls else None
    reply: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    if calls:
        reply["tool_calls"] = calls
    finish = STOP_TO_FINISH.get(message.get("stop_reason"), "tool_calls" if calls else "stop")
    return {
        "id": message.get("id") or _new_id("chatcmpl-"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": message.get("model") or "",
        "choices": [{"index": 0, "message": reply, "finish_reason": finish, "logprobs": None}],
        "usage": _chat_usage(message.get("usage")),
    }


def chat_to_messages_response(completion: dict) -> dict:
    choice = _obj((completion.get("choices") or [None])[0])
    reply = _obj(choice.get("message"))
    content: list[dict] = []
    text = reply.get("content")
    if isinstance(text, list):
        text = "".join(p.get("text") or "" for p in text if isinstance(p, dict))
    text = text or reply.get("refusal")
    if text:
        content.append({"type": "text", "text": text})
    calls = reply.get("tool_calls") or []
    for call in calls:
        function = _obj(_obj(call).get("function"))
        content.append({"type": "tool_use", "id": call.get("id") or _new_id("toolu_"),
                        "name": function.get("name") or "", "input": _parse_args(function.get("arguments"))})
    return {
        "id": completion.get("id") or _new_id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": completion.get("model") or "",
        "content": content,
        "stop_reason": _stop_reason(choice.get("finish_reason"), bool(calls)),
        "stop_sequence": None,
        "usage": _messages_usage(completion.get("usage")),
    }
