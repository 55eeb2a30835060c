"""Anthropic Messages -> the neutral chat format (OpenAI Chat Completions dicts), and the mappings
the other directions share (chat_to_anthropic.py for requests, anthropic_reply.py for whole replies,
anthropic_stream.py for streams). Plain dict building only: this runs per request and per streamed
event, so no validation models. Malformed client input raises a 400 `ApiError`.

A translation carries what the chat form can hold and names what it cannot: each translator takes
an optional `lost` list and appends the names of the fields it had to leave out (docs/
compatibility.md lists every field). The caller refuses them or, for a server that drops
unsupported fields, sends the rest (`gateway.upstream.providers.base.uncarried`).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from gateway.web.errors import ApiError
from gateway.web.validation import check_field_types, check_items

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
    "top_k": "integer", "stop_sequences": "array<string>", "metadata": {"user_id": "string"}, "thinking": "object",
    "service_tier": "string", "output_config": {"format": "object", "effort": "string"},
}
MESSAGE_FIELDS = {"role": "string", "content": "string|array"}

# Top-level fields the chat form carries (as what: messages_to_chat_request), and prompt-caching
# marks, which it has no place for but which need none: an OpenAI-compatible server caches prompt
# prefixes by itself (docs/compatibility.md, "cache_control").
CARRIED = frozenset({"model", "max_tokens", "messages", "system", "stream", "stop_sequences", "temperature", "top_p",
                     "top_k", "metadata", "tools", "tool_choice", "output_config", "cache_control"})
# Fields the chat form cannot carry, at the value that asks for nothing (any other value is lost).
NEUTRAL = {"thinking": lambda v: as_object(v).get("type") == "disabled", "service_tier": lambda v: v == "auto",
           "speed": lambda v: v == "standard"}
# Keys of a custom tool that ask nothing of the model (streaming and caching hints).
TOOL_HINTS = frozenset({"type", "name", "description", "input_schema", "strict", "cache_control",
                        "eager_input_streaming"})
# Block types that only a user turn may hold: in an assistant turn they are malformed (400).
USER_ONLY_BLOCKS = frozenset({"tool_result", "image", "document", "search_result"})
TOOL_ERROR_PREFIX = "Error: "  # how a failed tool's result (is_error) reads in the chat form


def bad_request(message: str) -> ApiError:
    return ApiError(400, message, code="invalid_request_error")


def as_object(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def new_id(prefix: str) -> str:
    return prefix + uuid.uuid4().hex[:24]


def parse_arguments(arguments: Any) -> dict:
    if isinstance(arguments, dict):
        return arguments
    try:
        value = json.loads(arguments) if arguments else {}
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def asks_for(value: Any) -> bool:
    """Whether a field asks for something: None, False and empty collections do not."""
    return value is not None and value is not False and value != {} and value != []


# ----------------------------------------------------------------------------- Anthropic request → chat


def messages_request_uncarried(body: dict) -> list[str]:
    """The names of the fields of a Messages request (valid: it has been through
    `messages_to_chat_request`) that its chat form cannot carry, for
    `gateway.upstream.providers.base.uncarried(server, fields)` when the server is OpenAI-compatible."""
    lost: list[str] = []
    messages_to_chat_request(body, lost=lost)
    return lost


def messages_to_chat_request(body: dict, *, lost: list[str] | None = None) -> dict:
    """The chat form of a Messages request. The names of what it leaves out go to `lost`."""
    if not isinstance(body, dict):
        raise bad_request("The request body must be a JSON object.")
    lost = [] if lost is None else lost
    check_field_types(body, MESSAGES_FIELDS, style="dot")
    check_items(body.get("messages"), MESSAGE_FIELDS, name="messages", style="dot")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise bad_request("messages: a non-empty list of messages is required.")
    for key, value in body.items():
        if key not in CARRIED and value is not None and not NEUTRAL.get(key, lambda v: False)(value):
            lost.append(key)
    out: list[dict] = []
    system = _system_text(body.get("system"), "system")
    if system:
        out.append({"role": "system", "content": system})
    for i, message in enumerate(messages):
        out.extend(_chat_messages(message, i, lost))

    req: dict[str, Any] = {"messages": out}
    for key in ("model", "max_tokens", "temperature", "top_p", "top_k", "stream"):
        if body.get(key) is not None:
            req[key] = body[key]
    if req.get("stream"):
        req["stream_options"] = {"include_usage": True}
    stops = body.get("stop_sequences")
    if stops:
        req["stop"] = stops
    metadata = as_object(body.get("metadata"))
    if metadata.get("user_id") is not None:
        req["user"] = metadata["user_id"]
    lost.extend(f"metadata.{key}" for key, value in metadata.items() if key != "user_id" and asks_for(value))
    _output_config(as_object(body.get("output_config")), req, lost)
    tools = body.get("tools")
    if tools:
        functions = [_function_tool(tool, i, lost) for i, tool in enumerate(tools)]
        if functions := [function for function in functions if function is not None]:
            req["tools"] = functions
    choice = body.get("tool_choice")
    if choice is not None:
        kind = choice.get("type")
        if isinstance(kind, str) and kind in CHOICE_TO_CHAT:
            req["tool_choice"] = CHOICE_TO_CHAT[kind]
        elif kind == "tool" and isinstance(choice.get("name"), str):
            req["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
        else:
            raise bad_request("tool_choice: type must be 'auto', 'any', 'none', or 'tool' with a name.")
        if choice.get("disable_parallel_tool_use") and req.get("tools"):
            req["parallel_tool_calls"] = False
    if not req.get("tools"):
        req.pop("tool_choice", None)  # only server tools were offered, and they were left out
    return req


def _output_config(config: dict, req: dict, lost: list[str]) -> None:
    """`format` (a JSON schema) → `response_format`; `effort` → `reasoning_effort`."""
    for key, value in config.items():
        if key == "format" and value is not None:
            if value.get("type") != "json_schema" or not isinstance(value.get("schema"), dict):
                raise bad_request("output_config.format: must be {type: 'json_schema', schema: {...}}.")
            schema = {"name": "output", "schema": value["schema"], "strict": True}
            req["response_format"] = {"type": "json_schema", "json_schema": schema}
        elif key == "effort" and value is not None:
            req["reasoning_effort"] = value
        elif key not in ("format", "effort") and asks_for(value):
            lost.append(f"output_config.{key}")


def _chat_messages(message: dict, i: int, lost: list[str]) -> list[dict]:
    role = message.get("role") if isinstance(message, dict) else None
    if role not in ("user", "assistant", "system"):
        raise bad_request(f"messages.{i}.role: must be 'user', 'assistant' or 'system'.")
    lost.extend(f"messages.{i}.{key}" for key, value in message.items()
                if key not in ("role", "content") and asks_for(value))
    content = message.get("content")
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    if not isinstance(content, list):
        raise bad_request(f"messages.{i}.content: must be a string or a list of content blocks.")
    if role == "assistant":
        return [_assistant_from_blocks(content, i, lost)]
    if role == "system":  # kept at its place in the conversation
        return [{"role": "system", "content": _system_text(content, f"messages.{i}.content")}]
    return _user_from_blocks(content, i, lost)


def _system_text(system: Any, where: str) -> str:
    if system is None or isinstance(system, str):
        return system or ""
    if not isinstance(system, list):
        raise bad_request(f"{where}: must be a string or a list of text blocks.")
    texts = []
    for k, block in enumerate(system):
        if as_object(block).get("type") != "text" or not isinstance(block.get("text"), str):
            raise bad_request(f"{where}.{k}: only text blocks are allowed here.")
        texts.append(block["text"])
    return "\n\n".join(texts)


def _function_tool(tool: dict, i: int, lost: list[str]) -> dict | None:
    """A custom tool as a chat function; None for a server tool (web search, code execution, ...),
    which runs on Anthropic's side and has no counterpart on a chat server."""
    kind = tool.get("type")
    if kind not in (None, "custom"):
        if not isinstance(kind, str):
            raise bad_request(f"tools.{i}.type: must be a string.")
        lost.append(f"tools.{i} ({kind})")
        return None
    if not isinstance(tool.get("name"), str):
        raise bad_request(f"tools.{i}: a custom tool needs a name and an input_schema.")
    function = {"name": tool["name"], "parameters": tool.get("input_schema") or {"type": "object", "properties": {}}}
    if tool.get("description"):
        function["description"] = tool["description"]
    if isinstance(tool.get("strict"), bool):
        function["strict"] = tool["strict"]
    lost.extend(f"tools.{i}.{key}" for key, value in tool.items() if key not in TOOL_HINTS and asks_for(value))
    return {"type": "function", "function": function}


def _source_url(source: dict, media_type: str) -> str | None:
    if source.get("type") == "base64" and isinstance(source.get("data"), str):
        return f"data:{source.get('media_type') or media_type};base64,{source['data']}"
    return None


def _part(block: Any, where: str, lost: list[str]) -> list[dict]:
    """A user-side content block as chat content parts: none for a block that is left out."""
    kind = block.get("type") if isinstance(block, dict) else None
    if kind == "text":
        if not isinstance(block.get("text"), str):
            raise bad_request(f"{where}.text: must be a string.")
        return [{"type": "text", "text": block["text"]}]
    if kind == "image":
        source = as_object(block.get("source"))
        url = _source_url(source, "image/png") or (source.get("url") if source.get("type") == "url" else None)
        if isinstance(url, str):
            return [{"type": "image_url", "image_url": {"url": url}}]
        if source.get("type") == "file":
            lost.append(f"{where}.source (file)")
            return []
        raise bad_request(f"{where}.source: an image needs a base64 or url source.")
    if kind == "document":
        return _document(block, where, lost)
    if kind == "search_result":
        texts = [b.get("text") for b in block.get("content") or [] if isinstance(as_object(b).get("text"), str)]
        head = " ".join(str(block[key]) for key in ("title", "source") if block.get(key))
        return [{"type": "text", "text": "\n".join([head, *texts] if head else texts)}]
    if kind in ("thinking", "redacted_thinking"):
        return []
    if kind in ("tool_use", None) or not isinstance(kind, str):
        raise bad_request(f"{where}.type: content blocks of type {kind!r} are not allowed in user messages.")
    lost.append(f"{where} ({kind})")  # container_upload, a server tool's result, a block type of a later API
    return []


def _document(block: dict, where: str, lost: list[str]) -> list[dict]:
    """A text document as text, a base64 PDF as a chat file part, a content document as its blocks."""
    source = as_object(block.get("source"))
    if as_object(block.get("citations")).get("enabled"):
        lost.append(f"{where}.citations")
    if source.get("type") == "text" and isinstance(source.get("data"), str):
        return [{"type": "text", "text": source["data"]}]
    if url := _source_url(source, "application/pdf"):
        file = {"file_data": url, "filename": block.get("title") or "document.pdf"}
        return [{"type": "file", "file": file}]
    if source.get("type") == "content":
        inner = source.get("content")
        if isinstance(inner, str):
            return [{"type": "text", "text": inner}]
        if not isinstance(inner, list):
            raise bad_request(f"{where}.source.content: must be a string or a list of blocks.")
        return [p for k, b in enumerate(inner) for p in _part(b, f"{where}.source.content.{k}", lost)]
    if source.get("type") in ("url", "file"):
        lost.append(f"{where}.source ({source['type']})")
        return []
    raise bad_request(f"{where}.source: a document needs a text, base64, content, url or file source.")


def _user_from_blocks(blocks: list, i: int, lost: list[str]) -> list[dict]:
    """Tool results become `role: tool` messages first; the other blocks a following user message."""
    tool_messages: list[dict] = []
    parts: list[dict] = []
    for j, block in enumerate(blocks):
        where = f"messages.{i}.content.{j}"
        if as_object(block).get("type") != "tool_result":
            parts.extend(_part(block, where, lost))
            continue
        if not isinstance(block.get("tool_use_id"), str):
            raise bad_request(f"{where}.tool_use_id: required.")
        tool_messages.append(_tool_message(block, where, parts, lost))
    if len(parts) == 1 and parts[0]["type"] == "text":
        tool_messages.append({"role": "user", "content": parts[0]["text"]})
    elif parts or not tool_messages:
        tool_messages.append({"role": "user", "content": parts or ""})
    return tool_messages


def _tool_message(block: dict, where: str, parts: list[dict], lost: list[str]) -> dict:
    """A tool result as a chat tool message: its text blocks one text part each (a chat tool
    message holds text only, so images and files follow in the user message, `parts`), and a
    failure (`is_error`) said in the text, which the chat form has no flag for."""
    content = block.get("content")
    texts: list[str] = []
    if isinstance(content, str):
        texts.append(content)
    elif isinstance(content, list):
        for k, inner in enumerate(content):
            for part in _part(inner, f"{where}.content.{k}", lost):
                if part["type"] == "text":
                    texts.append(part["text"])
                else:
                    parts.append(part)
    elif content is not None:
        raise bad_request(f"{where}.content: must be a string or a list of blocks.")
    if block.get("is_error"):
        texts = [TOOL_ERROR_PREFIX + texts[0], *texts[1:]] if texts else [TOOL_ERROR_PREFIX + "the tool failed."]
    text: Any = texts[0] if len(texts) == 1 else [{"type": "text", "text": t} for t in texts] if texts else ""
    return {"role": "tool", "tool_call_id": block["tool_use_id"], "content": text}


def _assistant_from_blocks(blocks: list, i: int, lost: list[str]) -> dict:
    """Text and tool calls. Thinking is left out of the history: chat servers take no reasoning
    back (DeepSeek refuses it), and its signature only means something to Anthropic."""
    texts: list[str] = []
    calls: list[dict] = []
    for j, block in enumerate(blocks):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "tool_use":
            if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str):
                raise bad_request(f"messages.{i}.content.{j}: a tool_use block needs an id and a name.")
            function = {"name": block["name"], "arguments": json.dumps(block.get("input") or {}, ensure_ascii=False)}
            calls.append({"id": block["id"], "type": "function", "function": function})
        elif kind in ("thinking", "redacted_thinking"):
            continue
        elif not isinstance(kind, str) or kind in USER_ONLY_BLOCKS or kind == "text":
            raise bad_request(f"messages.{i}.content.{j}.type: assistant messages cannot carry {kind!r} blocks.")
        else:
            lost.append(f"messages.{i}.content.{j} ({kind})")  # server_tool_use, web_search_tool_result, ...
    message: dict[str, Any] = {"role": "assistant", "content": "".join(texts) if texts or not calls else None}
    if calls:
        message["tool_calls"] = calls
    return message
