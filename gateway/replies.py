"""Gathering a streamed reply (chat-completion chunks) into one completion, and its usage.

`chunk_problem` says what makes a chunk unusable (a tool call whose name is not a string, text that
is not a string or not valid Unicode, usage that is not a count). Each provider checks every chunk
with it where it reads the chunk, and stops a malformed reply as a failure of the model server
(`upstream_error`): a 502 in the surface's shape, or its stream's failure signal once the stream has
begun (docs/decisions.md, "Errors inside streams" and "A malformed reply from a model server")."""

from __future__ import annotations

from typing import Any

_USAGE_COUNTS = ("prompt_tokens", "completion_tokens", "total_tokens")


def _text_problem(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        return f"{where} is not a string"
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return f"{where} is not valid Unicode (a lone surrogate)"
    return None


def _index_problem(value: Any, where: str) -> str | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return None
    return f"{where} is not an integer"


def chunk_problem(chunk: Any) -> str | None:
    """What makes a chat-completion chunk unusable, or None. Only what the gateway reads is checked."""
    if not isinstance(chunk, dict):
        return "a chunk is not an object"
    usage = chunk.get("usage")
    if usage is not None:
        if not isinstance(usage, dict):
            return "usage is not an object"
        for name in _USAGE_COUNTS:
            if (problem := _index_problem(usage.get(name), f"usage.{name}")) is not None:
                return problem
    choices = chunk.get("choices")
    if choices is None:
        return None
    if not isinstance(choices, list):
        return "choices is not an array"
    for i, choice in enumerate(choices):
        where = f"choices[{i}]"
        if not isinstance(choice, dict):
            return f"{where} is not an object"
        problem = (_index_problem(choice.get("index"), f"{where}.index")
                   or _text_problem(choice.get("finish_reason"), f"{where}.finish_reason"))
        if problem:
            return problem
        delta = choice.get("delta")
        if delta is None:
            continue
        if not isinstance(delta, dict):
            return f"{where}.delta is not an object"
        problem = (_text_problem(delta.get("content"), f"{where}.delta.content")
                   or _text_problem(delta.get("refusal"), f"{where}.delta.refusal"))
        if problem:
            return problem
        calls = delta.get("tool_calls")
        if calls is None:
            continue
        if not isinstance(calls, list):
            return f"{where}.delta.tool_calls is not an array"
        for k, call in enumerate(calls):
            at = f"{where}.delta.tool_calls[{k}]"
            if not isinstance(call, dict):
                return f"{at} is not an object"
            problem = _index_problem(call.get("index"), f"{at}.index") or _text_problem(call.get("id"), f"{at}.id")
            if problem:
                return problem
            function = call.get("function")
            if function is None:
                continue
            if not isinstance(function, dict):
                return f"{at}.function is not an object"
            problem = (_text_problem(function.get("name"), f"{at}.function.name")
                       or _text_problem(function.get("arguments"), f"{at}.function.arguments"))
            if problem:
                return problem
    return None


class ReplyAccumulator:
    """Feed every chunk; `completion()` gives the chat.completion so far (partial included)."""

    def __init__(self) -> None:
        self.text_parts: list[str] = []
        self.tool_calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: dict[str, int] | None = None
        self.id: str | None = None
        self.created: int | None = None

    def feed(self, chunk: dict[str, Any]) -> None:
        """`chunk` was checked by its provider (`chunk_problem`), once, where it was read."""
        if self.id is None:
            self.id, self.created = chunk.get("id"), chunk.get("created")
        if usage := chunk.get("usage"):
            self.usage = usage
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if content := delta.get("content"):
                self.text_parts.append(content)
            for call in delta.get("tool_calls") or ():
                slot = self.tool_calls.setdefault(
                    call.get("index", 0), {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
                )
                if call.get("id"):
                    slot["id"] = call["id"]
                function = call.get("function") or {}
                if function.get("name"):
                    slot["function"]["name"] += function["name"]
                if function.get("arguments"):
                    slot["function"]["arguments"] += function["arguments"]
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]

    @property
    def text(self) -> str:
        return "".join(self.text_parts)

    def delivered_output_text(self) -> str:
        """Everything the model produced, for counting tokens when the server gives no usage."""
        calls = "".join(c["function"]["name"] + c["function"]["arguments"] for c in self.tool_calls.values())
        return self.text + calls

    def completion(self, *, completion_id: str, model: str, created: int, usage: dict[str, int]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.text or None, "refusal": None}
        if self.tool_calls:
            message["tool_calls"] = [self.tool_calls[i] for i in sorted(self.tool_calls)]
        elif message["content"] is None:
            message["content"] = ""
        return {
            "id": completion_id,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason or "stop",
                         "logprobs": None}],
            "usage": usage,
        }
