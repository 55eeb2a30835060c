"""An Anthropic server's Messages stream events gathered into the Message they describe (what
the official SDK's stream accumulation does), for a `/v1/messages` call that passed through
untranslated and was asked for whole, or was cut midway (`partial`). Every block and delta kind
the API sends is kept: text, tool use, thinking and its signature, citations, server tools,
and fields of a later API version in a block's start."""

from __future__ import annotations

import json
from typing import Any

from gateway.formats.anthropic.replies import chat_usage, messages_usage


class MessageAccumulator:
    """Feed every event (as the provider parsed it); `message()` is the Message so far."""

    def __init__(self) -> None:
        self.start: dict[str, Any] = {}
        self.blocks: dict[int, dict[str, Any]] = {}
        self.partial_json: dict[int, list[str]] = {}
        self.delta: dict[str, Any] = {}  # message_delta's fields: stop_reason, stop_sequence, ...
        self.anthropic_usage: dict[str, Any] = {}
        self.usage: dict[str, int] | None = None  # chat form, for metering; None until the server gave one

    def feed(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "message_start":
            self.start = dict(event.get("message") or {})
            self._read_usage(self.start.get("usage"))
        elif kind == "content_block_start":
            self.blocks[event.get("index", len(self.blocks))] = dict(event.get("content_block") or {})
        elif kind == "content_block_delta":
            self._delta(event.get("index", 0), event.get("delta") or {})
        elif kind == "content_block_stop":
            self._finish_json(event.get("index", 0))
        elif kind == "message_delta":
            self.delta.update(event.get("delta") or {})
            self._read_usage(event.get("usage"))

    def _read_usage(self, usage: Any) -> None:
        if isinstance(usage, dict):
            self.anthropic_usage.update({k: v for k, v in usage.items() if v is not None})
            counts = {k: v for k, v in self.anthropic_usage.items() if isinstance(v, int) and not isinstance(v, bool)}
            self.usage = chat_usage(counts)  # the metering's form; nested counts (server tools) left out

    def _delta(self, index: Any, delta: dict[str, Any]) -> None:
        block = self.blocks.setdefault(index, {})
        kind = delta.get("type")
        if kind == "text_delta":
            block["text"] = block.get("text", "") + (delta.get("text") or "")
        elif kind == "input_json_delta":
            self.partial_json.setdefault(index, []).append(delta.get("partial_json") or "")
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + (delta.get("thinking") or "")
        elif kind == "signature_delta":
            block["signature"] = delta.get("signature")
        elif kind == "citations_delta":
            block.setdefault("citations", []).append(delta.get("citation"))
        else:  # a delta of a later API version: its text fields appended, the others set
            for key, value in delta.items():
                if key != "type":
                    block[key] = block.get(key, "") + value if isinstance(value, str) else value

    def _finish_json(self, index: Any) -> None:
        parts = self.partial_json.pop(index, None)
        if parts is None:
            return
        text = "".join(parts)
        try:
            self.blocks.setdefault(index, {})["input"] = json.loads(text) if text else {}
        except ValueError:
            self.blocks.setdefault(index, {})["input"] = {}

    def delivered_output_text(self) -> str:
        """What the model produced, for counting tokens when the server gave no usage."""
        texts = [b.get("text") or b.get("thinking") or "" for b in self.blocks.values()]
        texts += ["".join(parts) for parts in self.partial_json.values()]
        texts += [json.dumps(b["input"]) for b in self.blocks.values() if isinstance(b.get("input"), dict)]
        return "".join(t for t in texts if isinstance(t, str))

    def message(self, *, message_id: str, model: str, usage: dict[str, Any] | None = None) -> dict[str, Any]:
        """The Message, `id` and `model` the gateway's; a tool input still arriving is left as {}.
        `usage`: the chat form's, as counted, for a server that gave none."""
        for index in list(self.partial_json):
            self._finish_json(index)
        message = {"id": message_id, "type": "message", "role": "assistant", "model": model, "content": [],
                   "stop_reason": None, "stop_sequence": None, **self.start, **self.delta}
        message.update(id=message_id, model=model, content=[self.blocks[i] for i in sorted(self.blocks)])
        if self.anthropic_usage:
            message["usage"] = {**(self.start.get("usage") or {}), **self.anthropic_usage}
        elif "usage" not in message and usage is not None:
            message["usage"] = messages_usage(usage)
        return message
