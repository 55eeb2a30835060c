"""The neutral chat form (OpenAI Chat Completions dicts) -> a Converse / ConverseStream request body,
for every Bedrock model that is not Claude. The model id goes in the path, not the body. What the
Converse request cannot hold is named in `lost`, as the Anthropic translation does
(gateway/formats/anthropic/to_chat.py, module docstring), so the provider can refuse it or, for a
server that drops unsupported fields, leave it out. docs/compatibility.md, "AWS Bedrock (Converse)",
says what each field becomes."""

from __future__ import annotations

import json
import re
from typing import Any

from gateway.formats.anthropic.from_chat import (
    CARRIED,
    NEUTRAL,
    OUTPUT_TOOL_DESCRIPTION,
    output_tool_name,
)
from gateway.formats.anthropic.to_chat import as_object, bad_request
from gateway.formats.converse import families
from gateway.formats.converse.blocks import Conversation

# OpenAI's service tiers Bedrock has too ("auto", the default, is nothing to send).
SERVICE_TIERS = frozenset({"default", "flex", "priority"})
# A requestMetadata value (Bedrock's pattern): `user` goes there when it fits.
_METADATA_VALUE = re.compile(r"[a-zA-Z0-9\s:_@$#=/+,\-.]{0,256}")
_CHOICES = {"auto": {"auto": {}}, "required": {"any": {}}}


def converse_request_uncarried(body: dict, *, model_id: str | None = None,
                               structured_output: str = "tool") -> list[str]:
    """The names of the fields of a chat request that a Converse request cannot carry."""
    lost: list[str] = []
    chat_to_converse_request(body, lost=lost, model_id=model_id, structured_output=structured_output)
    return lost


def chat_to_converse_request(body: dict, *, lost: list[str] | None = None, model_id: str | None = None,
                             structured_output: str = "tool") -> dict:
    """The Converse form of a chat request; the names of what it leaves out go to `lost`.

    `model_id` is the Bedrock model id (or inference profile) the request goes to, which says its family
    (families.py); without it the body's `model` is read. `structured_output` is the server's setting
    for a `response_format` json_schema: "tool" (a forced tool, which every model with tools takes) or
    "output_config" (Converse's own `outputConfig.textFormat`, on the models Bedrock lists for it)."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list) or not messages:
        raise bad_request("messages: a non-empty list of messages is required.")
    lost = [] if lost is None else lost
    for key, value in body.items():
        if key not in CARRIED and value is not None and not NEUTRAL.get(key, lambda v: False)(value):
            lost.append(key)
    kind = families.family(model_id if model_id is not None else body.get("model"))
    req: dict[str, Any] = {}
    tool_config = _tools(body, kind, structured_output, req, lost)
    conversation = Conversation(kind, lost, tools_offered=tool_config is not None)
    for i, message in enumerate(messages):
        conversation.add(message, f"messages.{i}")
    conversation.finish()
    req = {"messages": conversation.turns, **req}
    if conversation.system:
        req["system"] = conversation.system
    if inference := _inference(body):
        req["inferenceConfig"] = inference
    if tool_config is not None:
        req["toolConfig"] = tool_config
    _model_fields(body, kind, req, lost)
    _who(body, req, lost)
    return req


def _inference(body: dict) -> dict:
    config: dict[str, Any] = {}
    most = body.get("max_completion_tokens") or body.get("max_tokens")
    if isinstance(most, int) and not isinstance(most, bool):
        config["maxTokens"] = most
    if isinstance(body.get("temperature"), (int, float)):
        config["temperature"] = min(body["temperature"], 1.0)  # OpenAI allows 0–2, Converse 0–1
    if isinstance(body.get("top_p"), (int, float)):
        config["topP"] = body["top_p"]
    stop = body.get("stop")
    stops = [stop] if isinstance(stop, str) else stop if isinstance(stop, list) else []
    if stops := [s for s in stops if isinstance(s, str) and s]:  # Converse takes no empty stop sequence
        config["stopSequences"] = stops
    return config


def _model_fields(body: dict, kind: str, req: dict, lost: list[str]) -> None:
    """top_k and reasoning_effort, in the family's own fields (`additionalModelRequestFields`) or in
    `outputConfig.effort`; a family without them leaves them uncarried."""
    extra: dict[str, Any] = {}
    if body.get("top_k") is not None:
        if (fields := families.top_k_fields(kind, body["top_k"])) is None:
            lost.append("top_k")
        else:
            _merge(extra, fields)
    effort = body.get("reasoning_effort")
    if effort is not None:
        if (found := families.reasoning_fields(kind, effort)) is None:
            lost.append("reasoning_effort")
        else:
            output, fields = found
            if output:
                req.setdefault("outputConfig", {}).update(output)
            _merge(extra, fields)
    if extra:
        req["additionalModelRequestFields"] = extra


def _merge(into: dict, fields: dict) -> None:
    for key, value in fields.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            into[key].update(value)
        else:
            into[key] = value


def _who(body: dict, req: dict, lost: list[str]) -> None:
    """`user` (or `safety_identifier`) → `requestMetadata.user`, which Bedrock's invocation logs keep
    (a value of its pattern only); `service_tier` → `serviceTier` where Bedrock has the tier."""
    user, safety = body.get("user"), body.get("safety_identifier")
    who = user if user is not None else safety
    if who is not None:
        if isinstance(who, str) and _METADATA_VALUE.fullmatch(who):
            req["requestMetadata"] = {"user": who}
        else:
            lost.append("user" if user is not None else "safety_identifier")
        if user is not None and safety is not None and user != safety:
            lost.append("safety_identifier")
    tier = body.get("service_tier")
    if tier in SERVICE_TIERS:
        req["serviceTier"] = {"type": tier}
    elif tier not in (None, "auto"):
        lost.append("service_tier")


def _tools(body: dict, kind: str, structured_output: str, req: dict, lost: list[str]) -> dict | None:
    """The toolConfig (None: no tool may be called), with the tool a `response_format` may add
    (`output_tool_name`), or `outputConfig.textFormat` for a json_schema. Converse has no "none":
    it is said by offering no tool."""
    tools = [entry for k, tool in enumerate(body.get("tools") or []) for entry in _tool(tool, k, kind)]
    choice = body.get("tool_choice")
    if isinstance(choice, str) and choice in ("auto", "required", "none"):
        tc: dict | str | None = _CHOICES.get(choice, choice)
    elif isinstance(as_object(as_object(choice).get("function")).get("name"), str):
        tc = {"tool": {"name": choice["function"]["name"]}}
    elif choice is None:
        tc = None
    else:
        raise bad_request("tool_choice: must be 'auto', 'required', 'none' or a named function.")
    fmt = as_object(body.get("response_format"))
    if fmt.get("type") not in (None, "text", "json_object", "json_schema"):
        lost.append("response_format")
    described = as_object(fmt.get("json_schema"))
    schema = described.get("schema") or {"type": "object"}
    if name := output_tool_name(body, structured_output):
        spec = {"name": name, "description": described.get("description") or OUTPUT_TOOL_DESCRIPTION,
                "inputSchema": {"json": schema if fmt.get("type") == "json_schema" else {"type": "object"}}}
        tools.append({"toolSpec": spec})
        specs = sum("toolSpec" in tool for tool in tools)
        if tc is None or tc == "none" or "auto" in tc or "any" in tc:
            tc = {"any": {}} if specs > 1 and tc != "none" else {"tool": {"name": name}}
    elif fmt.get("type") == "json_schema":
        structure: dict[str, Any] = {"schema": json.dumps(schema, ensure_ascii=False)}
        for key in ("name", "description"):
            if isinstance(described.get(key), str) and described[key]:
                structure[key] = described[key]
        req["outputConfig"] = {"textFormat": {"type": "json_schema", "structure": {"jsonSchema": structure}}}
    if not tools or tc == "none":
        return None
    config: dict[str, Any] = {"tools": tools}
    if tc is not None:
        config["toolChoice"] = tc
    if body.get("parallel_tool_calls") is False and "tool" not in (tc or {}):
        lost.append("parallel_tool_calls")  # Converse cannot ask for one call at a time
    return config


def _tool(tool: Any, k: int, kind: str) -> list[dict]:
    """A function tool as a toolSpec, and the cachePoint a `cache_control` on it asks for."""
    function = as_object(as_object(tool).get("function"))
    if as_object(tool).get("type") != "function" or not isinstance(function.get("name"), str):
        raise bad_request(f"tools.{k}: only function tools with a name are supported.")
    spec: dict[str, Any] = {"name": function["name"],
                            "inputSchema": {"json": function.get("parameters") or {"type": "object", "properties": {}}}}
    if function.get("description"):
        spec["description"] = function["description"]
    if function.get("strict") is True:
        spec["strict"] = True
    point = families.cache_point(kind, tool.get("cache_control") or function.get("cache_control"), in_tools=True)
    return [{"toolSpec": spec}, point] if point else [{"toolSpec": spec}]
