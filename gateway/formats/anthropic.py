"""Anthropic Messages <-> the neutral chat format (OpenAI Chat Completions dicts): requests, both
ways, and the mappings the replies (anthropic_reply.py) and the streams (anthropic_stream.py)
share. Plain dict building only: this runs per request and per streamed event, so no validation
models. Malformed client input raises a 400 `ApiError`.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from gateway.errors import ApiError
from gateway.validation import check_field_types, check_items

STOP_TO_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "pause_turn": "stop", "max_tokens": "length",
                  "model_context_window_exceeded": "length", "tool_use": "tool_calls", "refusal": "content_filter"}
FINISH_TO_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "function_call": "tool_use",
                  "content_filter": "refusal"}
CHOICE_TO_CHAT = {"auto": "auto", "any": "required", "none": "none"}
CHOICE_TO_ANTHROPIC = {"auto": "auto", "required": "any", "none": "none"}

# The types of a Messages request's fields (Anthropic's API reference); a wrong one is a 400 naming it.
MESSAGES_FIELDS = {
    "model": "string", "max_tokens": "integer", "messages": "array", "system": "string|array", "stream": "boolean",
    "tools": "array<object>", "tool_choice": "object", "temperature": "number", "top_p": "number",
    "top_k": "integer", "stop_sequences": "array<string>", "metadata": "object", "thinking": "object",
    "service_tier": "string",
}
MESSAGE_FIELDS = {"role": "string", "content": "string|array"}


def _bad(message: str) -> ApiError:
    return ApiError(400, message, code="invalid_request_error")


def _obj(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _new_id(prefix: str) -> str:
    return prefix + uuid.uuid4().hex[:24]


def _parse_args(arguments: Any) -> dict:
    if isinstance(arguments, dict):
        return arguments
    try:
        value = json.loads(arguments) if arguments else {}
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


# ----------------------------------------------------------------------------- Anthropic request → chat


def messages_to_chat_request(body: dict) -> dict:
    if not isinstance(body, dict):
        raise _bad("The request body must be a JSON object.")
    check_field_types(body, MESSAGES_FIELDS, style="dot")
    check_items(body.get("messages"), MESSAGE_FIELDS, name="messages", style="dot")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _bad("messages: a non-empty list of messages is required.")
    out: list[dict] = []
    system = _system_text(body.get("system"), "system")
    if system:
        out.append({"role": "system", "content": system})
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ("user", "assistant", "system"):
            raise _bad(f"messages.{i}.role: must be 'user' or 'assistant'.")
        content = message.get("content")
        if isinstance(content, str):
            out.append({"role": role, "content": content})
        elif not isinstance(content, list):
            raise _bad(f"messages.{i}.content: must be a string or a list of content blocks.")
        elif role == "assistant":
            out.append(_assistant_from_blocks(content, i))
        elif role == "system":
            out.append({"role": "system", "content": _system_text(content, f"messages.{i}.content")})
        else:
            out.extend(_user_from_blocks(content, i))

    req: dict[str, Any] = {"messages": out}
    for key in ("model", "max_tokens", "temperature", "top_p", "stream"):
        if body.get(key) is not None:
            req[key] = body[key]
    if req.get("stream"):
        req["stream_options"] = {"include_usage": True}
    stops = body.get("stop_sequences")
    if stops:
        if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
            raise _bad("stop_sequences: must be a list of strings.")
        req["stop"] = stops
    tools = body.get("tools")
    if tools:
        if not isinstance(tools, list):
            raise _bad("tools: must be a list.")
        req["tools"] = [_function_tool(tool, i) for i, tool in enumerate(tools)]
    choice = body.get("tool_choice")
    if choice is not None:
        kind = _obj(choice).get("type")
        if isinstance(kind, str) and kind in CHOICE_TO_CHAT:
            req["tool_choice"] = CHOICE_TO_CHAT[kind]
        elif kind == "tool" and isinstance(choice.get("name"), str):
            req["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
        else:
            raise _bad("tool_choice: type must be 'auto', 'any', 'none', or 'tool' with a name.")
        if choice.get("disable_parallel_tool_use") and tools:
            req["parallel_tool_calls"] = False
    return req


def _system_text(system: Any, where: str) -> str:
    if system is None or isinstance(system, str):
        return system or ""
    if not isinstance(system, list):
        raise _bad(f"{where}: must be a string or a list of text blocks.")
    texts = []
    for k, block in enumerate(system):
        if _obj(block).get("type") != "text" or not isinstance(block.get("text"), str):
            raise _bad(f"{where}.{k}: only text blocks are allowed here.")
        texts.append(block["text"])
    return "\n\n".join(texts)


def _function_tool(tool: Any, i: int) -> dict:
    tool = _obj(tool)
    if tool.get("type") not in (None, "custom") or not isinstance(tool.get("name"), str):
        kind = tool.get("type")
        raise _bad(f"tools.{i}: only custom tools with a name and input_schema are supported (got type {kind!r}).")
    function = {"name": tool["name"], "parameters": tool.get("input_schema") or {"type": "object", "properties": {}}}
    if tool.get("description"):
        function["description"] = tool["description"]
    return {"type": "function", "function": function}


def _part(block: Any, where: str) -> dict | None:
    """A user-side content block as a chat content part; None for blocks that are dropped."""
    kind = block.get("type") if isinstance(block, dict) else None
    if kind == "text":
        if not isinstance(block.get("text"), str):
            raise _bad(f"{where}.text: must be a string.")
        return {"type": "text", "text": block["text"]}
    if kind == "image":
        source = _obj(block.get("source"))
        if source.get("type") == "base64" and isinstance(source.get("data"), str):
            url = f"data:{source.get('media_type') or 'image/png'};base64,{source['data']}"
        elif source.get("type") == "url" and isinstance(source.get("url"), str):
            url = source["url"]
        else:
            raise _bad(f"{where}.source: an image needs a base64 or url source.")
        return {"type": "image_url", "image_url": {"url": url}}
    if kind == "document":
        source = _obj(block.get("source"))
        if source.get("type") == "text" and isinstance(source.get("data"), str):
            return {"type": "text", "text": source["data"]}
        raise _bad(f"{where}: only documents with a text source are supported.")
    if kind in ("thinking", "redacted_thinking"):
        return None
    raise _bad(f"{where}.type: content blocks of type {kind!r} are not supported in user messages.")


def _user_from_blocks(blocks: list, i: int) -> list[dict]:
    """Tool results become `role: tool` messages first; the other blocks a following user message."""
    tool_messages: list[dict] = []
    parts: list[dict] = []
    for j, block in enumerate(blocks):
        where = f"messages.{i}.content.{j}"
        if _obj(block).get("type") != "tool_result":
            part = _part(block, where)
            if part is not None:
                parts.append(part)
            continue
        if not isinstance(block.get("tool_use_id"), str):
            raise _bad(f"{where}.tool_use_id: required.")
        content = block.get("content")
        texts: list[str] = []
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            for k, inner in enumerate(content):
                part = _part(inner, f"{where}.content.{k}")
                if part is not None and part["type"] == "text":
                    texts.append(part["text"])
                elif part is not None:  # an image: tool messages carry text only, so it follows as user content
                    parts.append(part)
        elif content is not None:
            raise _bad(f"{where}.content: must be a string or a list of blocks.")
        tool_messages.append({"role": "tool", "tool_call_id": block["tool_use_id"], "content": "\n".join(texts)})
    if len(parts) == 1 and parts[0]["type"] == "text":
        tool_messages.append({"role": "user", "content": parts[0]["text"]})
    elif parts or not tool_messages:
        tool_messages.append({"role": "user", "content": parts or ""})
    return tool_messages


def _assistant_from_blocks(blocks: list, i: int) -> dict:
    texts: list[str] = []
    calls: list[dict] = []
    for j, block in enumerate(blocks):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "tool_use":
            if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str):
                raise _bad(f"messages.{i}.content.{j}: a tool_use block needs an id and a name.")
            function = {"name": block["name"], "arguments": json.dumps(block.get("input") or {}, ensure_ascii=False)}
            calls.append({"id": block["id"], "type": "function", "function": function})
        elif kind not in ("thinking", "redacted_thinking"):
            raise _bad(f"messages.{i}.content.{j}.type: assistant messages cannot carry {kind!r} blocks.")
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts or not calls else None}
    if calls:
        message["tool_calls"] = calls
    return message


# ----------------------------------------------------------------------------- chat request → Anthropic


def chat_to_messages_request(body: dict, *, default_max_tokens: int = 4096) -> dict:
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list) or not messages:
        raise _bad("messages: a non-empty list of messages is required.")
    system: list[str] = []
    turns: list[dict] = []
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        where = f"messages.{i}"
        if role in ("system", "developer"):
            text = _chat_text(message.get("content"), f"{where}.content")
            if text:
                system.append(text)
            continue
        if role == "user":
            blocks = _user_blocks(message.get("content"), where)
        elif role == "assistant":
            blocks = _assistant_blocks(message, where)
        elif role == "tool":
            if not isinstance(message.get("tool_call_id"), str):
                raise _bad(f"{where}.tool_call_id: required.")
            result = {"type": "tool_result", "tool_use_id": message["tool_call_id"]}
            text = _chat_text(message.get("content"), f"{where}.content")
            if text:
                result["content"] = text
            role, blocks = "user", [result]
        else:
            raise _bad(f"{where}.role: unsupported role {role!r}.")
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:  # Anthropic requires alternating roles
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    if not turns:
        raise _bad("messages: at least one user or assistant message with content is required.")
    for turn in turns:  # tool results must lead their user message
        if turn["role"] == "user":
            turn["content"].sort(key=lambda block: block["type"] != "tool_result")

    req: dict[str, Any] = {"messages": turns}
    if body.get("model") is not None:
        req["model"] = body["model"]
    req["max_tokens"] = body.get("max_completion_tokens") or body.get("max_tokens") or default_max_tokens
    if system:
        req["system"] = "\n\n".join(system)
    stop = body.get("stop")
    if isinstance(stop, str):
        req["stop_sequences"] = [stop]
    elif isinstance(stop, list) and stop:
        req["stop_sequences"] = [s for s in stop if isinstance(s, str)]
    if isinstance(body.get("temperature"), (int, float)):
        req["temperature"] = min(body["temperature"], 1.0)  # OpenAI allows 0–2, Anthropic 0–1
    for key in ("top_p", "stream"):
        if body.get(key) is not None:
            req[key] = body[key]
    tools = body.get("tools")
    if tools:
        req["tools"] = [_anthropic_tool(tool, k) for k, tool in enumerate(tools)]
        choice = body.get("tool_choice")
        if isinstance(choice, str) and choice in CHOICE_TO_ANTHROPIC:
            tc = {"type": CHOICE_TO_ANTHROPIC[choice]}
        elif isinstance(_obj(_obj(choice).get("function")).get("name"), str):
            tc = {"type": "tool", "name": choice["function"]["name"]}
        elif choice is None:
            tc = None
        else:
            raise _bad("tool_choice: must be 'auto', 'required', 'none' or a named function.")
        if body.get("parallel_tool_calls") is False and (tc or {}).get("type") != "none":
            tc = {**(tc or {"type": "auto"}), "disable_parallel_tool_use": True}
        if tc:
            req["tool_choice"] = tc
    return req


def _chat_text(content: Any, where: str) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise _bad(f"{where}: must be a string or a list of content parts.")
    texts = []
    for k, part in enumerate(content):
        kind = _obj(part).get("type")
        text = part.get("text") if kind == "text" else part.get("refusal") if kind == "refusal" else None
        if not isinstance(text, str):
            raise _bad(f"{where}.{k}: only text parts are allowed here.")
        texts.append(text)
    return "\n".join(texts)


def _user_blocks(content: Any, where: str) -> list[dict]:
    if content is None or isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if not isinstance(content, list):
        raise _bad(f"{where}.content: must be a string or a list of content parts.")
    blocks = []
    for k, part in enumerate(content):
        kind = _obj(part).get("type")
        if kind == "text" and isinstance(part.get("text"), str):
            if part["text"]:
                blocks.append({"type": "text", "text": part["text"]})
        elif kind == "image_url":
            image = part.get("image_url")
            blocks.append(_image_block(image.get("url") if isinstance(image, dict) else image, f"{where}.content.{k}"))
        else:
            raise _bad(f"{where}.content.{k}.type: content parts of type {kind!r} cannot be sent to this model.")
    return blocks


def _image_block(url: Any, where: str) -> dict:
    if isinstance(url, str) and url.startswith("data:"):
        head, comma, data = url[5:].partition(",")
        if comma and head.endswith(";base64"):
            media_type = head.split(";", 1)[0] or "image/png"
            return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}
    elif isinstance(url, str) and url.startswith(("http://", "https://")):
        return {"type": "image", "source": {"type": "url", "url": url}}
    raise _bad(f"{where}.image_url.url: must be an http(s) URL or a base64 data URL.")


def _assistant_blocks(message: dict, where: str) -> list[dict]:
    text = _chat_text(message.get("content"), f"{where}.content")
    blocks: list[dict] = [{"type": "text", "text": text}] if text else []
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        raise _bad(f"{where}.tool_calls: must be a list.")
    for k, call in enumerate(calls):
        function = _obj(_obj(call).get("function"))
        if not isinstance(function.get("name"), str):
            raise _bad(f"{where}.tool_calls.{k}.function.name: required.")
        blocks.append({"type": "tool_use", "id": call.get("id") or _new_id("toolu_"), "name": function["name"],
                       "input": _parse_args(function.get("arguments"))})
    return blocks


def _anthropic_tool(tool: Any, k: int) -> dict:
    function = _obj(_obj(tool).get("function"))
    if _obj(tool).get("type") != "function" or not isinstance(function.get("name"), str):
        raise _bad(f"tools.{k}: only function tools with a name are supported.")
    out = {"name": function["name"], "input_schema": function.get("parameters") or {"type": "object", "properties": {}}}
    if function.get("description"):
        out["description"] = function["description"]
    return out
