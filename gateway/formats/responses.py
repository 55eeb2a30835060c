"""OpenAI Responses API <-> the neutral chat format (OpenAI Chat Completions dicts), text only.

Tools, stored responses and files are not provided on this surface: they are refused with 501.
Malformed input is refused with 400. Plain dict building only, no validation models.
"""

from __future__ import annotations

import time
from typing import Any

from gateway.errors import ApiError
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


def responses_to_chat_request(body: dict) -> dict:
    if not isinstance(body, dict):
        raise _bad("The request body must be a JSON object.")
    check_field_types(body, FIELDS)
    if body.get("tools"):
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
        for i, item in enumerate(items):
            message = _chat_message(item, f"input.{i}")
            if message is not None:
                messages.append(message)
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
    return req


def _chat_message(item: Any, where: str) -> dict | None:
    if not isinstance(item, dict):
        raise _bad(f"{where}: must be an object.")
    kind = item.get("type", "message")
    if not isinstance(kind, str):
        raise _bad(f"{where}.type: must be a string.")
    if kind.endswith(("_call", "_call_output")):  # function_call, function_call_output, web_search_call, …
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


def _item_id(response_id: str) -> str:
    return "msg_" + response_id.removeprefix("resp_")


def _status(finish_reason: Any) -> tuple[str, dict | None]:
    if finish_reason == "length":
        return "incomplete", {"reason": "max_output_tokens"}
    if finish_reason == "content_filter":
        return "incomplete", {"reason": "content_filter"}
    return "completed", None


def _usage(usage: Any) -> dict:
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


def _message_item(item_id: str, text: str, status: str) -> dict:
    return {"type": "message", "id": item_id, "role": "assistant", "status": status,
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def _response(response_id: str, request: dict, created_at: int, model: str, status: str, output: list, *,
              usage: dict | None = None, incomplete: dict | None = None, error: dict | None = None) -> dict:
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
        "tools": [],
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "metadata": {},
    }


def chat_to_response(completion: dict, *, request: dict, response_id: str) -> dict:
    choice = _obj((completion.get("choices") or [None])[0])
    reply = _obj(choice.get("message"))
    text = reply.get("content") or reply.get("refusal") or ""
    if isinstance(text, list):
        text = "".join(part.get("text") or "" for part in text if isinstance(part, dict))
    status, incomplete = _status(choice.get("finish_reason"))
    item = _message_item(_item_id(response_id), text, status)
    created_at = completion.get("created") or int(time.time())
    model = completion.get("model") or request.get("model") or ""
    return _response(response_id, request, created_at, model, status, [item],
                     usage=_usage(completion.get("usage")), incomplete=incomplete)


# ----------------------------------------------------------------------------- stream


class ChatToResponsesStream:
    """`chat.completion.chunk` dicts → Responses stream events, each with `type` and `sequence_number`."""

    def __init__(self, *, response_id: str, model: str, request: dict, created_at: int) -> None:
        self.response_id, self.model, self.request, self.created_at = response_id, model, request, created_at
        self._item_id = _item_id(response_id)
        self._pieces: list[str] = []
        self._sequence = 0
        self._started = self._opened = self._ended = False
        self._finish_reason: str | None = None
        self._usage: dict | None = None

    @property
    def text(self) -> str:
        return "".join(self._pieces)

    def _event(self, event_type: str, **fields: Any) -> dict:
        event = {"type": event_type, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        return event

    def _snapshot(self, status: str, output: list, **extra: Any) -> dict:
        return _response(self.response_id, self.request, self.created_at, self.model, status, output, **extra)

    def start(self) -> list[dict]:
        if self._started:
            return []
        self._started = True
        return [self._event("response.created", response=self._snapshot("in_progress", [])),
                self._event("response.in_progress", response=self._snapshot("in_progress", []))]

    def _open(self) -> list[dict]:
        self._opened = True
        item = {"type": "message", "id": self._item_id, "role": "assistant", "status": "in_progress", "content": []}
        part = {"type": "output_text", "text": "", "annotations": []}
        return [self._event("response.output_item.added", output_index=0, item=item),
                self._event("response.content_part.added", item_id=self._item_id, output_index=0, content_index=0,
                            part=part)]

    def feed(self, chunk: dict) -> list[dict]:
        out = self.start()
        if self._ended:
            return out
        if isinstance(chunk.get("usage"), dict):
            self._usage = chunk["usage"]
        for choice in chunk.get("choices") or []:
            if _obj(choice).get("index", 0) != 0:
                continue
            delta = _obj(choice.get("delta"))
            text = delta.get("content") or delta.get("refusal")
            if text:
                if not self._opened:
                    out += self._open()
                self._pieces.append(text)
                out.append(self._event("response.output_text.delta", item_id=self._item_id, output_index=0,
                                       content_index=0, delta=text, logprobs=[]))
            if choice.get("finish_reason"):
                self._finish_reason = choice["finish_reason"]
        return out

    def _close(self, item_status: str) -> list[dict]:
        if not self._opened:
            return []
        text = self.text
        where = {"item_id": self._item_id, "output_index": 0, "content_index": 0}
        return [self._event("response.output_text.done", **where, text=text, logprobs=[]),
                self._event("response.content_part.done", **where,
                            part={"type": "output_text", "text": text, "annotations": []}),
                self._event("response.output_item.done", output_index=0,
                            item=_message_item(self._item_id, text, item_status))]

    def finish(self) -> list[dict]:
        out = self.start()
        if self._ended:
            return out
        self._ended = True
        status, incomplete = _status(self._finish_reason)
        if not self._opened:  # an empty reply still gets its message item, as the non-streamed reply does
            out += self._open()
        out += self._close(status)
        response = self._snapshot(status, [_message_item(self._item_id, self.text, status)],
                                  usage=_usage(self._usage), incomplete=incomplete)
        out.append(self._event("response.completed" if status == "completed" else "response.incomplete",
                               response=response))
        return out

    def fail(self, code: str, message: str) -> list[dict]:
        out = self.start()
        if self._ended:
            return out
        self._ended = True
        output = [_message_item(self._item_id, self.text, "incomplete")] if self._opened else []
        out += self._close("incomplete")
        response = self._snapshot("failed", output, usage=_usage(self._usage) if self._usage else None,
                                  error={"code": code, "message": message})
        out.append(self._event("response.failed", response=response))
        return out
