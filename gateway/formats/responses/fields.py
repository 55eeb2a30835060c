"""The fields of a Responses request beside its input, instructions and tools, in the chat form.

Each field either reaches the model (as its chat-completions counterpart), is a field about the
gateway's own service that the gateway honours by its meaning, or is refused with a 400 naming it
in `param`; an unknown field is refused too. Nothing is dropped unseen
(docs/decisions/0108-responses-fields.md). Whether a server of the other kind can take what is carried is the
provider's to say (gateway/formats/anthropic/from_chat.py names what it cannot).
"""

from __future__ import annotations

import json
from typing import Any

from gateway.web.errors import ApiError
from gateway.web.validation import check_field_types, check_tags

# The types of a Responses request's fields (OpenAI's API reference); a wrong one is a 400 naming it.
FIELDS: dict[str, Any] = {
    "model": "string", "input": "string|array", "instructions": "string", "stream": "boolean",
    "max_output_tokens": "integer", "temperature": "number", "top_p": "number", "tools": "array",
    "tool_choice": "string|object", "parallel_tool_calls": "boolean", "metadata": "object", "store": "boolean",
    "user": "string", "safety_identifier": "string", "previous_response_id": "string",
    "conversation": "string|object", "prompt": "object", "background": "boolean", "truncation": "string",
    "text": {"format": "object", "verbosity": "string"},
    "reasoning": {"effort": "string", "summary": "string", "generate_summary": "string", "context": "string",
                  "mode": "string"},
    "stream_options": {"include_obfuscation": "boolean"}, "include": "array<string>", "top_logprobs": "integer",
    "service_tier": "string", "prompt_cache_key": "string", "prompt_cache_retention": "string",
    "prompt_cache_options": "object", "max_tool_calls": "integer", "client_metadata": "object",
}
# Carried under the same name: the chat form has each (prompt caching and the service tier are the
# server's to honour or not, as on /v1/chat/completions).
SAME_NAME = ("model", "temperature", "top_p", "stream", "metadata", "prompt_cache_key", "prompt_cache_retention",
             "prompt_cache_options", "service_tier")
# What the gateway's own service cannot do, and the value that asks for none of it.
NEUTRAL = {
    "store": (False, "this gateway keeps no responses (nothing to retrieve or continue from later); send "
                     "store: false or leave it out"),
    "background": (False, "this gateway keeps no responses to poll; send the request in the foreground"),
    "truncation": ("disabled", "this gateway does not drop input items to fit the context window; shorten "
                               "the input yourself"),
}
STORED = {
    "previous_response_id": "responses are not stored by this gateway; send the earlier turns in input",
    "conversation": "conversations are not stored by this gateway; send the earlier turns in input",
    "prompt": "this gateway holds no stored prompt templates; send the prompt in instructions and input",
}
LOGPROBS = "message.output_text.logprobs"
# `include` values asking for what no reply of this gateway holds: the results of OpenAI's hosted
# tools (refused in `tools`), input image URLs of stored items, and encrypted reasoning to hand
# back later (the chat form takes no reasoning back to a model).
NOTHING_TO_INCLUDE = frozenset({"file_search_call.results", "web_search_call.results", "web_search_call.action.sources",
                                "code_interpreter_call.outputs", "computer_call_output.output.image_url",
                                "message.input_image.image_url", "reasoning.encrypted_content"})
REASONING_NEUTRAL = {"context": "auto", "mode": "standard"}
KNOWN_KEYS = {"text": ("format", "verbosity"), "stream_options": ("include_obfuscation",),
              "reasoning": ("effort", "summary", "generate_summary", *REASONING_NEUTRAL)}


def bad(message: str, param: str) -> ApiError:
    return ApiError(400, message, code="invalid_request_error", param=param)


def check_fields(body: dict) -> None:
    """Types first, then every field this gateway cannot honour, named (top level, then inside)."""
    check_field_types(body, FIELDS)
    check_tags(body.get("metadata"))  # the call's tags: carried, and kept with the call
    for name, value in body.items():
        if value is None:
            continue
        if name not in FIELDS:
            raise bad(f"{name}: not a field this gateway carries on /v1/responses; leave it out.", name)
        if name in STORED:
            raise bad(f"{name}: {STORED[name]}.", name)
        if name in NEUTRAL and value != NEUTRAL[name][0]:
            raise bad(f"{name}: {json.dumps(value)} is not supported: {NEUTRAL[name][1]}.", name)
        for key in (value if name in KNOWN_KEYS else ()):
            if key not in KNOWN_KEYS[name] and value[key] is not None:
                raise bad(f"{name}.{key}: not a field this gateway carries; leave it out.", f"{name}.{key}")
    for key, neutral in REASONING_NEUTRAL.items():
        value = (body.get("reasoning") or {}).get(key)
        if value not in (None, neutral):
            raise bad(f"reasoning.{key}: only {neutral!r} is supported by this gateway.", f"reasoning.{key}")


def carry_fields(body: dict, req: dict) -> None:
    """Put into the chat request `req` what the fields of `body` (checked) ask of the model."""
    for key in SAME_NAME:
        if body.get(key) is not None:
            req[key] = body[key]
    if body.get("max_output_tokens") is not None:
        req["max_tokens"] = body["max_output_tokens"]
    if req.get("stream"):
        req["stream_options"] = {"include_usage": True}
    _who(body, req)
    text = body.get("text") or {}
    if (fmt := response_format(text.get("format"))) is not None:
        req["response_format"] = fmt
    if text.get("verbosity") is not None:
        req["verbosity"] = text["verbosity"]
    if (body.get("reasoning") or {}).get("effort") is not None:
        req["reasoning_effort"] = body["reasoning"]["effort"]
    _logprobs(body, req)


def _who(body: dict, req: dict) -> None:
    """`user`, and `safety_identifier` (its successor) as `user` when alone; given both, each goes
    under its own name (the chat form has both), so neither is lost."""
    user, safety = body.get("user"), body.get("safety_identifier")
    if user is not None:
        req["user"] = user
        if safety is not None and safety != user:
            req["safety_identifier"] = safety
    elif safety is not None:
        req["user"] = safety


def response_format(fmt: Any) -> dict | None:
    """`text.format` as the chat form's `response_format` (None for plain text)."""
    if fmt is None:
        return None
    kind = fmt.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return {"type": "json_object"}
    if kind != "json_schema":
        raise bad("text.format.type: must be 'text', 'json_schema' or 'json_object'.", "text.format.type")
    if not isinstance(fmt.get("name"), str) or not fmt["name"]:
        raise bad("text.format.name: required, a string.", "text.format.name")
    if not isinstance(fmt.get("schema"), dict):
        raise bad("text.format.schema: required, an object (a JSON schema).", "text.format.schema")
    schema: dict[str, Any] = {"name": fmt["name"], "schema": fmt["schema"]}
    for key, kind_of in (("strict", bool), ("description", str)):
        if fmt.get(key) is not None:
            if not isinstance(fmt[key], kind_of):
                raise bad(f"text.format.{key}: must be a {'boolean' if kind_of is bool else 'string'}.",
                          f"text.format.{key}")
            schema[key] = fmt[key]
    for key in fmt:
        if key not in ("type", "name", "schema", "strict", "description") and fmt[key] is not None:
            raise bad(f"text.format.{key}: not a field of a json_schema format.", f"text.format.{key}")
    return {"type": "json_schema", "json_schema": schema}


def _logprobs(body: dict, req: dict) -> None:
    """`include` of the output text's log probabilities, or `top_logprobs` above 0, asks for them;
    the other `include` values ask for what no reply of this gateway holds (NOTHING_TO_INCLUDE)."""
    include = body.get("include") or []
    for k, value in enumerate(include):
        if value != LOGPROBS and value not in NOTHING_TO_INCLUDE:
            raise bad(f"include.{k}: {value!r} is not something this gateway can include.", f"include.{k}")
    top = body.get("top_logprobs")
    if top is not None and not 0 <= top <= 20:
        raise bad("top_logprobs: must be between 0 and 20.", "top_logprobs")
    if wants_logprobs(body):
        req["logprobs"] = True
        if top:
            req["top_logprobs"] = top


def wants_logprobs(body: dict) -> bool:
    """Whether the reply's text is to carry its log probabilities (`output_text.logprobs`)."""
    return LOGPROBS in (body.get("include") or ()) or (body.get("top_logprobs") or 0) > 0


def echoed(body: dict) -> dict:
    """The request's settings a response object repeats, as OpenAI's does."""
    text = body.get("text") if isinstance(body.get("text"), dict) else {}
    reasoning = body.get("reasoning") if isinstance(body.get("reasoning"), dict) else {}
    out: dict[str, Any] = {
        "text": {"format": text.get("format") or {"type": "text"}, "verbosity": text.get("verbosity")},
        "metadata": body.get("metadata") if isinstance(body.get("metadata"), dict) else {},
        "store": False, "background": False, "truncation": "disabled",
    }
    if reasoning:
        out["reasoning"] = {"effort": reasoning.get("effort"),
                            "summary": reasoning.get("summary") or reasoning.get("generate_summary")}
    for key in ("user", "safety_identifier", "prompt_cache_key", "top_logprobs"):
        if body.get(key) is not None:
            out[key] = body[key]
    return out
