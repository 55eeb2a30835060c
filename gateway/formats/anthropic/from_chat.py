"""The neutral chat form (OpenAI Chat Completions dicts) -> an Anthropic Messages request, for
every surface calling an Anthropic server (gateway/upstream/providers/anthropic.py). What the Messages
form cannot hold is named in `lost` (gateway/formats/anthropic/to_chat.py, module docstring), so the
provider can refuse it or, for a server that drops unsupported fields, leave it out."""

from __future__ import annotations

import re
from typing import Any

from gateway.formats.anthropic.to_chat import (
    CHOICE_TO_ANTHROPIC,
    as_object,
    asks_for,
    bad_request,
    new_id,
    parse_arguments,
)

# Top-level chat fields carried (as what: chat_to_messages_request); prompt-caching hints, which
# need no place: they ask nothing of the model (docs/compatibility.md, "cache_control"); and
# `metadata`, the call's tags, which the gateway keeps with the call: they annotate it and ask nothing
# of the model either (a Messages request's own `metadata` takes only `user_id`, from `user`).
CARRIED = frozenset({"model", "messages", "stream", "stream_options", "max_tokens", "max_completion_tokens",
                     "temperature", "top_p", "top_k", "stop", "tools", "tool_choice", "parallel_tool_calls", "user",
                     "safety_identifier", "response_format", "reasoning_effort", "service_tier",
                     "prompt_cache_key", "prompt_cache_retention", "prompt_cache_options", "metadata"})
# Fields with no place in a Messages request, at the value that asks for nothing; any other value is lost.
NEUTRAL = {"n": lambda v: v == 1, "logprobs": lambda v: v is False, "top_logprobs": lambda v: v == 0,
           "presence_penalty": lambda v: v == 0, "frequency_penalty": lambda v: v == 0,
           "logit_bias": lambda v: v == {}, "store": lambda v: v is False, "modalities": lambda v: v == ["text"]}
MESSAGE_KEYS = frozenset({"role", "content", "tool_call_id", "tool_calls", "refusal", "annotations",
                          "reasoning_content", "reasoning"})
EFFORT = {"minimal": "low", "low": "low", "medium": "medium", "high": "high", "xhigh": "xhigh", "max": "max"}
SERVICE_TIER = {"auto": "auto", "default": "standard_only"}
OUTPUT_TOOL = "json_output"  # the forced tool that carries a response_format, unless its schema has a free name
OUTPUT_TOOL_DESCRIPTION = "Give your answer as this tool's input: the input is the reply, in the JSON it describes."
_TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def chat_request_uncarried(body: dict, *, structured_output: str = "tool") -> list[str]:
    """The names of the fields of a chat request that a Messages request cannot carry."""
    lost: list[str] = []
    chat_to_messages_request(body, structured_output=structured_output, lost=lost)
    return lost


def output_tool_name(body: dict, structured_output: str = "tool") -> str | None:
    """The forced tool that carries the request's `response_format` (its reply is the JSON),
    or None: a json_schema goes by tool when the server's `structured_output` is "tool", a
    json_object always (a free-form object is no output_config format)."""
    fmt = as_object(body.get("response_format"))
    kind = fmt.get("type")
    if kind != "json_object" and not (kind == "json_schema" and structured_output == "tool"):
        return None
    name = as_object(fmt.get("json_schema")).get("name")
    taken = {as_object(as_object(tool).get("function")).get("name") for tool in body.get("tools") or []}
    if isinstance(name, str) and _TOOL_NAME.fullmatch(name) and name not in taken:
        return name
    return OUTPUT_TOOL


def chat_to_messages_request(body: dict, *, default_max_tokens: int = 4096, structured_output: str = "tool",
                             lost: list[str] | None = None) -> dict:
    """The Messages form of a chat request. The names of what it leaves out go to `lost`."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list) or not messages:
        raise bad_request("messages: a non-empty list of messages is required.")
    lost = [] if lost is None else lost
    for key, value in body.items():
        if key not in CARRIED and value is not None and not NEUTRAL.get(key, lambda v: False)(value):
            lost.append(key)
    system: list[str] = []
    turns: list[dict] = []
    for i, message in enumerate(messages):
        role, blocks = _turn(message, f"messages.{i}", system, lost)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:  # Anthropic requires alternating roles
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    if not turns:
        raise bad_request("messages: at least one user or assistant message with content is required.")
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
    for key in ("top_p", "top_k", "stream"):
        if body.get(key) is not None:
            req[key] = body[key]
    _who(body, req, lost)
    _effort(body.get("reasoning_effort"), req, lost)
    _tools(body, req, structured_output, lost)
    return req


def _who(body: dict, req: dict, lost: list[str]) -> None:
    """`user` (or `safety_identifier`, its successor) → metadata.user_id; `service_tier` as far as
    the tiers match."""
    user, safety = body.get("user"), body.get("safety_identifier")
    if user is not None or safety is not None:
        req["metadata"] = {"user_id": user if user is not None else safety}
        if user is not None and safety is not None and user != safety:
            lost.append("safety_identifier")
    tier = body.get("service_tier")
    if tier is not None:
        if tier in SERVICE_TIER:
            req["service_tier"] = SERVICE_TIER[tier]
        else:
            lost.append("service_tier")


def _effort(effort: Any, req: dict, lost: list[str]) -> None:
    """`reasoning_effort` → `output_config.effort` (how much the model thinks and writes); "none"
    turns thinking off."""
    if effort is None:
        return
    if effort == "none":
        req["thinking"] = {"type": "disabled"}
    elif effort in EFFORT:
        req.setdefault("output_config", {})["effort"] = EFFORT[effort]
    else:
        lost.append("reasoning_effort")


def _tools(body: dict, req: dict, structured_output: str, lost: list[str]) -> None:
    """tools and tool_choice, with the tool a `response_format` may add (`output_tool_name`)."""
    tools = [_anthropic_tool(tool, k) for k, tool in enumerate(body.get("tools") or [])]
    choice = body.get("tool_choice")
    if isinstance(choice, str) and choice in CHOICE_TO_ANTHROPIC:
        tc = {"type": CHOICE_TO_ANTHROPIC[choice]}
    elif isinstance(as_object(as_object(choice).get("function")).get("name"), str):
        tc = {"type": "tool", "name": choice["function"]["name"]}
    elif choice is None:
        tc = None
    else:
        raise bad_request("tool_choice: must be 'auto', 'required', 'none' or a named function.")
    fmt = as_object(body.get("response_format"))
    if fmt.get("type") not in (None, "text", "json_object", "json_schema"):
        lost.append("response_format")
    schema = as_object(fmt.get("json_schema")).get("schema") or {"type": "object"}
    if name := output_tool_name(body, structured_output):
        description = as_object(fmt.get("json_schema")).get("description") or OUTPUT_TOOL_DESCRIPTION
        input_schema = schema if fmt.get("type") == "json_schema" else {"type": "object"}
        tools.append({"name": name, "description": description, "input_schema": input_schema})
        if tc is None or tc["type"] in ("auto", "any"):
            tc = {"type": "any" if len(tools) > 1 else "tool", **({} if len(tools) > 1 else {"name": name})}
        elif tc["type"] == "none":
            tc = {"type": "tool", "name": name}
    elif fmt.get("type") == "json_schema":
        req.setdefault("output_config", {})["format"] = {"type": "json_schema", "schema": schema}
    if not tools:
        return
    req["tools"] = tools
    if body.get("parallel_tool_calls") is False and (tc or {}).get("type") != "none":
        tc = {**(tc or {"type": "auto"}), "disable_parallel_tool_use": True}
    if tc:
        req["tool_choice"] = tc


def _turn(message: Any, where: str, system: list[str], lost: list[str]) -> tuple[str, list[dict]]:
    """A chat message as (Anthropic role, blocks); a system or developer message's text goes to
    `system`, in order (Messages have one system prompt, no system turn)."""
    role = message.get("role") if isinstance(message, dict) else None
    if role is not None:
        lost.extend(f"{where}.{key}" for key, value in message.items() if key not in MESSAGE_KEYS and asks_for(value))
    if role in ("system", "developer"):
        text = _chat_text(message.get("content"), f"{where}.content")
        if text:
            system.append(text)
        return role, []
    if role == "user":
        return role, _user_blocks(message.get("content"), where, lost)
    if role == "assistant":
        return role, _assistant_blocks(message, where)
    if role == "tool":
        if not isinstance(message.get("tool_call_id"), str):
            raise bad_request(f"{where}.tool_call_id: required.")
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": message["tool_call_id"]}
        texts = _chat_texts(message.get("content"), f"{where}.content")
        if len(texts) == 1:
            result["content"] = texts[0]
        elif texts:  # block by block
            result["content"] = [{"type": "text", "text": text} for text in texts]
        return "user", [result]
    raise bad_request(f"{where}.role: unsupported role {role!r}.")


def _chat_texts(content: Any, where: str) -> list[str]:
    if content is None or isinstance(content, str):
        return [content] if content else []
    if not isinstance(content, list):
        raise bad_request(f"{where}: must be a string or a list of content parts.")
    texts = []
    for k, part in enumerate(content):
        kind = as_object(part).get("type")
        text = part.get("text") if kind == "text" else part.get("refusal") if kind == "refusal" else None
        if not isinstance(text, str):
            raise bad_request(f"{where}.{k}: only text parts are allowed here.")
        if text:
            texts.append(text)
    return texts


def _chat_text(content: Any, where: str) -> str:
    return "\n".join(_chat_texts(content, where))


def _user_blocks(content: Any, where: str, lost: list[str]) -> list[dict]:
    if content is None or isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if not isinstance(content, list):
        raise bad_request(f"{where}.content: must be a string or a list of content parts.")
    blocks = []
    for k, part in enumerate(content):
        kind, at = as_object(part).get("type"), f"{where}.content.{k}"
        if kind == "text" and isinstance(part.get("text"), str):
            if part["text"]:
                blocks.append({"type": "text", "text": part["text"]})
        elif kind == "image_url":
            image = part.get("image_url")
            blocks.append(_image_block(image.get("url") if isinstance(image, dict) else image, at))
        elif kind == "file" and (document := _document_block(as_object(part.get("file")))):
            blocks.append(document)
        elif isinstance(kind, str) and kind != "text":
            lost.append(f"{at} ({kind})")  # input_audio, an uploaded file (file_id), a later part type
        else:
            raise bad_request(f"{at}.type: content parts of type {kind!r} cannot be sent to this model.")
    return blocks


def _document_block(file: dict) -> dict | None:
    """A file part sent inline (a base64 data URL) as a document block; None for an uploaded file."""
    data = file.get("file_data")
    if not isinstance(data, str) or not data.startswith("data:"):
        return None
    head, comma, payload = data[5:].partition(",")
    if not comma or not head.endswith(";base64"):
        return None
    source = {"type": "base64", "media_type": head.split(";", 1)[0] or "application/pdf", "data": payload}
    block: dict[str, Any] = {"type": "document", "source": source}
    if isinstance(file.get("filename"), str):
        block["title"] = file["filename"]
    return block


def _image_block(url: Any, where: str) -> dict:
    if isinstance(url, str) and url.startswith("data:"):
        head, comma, data = url[5:].partition(",")
        if comma and head.endswith(";base64"):
            media_type = head.split(";", 1)[0] or "image/png"
            return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}
    elif isinstance(url, str) and url.startswith(("http://", "https://")):
        return {"type": "image", "source": {"type": "url", "url": url}}
    raise bad_request(f"{where}.image_url.url: must be an http(s) URL or a base64 data URL.")


def _assistant_blocks(message: dict, where: str) -> list[dict]:
    """Text and tool calls. Reasoning (`reasoning_content`) is left out: Anthropic takes thinking
    back only with the signature it made."""
    text = _chat_text(message.get("content"), f"{where}.content")
    blocks: list[dict] = [{"type": "text", "text": text}] if text else []
    calls = message.get("tool_calls") or []
    if not isinstance(calls, list):
        raise bad_request(f"{where}.tool_calls: must be a list.")
    for k, call in enumerate(calls):
        function = as_object(as_object(call).get("function"))
        if not isinstance(function.get("name"), str):
            raise bad_request(f"{where}.tool_calls.{k}.function.name: required.")
        blocks.append({"type": "tool_use", "id": call.get("id") or new_id("toolu_"), "name": function["name"],
                       "input": parse_arguments(function.get("arguments"))})
    return blocks


def _anthropic_tool(tool: Any, k: int) -> dict:
    function = as_object(as_object(tool).get("function"))
    if as_object(tool).get("type") != "function" or not isinstance(function.get("name"), str):
        raise bad_request(f"tools.{k}: only function tools with a name are supported.")
    out = {"name": function["name"], "input_schema": function.get("parameters") or {"type": "object", "properties": {}}}
    if function.get("description"):
        out["description"] = function["description"]
    if isinstance(function.get("strict"), bool):
        out["strict"] = function["strict"]
    return out
