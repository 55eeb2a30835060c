"""OpenAI Responses API <-> the neutral chat format (OpenAI Chat Completions dicts).

Text in and out; with `tools=True` (the installation's RESPONSES_TOOLS) also function tools, their
calls and their outputs (gateway/formats/responses/tools.py). Tools otherwise and uploaded files are
not provided on this surface: they are refused with 501. The request's other fields are carried or
refused by name in gateway/formats/responses/fields.py (stored responses among them, a 400: the
request has to change). Malformed input is refused with 400. Plain dict building only, no
validation models. The stream is in responses_stream.py.
"""

from __future__ import annotations

import time
from typing import Any

from gateway.formats.responses.fields import carry_fields, check_fields, echoed, wants_logprobs
from gateway.formats.responses.tools import (
    chat_tool_choice,
    chat_tools,
    function_call,
    function_output,
    namespaced,
    output_call,
)
from gateway.web.errors import ApiError

TOOLS_UNSUPPORTED = "Tools are not supported on the Responses endpoint."


def _bad(message: str, param: str | None = None) -> ApiError:
    return ApiError(400, message, code="invalid_request_error", param=param)


def _unsupported(message: str) -> ApiError:
    return ApiError(501, message, code="unsupported")


def _obj(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


# ----------------------------------------------------------------------------- request


def responses_to_chat_request(body: dict, *, tools: bool = False) -> dict:
    """The request in the chat form; `tools` carries function tools (else they answer 501)."""
    if not isinstance(body, dict):
        raise _bad("The request body must be a JSON object.")
    check_fields(body)
    if body.get("tools") and not tools:
        raise _unsupported(TOOLS_UNSUPPORTED)
    instructions = body.get("instructions")  # a string, or None (check_fields)
    messages: list[dict] = [{"role": "system", "content": instructions}] if instructions else []
    items = body.get("input")
    if isinstance(items, str):
        messages.append({"role": "user", "content": items})
    elif isinstance(items, list) and items:
        messages += _chat_messages(items, tools)
    else:
        raise _bad("input: a string or a non-empty list of input items is required.")

    req: dict[str, Any] = {"messages": messages}
    carry_fields(body, req)
    if tools and body.get("tools"):
        choice, req["tools"] = chat_tool_choice(body.get("tool_choice"), chat_tools(body["tools"]))
        if choice is not None:
            req["tool_choice"] = choice
        if body.get("parallel_tool_calls") is not None:
            req["parallel_tool_calls"] = body["parallel_tool_calls"]
    elif body.get("tool_choice") not in (None, "none", "auto"):
        raise _bad("tool_choice: the request has no tools to choose from; leave it out.", "tool_choice")
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
        raise _bad(f"{where}: item_reference is not supported: responses are not stored by this gateway; send the "
                   "item itself.", where)
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
    details = _obj(usage.get("prompt_tokens_details"))
    cached, written = details.get("cached_tokens") or 0, details.get("cache_write_tokens") or 0
    reasoning = _obj(usage.get("completion_tokens_details")).get("reasoning_tokens") or 0
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": written},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": usage.get("total_tokens") or prompt + completion,
    }


def text_part(text: str, logprobs: list | None = None) -> dict:
    """An `output_text` part. OpenAI's schema requires `logprobs`: those of the text when the request
    asked for them, else an empty list."""
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": logprobs or []}


def message_item(item_id: str, text: str, status: str, logprobs: list | None = None) -> dict:
    """The message item of the reply's text; `logprobs` when the request asked for them."""
    return {"type": "message", "id": item_id, "role": "assistant", "status": status,
            "content": [text_part(text, logprobs)]}


def cut_error(message: str, reason: str) -> dict:
    """A reply stopped midway, as a failed response's `error`: the SDK takes only its own codes,
    so the gateway's reason (read_timeout, disconnected, upstream_error) goes in the message."""
    return {"code": "server_error", "message": f"{message} ({reason})"}


def response_object(response_id: str, request: dict, created_at: int, model: str, status: str, output: list, *,
                    usage: dict | None = None, incomplete: dict | None = None, error: dict | None = None) -> dict:
    """The `response` object; the tool settings are the request's, as OpenAI echoes them. Without
    `usage` (a response still in progress, or one that failed before the server counted anything)
    the field is left out: OpenAI's schema has it an object when present, never null."""
    choice = request.get("tool_choice")
    parallel = request.get("parallel_tool_calls")
    return {
        "id": response_id,
        "object": "response",
        "created_at": created_at,
        "status": status,
        "model": model,
        "output": output,
        **({"usage": usage} if usage is not None else {}),
        "error": error,
        "incomplete_details": incomplete,
        "instructions": request.get("instructions"),
        "max_output_tokens": request.get("max_output_tokens"),
        "temperature": request.get("temperature"),
        "top_p": request.get("top_p"),
        "previous_response_id": None,
        "tools": request.get("tools") if isinstance(request.get("tools"), list) else [],
        "tool_choice": choice if isinstance(choice, (str, dict)) else "auto",
        "parallel_tool_calls": parallel if isinstance(parallel, bool) else True,
        **echoed(request),
    }


def text_logprobs(logprobs: Any, request: dict) -> list | None:
    """The log probabilities of a chat reply's text, when the request asked for them."""
    if not wants_logprobs(request):
        return None
    content = _obj(logprobs).get("content")
    return [entry for entry in content if isinstance(entry, dict)] if isinstance(content, list) else []


def chat_to_response(completion: dict, *, request: dict, response_id: str,
                     cut: tuple[str, str] | None = None) -> dict:
    """A chat.completion as a response: its text as a message item (always one when there is no
    tool call), then a function_call item per tool call. `cut` (message, reason): the reply
    stopped midway, so the response failed and its items are incomplete."""
    choice = _obj((completion.get("choices") or [None])[0])
    reply = _obj(choice.get("message"))
    text = reply.get("content") or reply.get("refusal") or ""
    if isinstance(text, list):
        text = "".join(part.get("text") or "" for part in text if isinstance(part, dict))
    status, incomplete = reply_status(choice.get("finish_reason"))
    item_status = "incomplete" if cut else status
    calls = [call for call in reply.get("tool_calls") or [] if isinstance(call, dict)]
    logprobs = text_logprobs(choice.get("logprobs"), request)
    output = [message_item(message_id(response_id), text, item_status, logprobs)] if text or not calls else []
    spaces = namespaced(request.get("tools"))
    output += [output_call(call, item_id=call_item_id(response_id, len(output) + k), spaces=spaces,
                           status=item_status) for k, call in enumerate(calls)]
    created_at = completion.get("created") or int(time.time())
    model = completion.get("model") or request.get("model") or ""
    if cut:
        return response_object(response_id, request, created_at, model, "failed", output,
                               usage=response_usage(completion.get("usage")), error=cut_error(*cut))
    return response_object(response_id, request, created_at, model, status, output,
                           usage=response_usage(completion.get("usage")), incomplete=incomplete)
