"""Gathering a streamed reply (chat-completion chunks) into one completion, and its usage."""

from __future__ import annotations

from typing import Any


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
