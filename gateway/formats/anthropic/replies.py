"""Anthropic Messages <-> the neutral chat format: whole replies, both ways, and the usage and
stop-reason mappings the streams (anthropic_stream.py) share. Plain dict building (per request)."""

from __future__ import annotations

import json
import time
from typing import Any

from gateway.formats.anthropic.to_chat import FINISH_TO_STOP, STOP_TO_FINISH, as_object, new_id, parse_arguments


def chat_usage(usage: Any) -> dict:
    """Anthropic usage → chat usage. Anthropic's input_tokens excludes cache reads and writes, which
    OpenAI's prompt_tokens includes, with the reads in prompt_tokens_details.cached_tokens and the
    writes in prompt_tokens_details.cache_write_tokens (both fields of OpenAI's own usage schema), each
    only when there are some. Every Anthropic usage the gateway meters comes through here: a reply
    translated, and a native `/v1/messages` reply passed through (gateway/formats/anthropic/events.py)."""
    usage = as_object(usage)
    cached = usage.get("cache_read_input_tokens") or 0
    written = usage.get("cache_creation_input_tokens") or 0
    prompt = (usage.get("input_tokens") or 0) + cached + written
    completion = usage.get("output_tokens") or 0
    out = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    details = {name: count for name, count in (("cached_tokens", cached), ("cache_write_tokens", written)) if count}
    if details:
        out["prompt_tokens_details"] = details
    return out


# A tool_use block's `caller`, which Anthropic's schema requires: the model called the tool itself
# (the other callers are Anthropic's server tools running code, which a chat server has none of).
DIRECT_CALLER = {"type": "direct"}


def messages_usage(usage: Any) -> dict:
    """Chat usage → a Message's usage, every field Anthropic's schema requires present. The cache reads
    and writes come out of input_tokens again. What a chat server does not report is neutral: no cache
    breakdown, server tools, region or tier (null); the thinking tokens when the server counted its reasoning."""
    usage = as_object(usage)
    details = as_object(usage.get("prompt_tokens_details"))
    cached = details.get("cached_tokens") or 0
    written = details.get("cache_write_tokens") or 0
    reasoning = as_object(usage.get("completion_tokens_details")).get("reasoning_tokens")
    return {"input_tokens": max((usage.get("prompt_tokens") or 0) - cached - written, 0),
            "output_tokens": usage.get("completion_tokens") or 0,
            "cache_creation_input_tokens": written, "cache_read_input_tokens": cached, "cache_creation": None,
            "inference_geo": None, "server_tool_use": None, "service_tier": None,
            "output_tokens_details": {"thinking_tokens": reasoning} if isinstance(reasoning, int) else None}


DELTA_USAGE_FIELDS = ("cache_creation_input_tokens", "cache_read_input_tokens", "input_tokens", "output_tokens",
                      "output_tokens_details", "server_tool_use")


def delta_usage(usage: dict, *, input_known: bool) -> dict:
    """A Message's usage (`messages_usage`) as `message_delta` gives it: the cumulative counts, the
    input's (its own and its cache's) null when the server never reported them."""
    out = {name: usage.get(name) for name in DELTA_USAGE_FIELDS}
    if not input_known:
        out.update(input_tokens=None, cache_read_input_tokens=None, cache_creation_input_tokens=None)
    return out


def stop_reason_of(finish_reason: Any, has_tool_calls: bool) -> str:
    if has_tool_calls and finish_reason in (None, "stop"):  # some servers say "stop" after tool calls
        return "tool_use"
    return FINISH_TO_STOP.get(finish_reason, "end_turn")


def reasoning_of(message: dict) -> str | None:
    """A chat reply's reasoning: `reasoning_content` (vLLM, DeepSeek, LiteLLM) or `reasoning` (Ollama,
    OpenRouter, later vLLM)."""
    for key in ("reasoning_content", "reasoning"):
        if isinstance(message.get(key), str) and message[key]:
            return message[key]
    return None


def stop_sequence(choice: dict) -> str | None:
    """The stop string a chat server says it stopped on: vLLM's `stop_reason` (a string for a
    matched `stop`, a token id for a stop token) next to finish_reason "stop"."""
    reason = choice.get("stop_reason")
    return reason if isinstance(reason, str) and choice.get("finish_reason") == "stop" else None


def messages_to_chat_response(message: dict, *, output_tool: str | None = None) -> dict:
    """An Anthropic message as a chat completion. `output_tool` is the forced tool that carried a
    `response_format` (gateway.formats.anthropic.from_chat.output_tool_name): its input is the
    reply's text. Thinking goes to `reasoning_content`; a stop sequence to the choice's `stop_reason`."""
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[dict] = []
    answered = False  # by the output tool
    for block in message.get("content") or []:
        kind = as_object(block).get("type")
        if kind == "text":
            texts.append(block.get("text") or "")
        elif kind == "thinking" and isinstance(block.get("thinking"), str):
            thoughts.append(block["thinking"])
        elif kind == "tool_use" and output_tool is not None and block.get("name") == output_tool:
            texts.append(json.dumps(block.get("input") or {}, ensure_ascii=False))
            answered = True
        elif kind == "tool_use":
            arguments = json.dumps(block.get("input") or {}, ensure_ascii=False)
            calls.append({"id": block.get("id") or new_id("call_"), "type": "function",
                          "function": {"name": block.get("name") or "", "arguments": arguments}})
    content = "".join(texts) if texts or not calls else None
    reply: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    if thoughts:
        reply["reasoning_content"] = "".join(thoughts)
    if calls:
        reply["tool_calls"] = calls
    reason = message.get("stop_reason")
    if reason == "tool_use" and answered and not calls:  # only the output tool was called
        finish = "stop"
    else:
        finish = STOP_TO_FINISH.get(reason, "tool_calls" if calls else "stop")
    choice = {"index": 0, "message": reply, "finish_reason": finish, "logprobs": None}
    if reason == "stop_sequence" and isinstance(message.get("stop_sequence"), str):
        choice["stop_reason"] = message["stop_sequence"]
    return {
        "id": message.get("id") or new_id("chatcmpl-"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": message.get("model") or "",
        "choices": [choice],
        "usage": chat_usage(message.get("usage")),
    }


def chat_to_messages_response(completion: dict) -> dict:
    """A chat completion as an Anthropic message, with every field Anthropic's schema requires (the
    ones a chat server has nothing for are null: `citations`, `container`, `stop_details`). Reasoning
    becomes a thinking block whose signature is empty (no Anthropic model made it); a matched stop
    string, `stop_sequence`."""
    choice = as_object((completion.get("choices") or [None])[0])
    reply = as_object(choice.get("message"))
    content: list[dict] = []
    if thought := reasoning_of(reply):
        content.append({"type": "thinking", "thinking": thought, "signature": ""})
    text = reply.get("content")
    if isinstance(text, list):
        text = "".join(p.get("text") or "" for p in text if isinstance(p, dict))
    text = text or reply.get("refusal")
    if text:
        content.append({"type": "text", "text": text, "citations": None})
    calls = reply.get("tool_calls") or []
    for call in calls:
        function = as_object(as_object(call).get("function"))
        content.append({"type": "tool_use", "id": call.get("id") or new_id("toolu_"), "caller": DIRECT_CALLER,
                        "name": function.get("name") or "", "input": parse_arguments(function.get("arguments"))})
    sequence = None if calls else stop_sequence(choice)
    stop_reason = "stop_sequence" if sequence is not None else stop_reason_of(choice.get("finish_reason"), bool(calls))
    return {
        "id": completion.get("id") or new_id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": completion.get("model") or "",
        "content": content,
        "container": None,  # no container tool ran
        "stop_details": None,  # a chat server gives no detail of why it stopped beyond the reason
        "stop_reason": stop_reason,
        "stop_sequence": sequence,
        "usage": messages_usage(completion.get("usage")),
    }
