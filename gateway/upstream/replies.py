"""Gathering a streamed reply (chat-completion chunks) into one completion, and its usage.

`chunk_problem` says what makes a chunk unusable (a tool call whose name is not a string, text that
is not a string or not valid Unicode, usage that is not a count). Each provider checks every chunk
with it where it reads the chunk, and stops a malformed reply as a failure of the model server
(`upstream_error`): a 502 in the surface's shape, or its stream's failure signal once the stream has
begun (docs/decisions/0021-errors-inside-streams.md, docs/decisions/0077-malformed-upstream-reply.md)."""

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


class _Choice:
    """One choice of a streamed reply, gathered."""

    __slots__ = ("text_parts", "tool_calls", "finish_reason", "logprobs", "extra", "stop_reason")

    def __init__(self) -> None:
        self.text_parts: list[str] = []
        self.tool_calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.logprobs: dict[str, list] | None = None  # {"content": [...], "refusal": [...]}
        self.extra: dict[str, str] = {}  # other text the server streams (refusal, reasoning_content)
        self.stop_reason: Any = None  # vLLM: the stop string or token that ended the choice

    def feed(self, choice: dict[str, Any]) -> None:
        delta = choice.get("delta") or {}
        for key, value in delta.items():
            if key == "content":
                if value:
                    self.text_parts.append(value)
            elif key == "tool_calls":
                for call in value or ():
                    self._tool_delta(call)
            elif isinstance(value, str) and value and key != "role":
                self.extra[key] = self.extra.get(key, "") + value
        if (logprobs := choice.get("logprobs")) and isinstance(logprobs, dict):
            gathered = self.logprobs if self.logprobs is not None else {}
            for key, items in logprobs.items():
                if isinstance(items, list):
                    gathered.setdefault(key, []).extend(items)
            self.logprobs = gathered
        if choice.get("finish_reason"):
            self.finish_reason = choice["finish_reason"]
            if choice.get("stop_reason") is not None:
                self.stop_reason = choice["stop_reason"]

    def _tool_delta(self, call: dict[str, Any]) -> None:
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

    def delivered_text(self) -> str:
        calls = "".join(c["function"]["name"] + c["function"]["arguments"] for c in self.tool_calls.values())
        return "".join(self.text_parts) + "".join(self.extra.values()) + calls

    def whole(self, index: int) -> dict[str, Any]:
        text = "".join(self.text_parts)
        message: dict[str, Any] = {"role": "assistant", "content": text or None, "refusal": None, **self.extra}
        if self.tool_calls:
            message["tool_calls"] = [self.tool_calls[i] for i in sorted(self.tool_calls)]
        elif message["content"] is None:
            message["content"] = ""
        logprobs = None
        if self.logprobs is not None:
            logprobs = {"content": self.logprobs.get("content"), "refusal": self.logprobs.get("refusal"),
                        **{k: v for k, v in self.logprobs.items() if k not in ("content", "refusal")}}
        choice = {"index": index, "message": message, "finish_reason": self.finish_reason or "stop",
                  "logprobs": logprobs}
        if self.stop_reason is not None:
            choice["stop_reason"] = self.stop_reason
        return choice


class ReplyAccumulator:
    """Feed every chunk; `completion()` gives the chat.completion so far (partial included), every
    choice (`n`) with its log probabilities and the other text its deltas carried."""

    def __init__(self) -> None:
        self.choices: dict[int, _Choice] = {}
        self.usage: dict[str, int] | None = None
        self.id: str | None = None
        self.created: int | None = None
        self.system_fingerprint: str | None = None

    def feed(self, chunk: dict[str, Any]) -> None:
        """`chunk` was checked by its provider (`chunk_problem`), once, where it was read."""
        if self.id is None:
            self.id, self.created = chunk.get("id"), chunk.get("created")
            self.system_fingerprint = chunk.get("system_fingerprint")
        if usage := chunk.get("usage"):
            self.usage = usage
        for choice in chunk.get("choices") or ():
            index = choice.get("index") or 0
            gathered = self.choices.get(index)
            if gathered is None:
                gathered = self.choices[index] = _Choice()
            gathered.feed(choice)

    @property
    def _first(self) -> _Choice:
        return self.choices.get(0) or _Choice()

    @property
    def text(self) -> str:
        return "".join(self._first.text_parts)

    @property
    def tool_calls(self) -> dict[int, dict[str, Any]]:
        return self._first.tool_calls

    @property
    def finish_reason(self) -> str | None:
        return self._first.finish_reason

    def delivered_output_text(self) -> str:
        """Everything the model produced, for counting tokens when the server gives no usage."""
        return "".join(choice.delivered_text() for choice in self.choices.values())

    def completion(self, *, completion_id: str, model: str, created: int, usage: dict[str, int]) -> dict[str, Any]:
        choices = [self.choices[i].whole(i) for i in sorted(self.choices)] or [_Choice().whole(0)]
        completion = {
            "id": completion_id,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": choices,
            "usage": usage,
        }
        if self.system_fingerprint is not None:
            completion["system_fingerprint"] = self.system_fingerprint
        return completion
