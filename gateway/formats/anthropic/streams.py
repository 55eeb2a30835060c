"""Streams between the Anthropic Messages events and chat-completion chunks: an Anthropic
server's events read as chunks (`MessagesToChatStream`), and the gateway's chunks written as
Anthropic events for `/v1/messages` (`ChatToMessagesStream`)."""

from __future__ import annotations

import json
from typing import Any

from gateway.formats import StreamError
from gateway.formats.anthropic.replies import (
    DIRECT_CALLER,
    chat_usage,
    delta_usage,
    messages_usage,
    reasoning_of,
    stop_reason_of,
    stop_sequence,
)
from gateway.formats.anthropic.to_chat import STOP_TO_FINISH, as_object, new_id  # the package's shared mappings


class MessagesToChatStream:
    """Parsed Anthropic SSE event data → `chat.completion.chunk` dicts. Thinking becomes
    `reasoning_content`; a stop sequence the finishing choice's `stop_reason` (as vLLM gives it);
    the input of `output_tool` (the forced tool that carries a `response_format`) the reply's text."""

    def __init__(self, *, completion_id: str, model: str, created: int, include_usage: bool,
                 output_tool: str | None = None) -> None:
        self.completion_id, self.model, self.created, self.include_usage = completion_id, model, created, include_usage
        self.output_tool = output_tool
        self.finished = False
        self._anthropic_usage: dict[str, int] = {}
        self._tools: dict[Any, int] = {}  # Anthropic block index → chat tool_call index
        self._outputs: dict[Any, Any] = {}  # an output tool's block index → its start input; None once written
        self._started = self._finish_sent = False

    @property
    def usage(self) -> dict:
        return chat_usage(self._anthropic_usage)

    def _chunk(self, delta: dict, finish_reason: str | None = None, **extra: Any) -> dict:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None, **extra}
        chunk = {"id": self.completion_id, "object": "chat.completion.chunk", "created": self.created,
                 "model": self.model, "choices": [choice]}
        if self.include_usage:
            chunk["usage"] = None
        return chunk

    def _read_usage(self, usage: dict) -> None:
        for key, value in usage.items():
            if isinstance(value, int) and key.endswith("_tokens"):  # cumulative: overwrite
                self._anthropic_usage[key] = value

    def feed(self, event: dict) -> list[dict]:
        """The chunks of one event. Raises StreamError for an error event, ValueError for an event
        that is not what the Messages API sends (read by the provider as a malformed stream)."""
        if not isinstance(event, dict):
            raise ValueError("An Anthropic stream event must be a JSON object.")
        try:
            return self._feed(event)
        except (TypeError, AttributeError):  # an unhashable index, a field of the wrong type
            raise ValueError("A malformed Anthropic stream event.") from None

    def _feed(self, event: dict) -> list[dict]:
        kind = event.get("type")
        if kind == "error":
            error = as_object(event.get("error"))
            message = error.get("message") if isinstance(error.get("message"), str) else None
            raise StreamError(str(error.get("type") or "api_error"), message or "The upstream stream failed.")
        out: list[dict] = []
        if not self._started and kind != "ping":
            self._started = True
            out.append(self._chunk({"role": "assistant", "content": ""}))
        if kind == "message_start":
            self._read_usage(as_object(as_object(event.get("message")).get("usage")))
        elif kind == "content_block_start":
            out += self._block_start(event.get("index"), as_object(event.get("content_block")))
        elif kind == "content_block_delta":
            out += self._block_delta(event.get("index"), as_object(event.get("delta")))
        elif kind == "content_block_stop" and self._outputs.get(event.get("index")) is not None:
            out.append(self._chunk({"content": json.dumps(self._outputs[event["index"]], ensure_ascii=False)}))
            self._outputs[event["index"]] = None  # an output tool whose input came whole, in its start
        elif kind == "message_delta":
            self._read_usage(as_object(event.get("usage")))
            delta = as_object(event.get("delta"))
            reason = delta.get("stop_reason")
            if reason and not self._finish_sent:
                self._finish_sent = True
                answered = reason == "tool_use" and self._outputs and not self._tools  # by the output tool alone
                finish = "stop" if answered else STOP_TO_FINISH.get(reason, "stop")
                sequence = delta.get("stop_sequence")
                extra = {"stop_reason": sequence} if reason == "stop_sequence" and isinstance(sequence, str) else {}
                out.append(self._chunk({}, finish, **extra))
        elif kind == "message_stop":
            self.finished = True
            if not self._finish_sent:
                self._finish_sent = True
                out.append(self._chunk({}, "tool_calls" if self._tools else "stop"))
            if self.include_usage:
                out.append({"id": self.completion_id, "object": "chat.completion.chunk", "created": self.created,
                            "model": self.model, "choices": [], "usage": self.usage})
        return out

    def _block_start(self, index: Any, block: dict) -> list[dict]:
        kind = block.get("type")
        if kind == "text" and block.get("text"):
            return [self._chunk({"content": block["text"]})]
        if kind == "thinking" and block.get("thinking"):
            return [self._chunk({"reasoning_content": block["thinking"]})]
        if kind == "tool_use" and self.output_tool is not None and block.get("name") == self.output_tool:
            self._outputs[index] = block.get("input") or {}
        elif kind == "tool_use":
            tool_index = self._tools[index] = len(self._tools)
            function = {"name": block.get("name") or "", "arguments": ""}
            call = {"index": tool_index, "id": block.get("id"), "type": "function", "function": function}
            return [self._chunk({"tool_calls": [call]})]
        return []

    def _block_delta(self, index: Any, delta: dict) -> list[dict]:
        kind = delta.get("type")
        if kind == "text_delta" and delta.get("text"):
            return [self._chunk({"content": delta["text"]})]
        if kind == "thinking_delta" and delta.get("thinking"):
            return [self._chunk({"reasoning_content": delta["thinking"]})]
        if kind != "input_json_delta" or not delta.get("partial_json"):
            return []
        if index in self._outputs:
            self._outputs[index] = None  # written as it comes
            return [self._chunk({"content": delta["partial_json"]})]
        if (tool_index := self._tools.get(index)) is not None:
            call = {"index": tool_index, "function": {"arguments": delta["partial_json"]}}
            return [self._chunk({"tool_calls": [call]})]
        return []


class ChatToMessagesStream:
    """`chat.completion.chunk` dicts → Anthropic stream event dicts (each with `type`), with every
    field Anthropic's schema requires (as `chat_to_messages_response` fills them). Reasoning
    (`reasoning_content` or `reasoning`) streams as a thinking block with an empty signature; a
    matched stop string (vLLM's `stop_reason`) ends the message with `stop_sequence`."""

    def __init__(self, *, message_id: str, model: str, input_tokens: int = 0, request_id: str | None = None) -> None:
        self.message_id, self.model, self.request_id = message_id, model, request_id
        self._usage = messages_usage({"prompt_tokens": input_tokens})  # the Message's usage so far
        self._started = self._input_reported = False
        self._open_index: int | None = None
        self._open_kind: str | None = None
        self._next_index = 0
        self._tools: dict[Any, tuple[int, Any]] = {}  # chat tool index → (block index, call id)
        self._finish_reason: str | None = None
        self._stop_sequence: str | None = None

    def start(self) -> list[dict]:
        if self._started:
            return []
        self._started = True
        message = {"id": self.message_id, "type": "message", "role": "assistant", "model": self.model, "content": [],
                   "container": None, "stop_details": None, "stop_reason": None, "stop_sequence": None,
                   "usage": dict(self._usage)}
        return [{"type": "message_start", "message": message}]

    def _close(self) -> list[dict]:
        if self._open_index is None:
            return []
        event = {"type": "content_block_stop", "index": self._open_index}
        self._open_index = self._open_kind = None
        return [event]

    def _open(self, block: dict, kind: str) -> list[dict]:
        events = self._close()
        self._open_index, self._open_kind = self._next_index, kind
        self._next_index += 1
        events.append({"type": "content_block_start", "index": self._open_index, "content_block": block})
        return events

    def feed(self, chunk: dict) -> list[dict]:
        out = self.start()
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            counted = messages_usage(usage)
            if not usage.get("completion_tokens"):
                counted["output_tokens"] = self._usage["output_tokens"]
            if isinstance(usage.get("prompt_tokens"), int):
                self._input_reported = True
            else:
                counted["input_tokens"] = self._usage["input_tokens"]
            self._usage = counted
        for choice in chunk.get("choices") or []:
            if as_object(choice).get("index", 0) != 0:
                continue
            delta = as_object(choice.get("delta"))
            if thought := reasoning_of(delta):
                if self._open_kind != "thinking":
                    out += self._open({"type": "thinking", "thinking": "", "signature": ""}, "thinking")
                delta_event = {"type": "content_block_delta", "index": self._open_index}
                out.append({**delta_event, "delta": {"type": "thinking_delta", "thinking": thought}})
            text = delta.get("content") or delta.get("refusal")
            if text:
                if self._open_kind != "text":
                    out += self._open({"type": "text", "text": "", "citations": None}, "text")
                delta_event = {"type": "content_block_delta", "index": self._open_index}
                out.append({**delta_event, "delta": {"type": "text_delta", "text": text}})
            for call in delta.get("tool_calls") or []:
                out += self._tool_delta(as_object(call))
            if choice.get("finish_reason"):
                self._finish_reason = choice["finish_reason"]
                self._stop_sequence = stop_sequence(choice)
        return out

    def _tool_delta(self, call: dict) -> list[dict]:
        key, function, out = call.get("index", 0), as_object(call.get("function")), []
        known = self._tools.get(key)
        if known is None or (call.get("id") and call["id"] != known[1]):
            call_id = call.get("id") or new_id("toolu_")
            block = {"type": "tool_use", "id": call_id, "caller": DIRECT_CALLER, "name": function.get("name") or "",
                     "input": {}}
            out = self._open(block, "tool")
            known = self._tools[key] = (self._open_index, call_id)
        if function.get("arguments"):
            delta = {"type": "input_json_delta", "partial_json": function["arguments"]}
            out.append({"type": "content_block_delta", "index": known[0], "delta": delta})
        return out

    def finish(self) -> list[dict]:
        out = self.start() + self._close()
        if self._stop_sequence is not None and not self._tools:
            stop = {"stop_reason": "stop_sequence", "stop_sequence": self._stop_sequence}
        else:
            stop = {"stop_reason": stop_reason_of(self._finish_reason, bool(self._tools)), "stop_sequence": None}
        delta = {"container": None, "stop_details": None, **stop}
        out.append({"type": "message_delta", "delta": delta,
                    "usage": delta_usage(self._usage, input_known=self._input_reported)})
        out.append({"type": "message_stop"})
        return out

    def error(self, error_type: str, message: str) -> dict:
        """The `error` event: Anthropic's error body, `request_id` the gateway's id of the request."""
        return {"type": "error", "error": {"type": error_type, "message": message}, "request_id": self.request_id}
