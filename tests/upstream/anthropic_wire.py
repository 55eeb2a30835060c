"""Anthropic Messages (`POST /v1/messages`, `/v1/messages/count_tokens`) and the Anthropic error body."""

from __future__ import annotations

import json
import uuid
from typing import Any

from .core import (
    ClientError,
    Reply,
    Stream,
    count_words,
    default_reply,
    dumps,
    json_reply,
    limit_tokens,
    split_arguments,
    split_tokens,
    tool_arguments,
)

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


DIRECT = {"type": "direct"}  # a tool_use block's caller: the model itself, not a server tool's code


def message_usage(input_tokens: int, output_tokens: int, cached: int, written: int = 0) -> dict[str, Any]:
    """A Message's usage with every field Anthropic's API sends (the cache writes five-minute ones, no server
    tools)."""
    return {"input_tokens": input_tokens, "output_tokens": output_tokens, "cache_creation_input_tokens": written,
            "cache_read_input_tokens": cached, "cache_creation": {"ephemeral_5m_input_tokens": written,
                                                                  "ephemeral_1h_input_tokens": 0},
            "inference_geo": None, "output_tokens_details": None, "server_tool_use": None,
            "service_tier": "standard"}


def error_body(status: int, message: str, request_id: str) -> dict[str, Any]:
    kind = ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": message}, "request_id": request_id}


def blocks_text(content: Any, tool_results: bool = True) -> str:
    """Text of a string or of a block list (text blocks; with `tool_results`, their contents too)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    parts = []
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            parts.append(block.get("text", ""))
        elif block.get("type") == "tool_result" and tool_results:
            parts.append(blocks_text(block.get("content")))
    return " ".join(parts)


def _validate(body: Any, need_max_tokens: bool = True) -> list[dict[str, Any]]:
    if not isinstance(body, dict):
        raise ClientError(400, "Request body must be a JSON object.")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise ClientError(400, "model: Field required")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise ClientError(400, "messages: Field required (a non-empty list of messages)")
    limit = body.get("max_tokens")
    if need_max_tokens and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise ClientError(400, "max_tokens: Field required (an integer >= 1)")
    return messages


def _prompt_tokens(body: dict[str, Any], messages: list[dict[str, Any]]) -> int:
    return count_words(blocks_text(body.get("system"))) + sum(count_words(blocks_text(m.get("content")))
                                                              for m in messages)


def count_tokens(body: Any, knobs: dict[str, Any]) -> Reply:
    messages = _validate(body, need_max_tokens=False)
    return json_reply({"input_tokens": _prompt_tokens(body, messages)})


def _tool_to_call(body: dict[str, Any], knobs: dict[str, Any]) -> str | None:
    tools = body.get("tools")
    choice = body.get("tool_choice") if isinstance(body.get("tool_choice"), dict) else {}
    if not tools or choice.get("type") == "none":
        return None
    if knobs["tool_name"]:
        return knobs["tool_name"]
    if choice.get("type") == "tool" and choice.get("name"):
        return choice["name"]
    return (tools[0].get("name") if isinstance(tools[0], dict) else None) or "tool"


def sample(schema: Any, defs: dict[str, Any] | None = None, depth: int = 0) -> Any:
    """A value that fits a JSON schema: the reference model's structured answer. Strings are
    "text", integers 1, numbers 1.5, booleans true, arrays one item; `$ref`s into `$defs` followed."""
    if not isinstance(schema, dict) or depth > 8:
        return None
    if defs is None:
        defs = {**(schema.get("definitions") or {}), **(schema.get("$defs") or {})}
    if isinstance(schema.get("$ref"), str):
        return sample(defs.get(schema["$ref"].rsplit("/", 1)[-1]), defs, depth + 1)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return sample(schema[key][0], defs, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or "properties" in schema:
        return {name: sample(sub, defs, depth + 1) for name, sub in (schema.get("properties") or {}).items()}
    return {"array": lambda: [sample(schema.get("items"), defs, depth + 1)], "string": lambda: "text",
            "integer": lambda: 1, "number": lambda: 1.5, "boolean": lambda: True}.get(kind, lambda: None)()


def _arguments(body: dict[str, Any], knobs: dict[str, Any], tool: str) -> str:
    """The call's input: the `tool_arguments` knob, or, for a forced tool (tool_choice of that
    tool) while the knob is unset, a sample of the tool's input_schema."""
    choice = body.get("tool_choice") if isinstance(body.get("tool_choice"), dict) else {}
    if knobs["tool_arguments"] == {} and choice.get("type") == "tool" and choice.get("name") == tool:
        schema = next((t.get("input_schema") for t in body["tools"] if isinstance(t, dict) and t.get("name") == tool),
                      None)
        return dumps(sample(schema))
    return tool_arguments(knobs)


def _structured_text(body: dict[str, Any], knobs: dict[str, Any]) -> str | None:
    """The reply to `output_config.format` (a JSON schema): the `tool_arguments` knob when set,
    else a sample of the schema, as JSON text."""
    fmt = (body.get("output_config") or {}).get("format") if isinstance(body.get("output_config"), dict) else None
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
        return None
    return tool_arguments(knobs) if knobs["tool_arguments"] != {} else dumps(sample(fmt.get("schema")))


def _stop_at(text: str, stops: Any) -> tuple[str, str | None]:
    """The text up to the first of `stop_sequences` it holds, and that sequence (or None)."""
    found = [(text.find(s), s) for s in stops or () if isinstance(s, str) and s and s in text]
    if not found:
        return text, None
    at, sequence = min(found)
    return text[:at], sequence


def _thinking(body: dict[str, Any], user_text: str) -> dict[str, Any] | None:
    """A thinking block (with a signature) when the request turns thinking on."""
    thinking = body.get("thinking") if isinstance(body.get("thinking"), dict) else {}
    if thinking.get("type") not in ("enabled", "adaptive"):
        return None
    return {"type": "thinking", "thinking": "Thinking about: " + user_text, "signature": "sig-reference-upstream"}


def messages_create(body: Any, knobs: dict[str, Any]) -> Reply | Stream:
    messages = _validate(body)
    model = body["model"]
    input_tokens = _prompt_tokens(body, messages)
    # the last turn that is not a mid-conversation system turn (Claude Code sends those after the user's)
    last = next((m for m in reversed(messages) if m.get("role") != "system"), messages[-1])
    content = last.get("content")
    tool = None
    user = next((m for m in reversed(messages) if m.get("role") == "user"), {})
    user_text = blocks_text(user.get("content"), tool_results=False)
    if last.get("role") == "user" and isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in content):
        text = "Tool said: " + " ".join(blocks_text(b.get("content")) for b in content
                                        if isinstance(b, dict) and b.get("type") == "tool_result")
    elif last.get("role") == "user" and (tool := _tool_to_call(body, knobs)):
        text = ""
    else:
        structured = _structured_text(body, knobs)
        text = structured if structured is not None else default_reply(knobs, user_text)

    text, sequence = _stop_at(text, body.get("stop_sequences"))
    tokens, truncated = limit_tokens(split_tokens(text), body["max_tokens"])
    arguments = _arguments(body, knobs, tool) if tool else ""
    pieces = split_arguments(arguments) if tool else []
    output_tokens = 1 + len(pieces) if tool else len(tokens)
    stop_reason = "tool_use" if tool else ("max_tokens" if truncated else "stop_sequence" if sequence else "end_turn")
    sequence = sequence if stop_reason == "stop_sequence" else None
    thinking = _thinking(body, user_text)
    mid = "msg_" + uuid.uuid4().hex[:24]
    tool_id = "toolu_" + uuid.uuid4().hex[:24]
    usage = knobs["usage"]
    cached = min(knobs["cached_tokens"], input_tokens)  # Anthropic's input_tokens leaves the cache reads out
    written = min(knobs["cache_write_tokens"], input_tokens - cached)  # and the cache writes
    input_tokens -= cached + written

    if not body.get("stream"):
        if tool:
            try:
                tool_input = json.loads(arguments)
            except ValueError:
                tool_input = {}
            blocks = [{"type": "tool_use", "id": tool_id, "name": tool, "input": tool_input, "caller": DIRECT}]
        else:
            blocks = [{"type": "text", "text": "".join(tokens), "citations": None}]
        obj = {"id": mid, "type": "message", "role": "assistant", "model": model,
               "content": [thinking, *blocks] if thinking else blocks, "container": None, "stop_details": None,
               "stop_reason": stop_reason, "stop_sequence": sequence}
        if usage:
            obj["usage"] = message_usage(input_tokens, output_tokens, cached, written)
        return json_reply(obj)

    def event(name: str, data: dict[str, Any]) -> bytes:
        return f"event: {name}\ndata: {dumps(data)}\n\n".encode()

    start: dict[str, Any] = {"id": mid, "type": "message", "role": "assistant", "content": [], "model": model,
                             "container": None, "stop_details": None, "stop_reason": None, "stop_sequence": None}
    if usage:
        start["usage"] = message_usage(input_tokens, min(1, output_tokens), cached, written)
    head = [event("message_start", {"type": "message_start", "message": start})]
    index = 0
    if thinking:
        index = 1
        deltas = [{"type": "thinking_delta", "thinking": thinking["thinking"]},
                  {"type": "signature_delta", "signature": thinking["signature"]}]
        head += [event("content_block_start", {"type": "content_block_start", "index": 0,
                                               "content_block": {"type": "thinking", "thinking": "", "signature": ""}})]
        head += [event("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": d}) for d in deltas]
        head += [event("content_block_stop", {"type": "content_block_stop", "index": 0})]
    block = ({"type": "tool_use", "id": tool_id, "name": tool, "input": {}, "caller": DIRECT} if tool
             else {"type": "text", "text": "", "citations": None})
    head += [event("content_block_start", {"type": "content_block_start", "index": index, "content_block": block}),
             event("ping", {"type": "ping"})]
    if tool:
        frames = [b'event: content_block_delta\ndata: {"type":"content_block_delta","index":%d,'
                  b'"delta":{"type":"input_json_delta","partial_json":%s}}\n\n' % (index, dumps(p).encode())
                  for p in pieces]
    else:
        frames = [b'event: content_block_delta\ndata: {"type":"content_block_delta","index":%d,'
                  b'"delta":{"type":"text_delta","text":%s}}\n\n' % (index, dumps(t).encode()) for t in tokens]
    delta: dict[str, Any] = {"type": "message_delta", "delta": {"container": None, "stop_details": None,
                                                                 "stop_reason": stop_reason, "stop_sequence": sequence}}
    if usage:  # cumulative counts; the input's were given in message_start
        delta["usage"] = {"cache_creation_input_tokens": written, "cache_read_input_tokens": cached,
                          "input_tokens": input_tokens, "output_tokens": output_tokens,
                          "output_tokens_details": None, "server_tool_use": None}
    tail = [event("content_block_stop", {"type": "content_block_stop", "index": index}),
            event("message_delta", delta),
            event("message_stop", {"type": "message_stop"})]
    return Stream(head=head, tokens=frames, tail=tail)
