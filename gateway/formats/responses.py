"""OpenAI Responses API <-> the neutral chat format (OpenAI Chat Completions dicts).

Text in and out; with `tools=True` (the installation's RESPONSES_TOOLS) also function tools, their
calls and their outputs (gateway/formats/responses_tools.py). Tools otherwise, stored responses and
files are not provided on this surface: they are refused with 501. Malformed input is refused with
400. Plain dict building only, no validation models. The stream is in responses_stream.py.
"""

from __future__ import annotations

import time
from typing import Any

from gateway.errors import ApiError
from gateway.formats.responses_tools import (chat_tool_choice, chat_tools, function_call, function_output,
                                             namespaced, output_call)
from gateway.validation import check_field_types

TOOLS_UNSUPPORTED = "Tools are not supported on the Responses endpoint."

# The types of a Responses request's fields (OpenAI's API reference); a wrong one is a 400 naming it.
FIELDS = {
    "model": "string", "input": "string|array", "instructions": "string", "stream": "boolean",
    "max_output_tokens": "integer", "temperature": "number", "top_p": "number", "tools": "array",
    "tool_choice": "string|object", "parallel_tool_calls": "boolean", "metadata": "object", "store": "boolean",
    "user": "string", "previous_response_id": "string", "text": "object", "reasoning": "object",
    "truncation": "string", "stream_options": {"include_obfuscation": "boolean"},
}


def _bad(message: str) -> ApiError:
    return ApiError(400, message, code="invalid_request_error")


def _unsupported(message: str) -> ApiError:
    return ApiError(501, message, code="unsupported")


def _obj(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


# ----------------------------------------------------------------------------- request


def responses_to_chat_request(body: dict, *, tools: bool = False) -> dict:
    """The request in the chat form; `tools` carries function tools (else they answer 501)."""
    if not isinstance(body, dict):
        raise _bad("The request body must be a JSON object.")
    check_field_types(body, FIELDS)
    if body.get("tools") and not tools:
        raise _unsupported(TOOLS_UNSUPPORTED)
    if body.get("previous_response_id"):
        raise _unsupported("previous_response_id is not supported: responses are not stored.")
    if body.get("conversation"):
        raise _unsupported("conversation is not supported: responses are not stored.")
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise _bad("instructions: must be a string.")
    messages: list[dict] = [{"role": "system", "content": instructions}] if instructions else []
    items = body.get("input")
    if isinstance(items, str):
        messages.append({"role": "user", "content": items})
    elif isinstance(items, list) and items:
        messages += _chat_messages(items, tools)
    else:
        raise _bad("input: a string or a non-empty list of input items is required.")

    req: dict[str, Any] = {"messages": messages}
    for key in ("model", "temperature", "top_p", "stream"):
        if body.get(key) is not None:
            req[key] = body[key]
    if body.get("max_output_tokens") is not None:
        req["max_tokens"] = body["max_output_tokens"]
    if req.get("stream"):
        req["stream_options"] = {"include_usage": True}
    if tools and body.get("tools"):
        choice, req["tools"] = chat_tool_choice(body.get("tool_choice"), chat_tools(body["tools"]))
        if choice is not None:
            req["tool_choice"] = choice
        if body.get("parallel_tool_calls") is not None:
            req["parallel_tool_calls"] = body["parallel_tool_calls"]
    return req


def _chat_messages(items: list, tools: bool) -> list[dict]:
    """Input items as chat messages: a `function_call` joins the assistant message before it (one
    turn's text and calls), a `function_call_output` is a tool message, and the images tool outputs
    returned follow the run of tool messages as one user message."""
    messages: list[dict] = []
    images: list[dict] = []
    for i, item in enumerate(items):
        where = f"input.{i}"
        kind = _obj(item).get("type", "message")
        if tools and kind == "function_call":
            call = function_call(item, where)
            _flush(messages, images)
            last = messages[-1] if messages else {}
            if last.get("role") == "assistant":
                last.setdefault("tool_calls", []).append(call)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif tools and kind == "function_call_output":
            message, returned = function_output(item, where)
            messages.append(message)
            images += returned
        elif (message := _chat_message(item, where, tools)) is not None:
            _flush(messages, images)
            messages.append(message)
    _flush(messages, images)
    return messages


def _flush(messages: list[dict], images: list[dict]) -> None:
    if images:
        messages.append({"role": "user", "content": list(images)})
        images.clear()


def _chat_message(item: Any, where: str, tools: bool) -> dict | None:
    if not isinstance(item, dict):
        raise _bad(f"{where}: must be an object.")
    kind = item.get("type", "message")
    if not isinstance(kind, str):
        raise _bad(f"{where}.type: must be a string.")
    if kind.endswith(("_call", "_call_output")):  # function_call, function_call_output, web_search_call, …
        if tools:
            raise _bad(f"{where}.type: input items of type {kind!r} are not carried by this gateway "
                       "(only function_call and function_call_output are).")
        raise _unsupported(TOOLS_UNSUPPORTED)
    if kind == "item_reference":
        raise _unsupported("item_reference is not supported: responses are not stored.")
    if kind == "reasoning":
        return None
    if kind != "message":
        raise _bad(f"{where}.type: unknown input item type {kind!r}.")
    role = item.get("role")
    if role not in ("user", "assistant", "system", "developer"):
        raise _bad(f"{where}.role: must be 'user', 'assistant', 'system' or 'developer'.")
    role = "system" if role == "developer" else role
    content = item.get("content")
    if isinstance(content, str):
        return {"role": role, "content": content}
    if not isinstance(content, list):
        raise _bad(f"{where}.content: must be a string or a list of content parts.")
    parts = [_chat_part(part, role, f"{where}.content.{k}") for k, part in enumerate(content)]
    if all(part["type"] == "text" for part in parts) and (role != "user" or len(parts) <= 1):
        return {"role": role, "content": "\n".join(part["text"] for part in parts)}
    return {"role": role, "content": parts}


def _chat_part(part: Any, role: str, where: str) -> dict:
    kind = _obj(part).get("type")
    if kind in ("input_text", "output_text", "text") and isinstance(part.get("text"), str):
        return {"type": "text", "text": part["text"]}
    if kind == "refusal" and isinstance(part.get("refusal"), str):
        return {"type": "text", "text": part["refusal"]}
    if kind == "input_image" and role == "user":
        if isinstance(part.get("image_url"), str):
            image = {"url": part["image_url"]}
            if part.get("detail") in ("auto", "low", "high"):
                image["detail"] = part["detail"]
            return {"type": "image_url", "image_url": image}
        if part.get("file_id"):
            raise _unsupported(f"{where}.file_id: uploaded files are not supported; send image_url.")
        raise _bad(f"{where}.image_url: required.")
    if kind == "input_file":
        raise _unsupported(f"{where}: input_file parts are not supported.")
    raise _bad(f"{where}.type: content parts of type {kind!r} are not allowed in {role} messages.")


# ----------------------------------------------------------------------------- reply
# The shapes below are shared with the stream (responses_stream.py).


def message_id(response_id: str, index: int = 0) -> str:
    """The id of the message item at output `index` (the first one's is `msg_<response id>`)."""
    return "msg_" + response_id.removeprefix("resp_") + (f"_{index}" if index else "")


def call_item_id(response_id: str, index: int) -> str:
    return f"fc_{response_id.removeprefix('resp_')}_{index}"


def reply_status(finish_reason: Any) -> tuple[str, dict | None]:
    """The response's status and incomplete_details for the chat reply's finish_reason."""
    if finish_reason == "length":
        return "incomplete", {"reason": "max_output_tokens"}
    if finish_reason == "content_filter":
        return "incomplete", {"reason": "content_filter"}
    return "completed", None


def response_usage(usage: Any) -> dict:
    usage = _obj(usage)
    prompt, completion = usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0
    cached = _obj(usage.get("prompt_tokens_details")).get("cached_tokens") or 0
    reasoning = _obj(usage.get("completion_tokens_details")).get("reasoning_tokens") or 0
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": usage.get("total_tokens") or prompt + completion,
    }


def message_item(item_id: str, text: str, status: str) -> dict:
    return {"type": "message", "id": item_id, "role": "assistant", "status": status,
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def response_object(response_id: str, request: dict, created_at: int, model: str, status: str, output: list, *,
                    usage: dict | None = None, incomplete: dict | None = None, error: dict | None = None) -> dict:
    """The `response` object; the tool settings are the request's, as OpenAI echoes them."""
    choice = request.get("tool_choice")
    parallel = request.get("parallel_tool_calls")
    return {
        "id": response_id,
        "object": "response",
        "created_at": created_at,
        "status": status,
        "model": model,
        "output": output,
        "usage": usage,
        "error": error,
        "incomplete_details": incomplete,
        "instructions": request.get("instructions"),
        "max_output_tokens": request.get("max_output_tokens"),
        "temperature": request.get("temperature"),
        "top_p": request.get("top_p"),
        "previous_response_id": None,
        "text": {"format": {"type": "text"}},
        "tools": request.get("tools") if isinstance(request.get("tools"), list) else [],
        "tool_choice": choice if isinstance(choice, (str, dict)) else "auto",
        "parallel_tool_calls": parallel if isinstance(parallel, bool) else True,
        "metadata": {},
    }


def chat_to_response(completion: dict, *, request: dict, response_id: str) -> dict:
    """A chat.completion as a response: its text as a message item (always one when there is no
    tool call), then a function_call item per tool call."""
    choice = _obj((completion.get("choices") or [None])[0])
    reply = _obj(choice.get("message"))
    text = reply.get("content") or reply.get("refusal") or ""
    if isinstance(text, list):
        text = "".join(part.get("text") or "" for part in text if isinstance(part, dict))
    status, incomplete = reply_status(choice.get("finish_reason"))
    calls = [call for call in reply.get("tool_calls") or [] if isinstance(call, dict)]
    output = [message_item(message_id(response_id), text, status)] if text or not calls else []
    spaces = namespaced(request.get("tools"))
    output += [output_call(call, item_id=call_item_id(response_id, len(output) + k), spaces=spaces, status=status)
               for k, call in enumerate(calls)]
    created_at = completion.get("created") or int(time.time())
    model = completion.get("model") or request.get("model") or ""
    return response_object(response_id, request, created_at, model, status, output,
                           usage=response_usage(completion.get("usage")), incomplete=incomplete)
