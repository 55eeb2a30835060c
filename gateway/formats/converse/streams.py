"""ConverseStream's events read as `chat.completion.chunk` dicts, as
gateway/formats/anthropic/streams.py `MessagesToChatStream` reads Anthropic's. The transport decodes
AWS's binary event stream and hands each event over as its type (the `:event-type` header, or the
`:exception-type` of an exception) and its JSON payload."""

from __future__ import annotations

from typing import Any

from gateway.formats import StreamError
from gateway.formats.anthropic.replies import chat_usage
from gateway.formats.anthropic.to_chat import as_object

STOP_TO_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
                  "model_context_window_exceeded": "length", "tool_use": "tool_calls",
                  "content_filtered": "content_filter", "guardrail_intervened": "content_filter"}
# The exceptions ConverseStream may send inside the stream (its output shape's error members).
EXCEPTIONS = frozenset({"internalServerException", "modelStreamErrorException", "validationException",
                        "throttlingException", "serviceUnavailableException"})
# Converse's usage → Anthropic's names, whose meaning is the same (inputTokens excludes the cache reads
# and writes), so that replies.chat_usage alone says how they are carried.
USAGE_NAMES = {"inputTokens": "input_tokens", "outputTokens": "output_tokens",
               "cacheReadInputTokens": "cache_read_input_tokens",
               "cacheWriteInputTokens": "cache_creation_input_tokens"}


def anthropic_usage(usage: Any) -> dict[str, int]:
    """Converse's TokenUsage with Anthropic's names (for `chat_usage`)."""
    return {name: value for key, name in USAGE_NAMES.items()
            if isinstance(value := as_object(usage).get(key), int) and not isinstance(value, bool)}


class ConverseToChatStream:
    """ConverseStream events → `chat.completion.chunk` dicts. Reasoning text becomes
    `reasoning_content`; a matched stop sequence (when the model returns it, in
    `additionalModelResponseFields.stop_sequence`) the finishing choice's `stop_reason`; the input of
    `output_tool` (the forced tool that carries a `response_format`) the reply's text. `finished` is
    True after `metadata`, the stream's last event."""

    def __init__(self, completion_id: str, model: str, created: int, include_usage: bool = True, *,
                 output_tool: str | None = None) -> None:
        self.completion_id, self.model, self.created, self.include_usage = completion_id, model, created, include_usage
        self.output_tool = output_tool
        self.finished = False
        self._usage: dict[str, int] = {}
        self._tools: dict[int, int] = {}  # content block index → chat tool_call index
        self._outputs: set[int] = set()  # the output tool's content block indexes
        self._started = self._finish_sent = False

    @property
    def usage(self) -> dict:
        return chat_usage(self._usage)

    def _chunk(self, delta: dict, finish_reason: str | None = None, **extra: Any) -> dict:
        choice = {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None, **extra}
        chunk = {"id": self.completion_id, "object": "chat.completion.chunk", "created": self.created,
                 "model": self.model, "choices": [choice]}
        if self.include_usage:
            chunk["usage"] = None
        return chunk

    def feed(self, event_type: str, payload: dict) -> list[dict]:
        """The chunks of one event. Raises StreamError for an exception event, ValueError for an event
        that is not what ConverseStream sends (read by the provider as a malformed stream)."""
        if not isinstance(event_type, str):
            raise ValueError("A ConverseStream event's type is a string.")
        if event_type in EXCEPTIONS:
            payload = as_object(payload)
            message = payload.get("originalMessage") or payload.get("message")
            raise StreamError(event_type, message if isinstance(message, str) and message
                              else "The upstream stream failed.")
        if not isinstance(payload, dict):
            raise ValueError("A ConverseStream event's payload is a JSON object.")
        if self.finished:
            return []
        try:
            return self._feed(event_type, payload)
        except (TypeError, AttributeError, KeyError):  # a field missing or of the wrong type
            raise ValueError(f"A malformed ConverseStream {event_type} event.") from None

    def _feed(self, kind: str, payload: dict) -> list[dict]:
        out: list[dict] = []
        if not self._started:
            self._started = True
            out.append(self._chunk({"role": "assistant", "content": ""}))
        if kind == "contentBlockStart":
            out += self._block_start(_index(payload), payload["start"])
        elif kind == "contentBlockDelta":
            out += self._block_delta(_index(payload), payload["delta"])
        elif kind == "contentBlockStop":
            _index(payload)
        elif kind == "messageStop":
            out += self._stop(payload)
        elif kind == "metadata":
            self._usage = anthropic_usage(_object(payload["usage"]))
            self.finished = True
            if not self._finish_sent:  # a stream that skipped messageStop
                out += self._stop({"stopReason": "tool_use" if self._tools else "end_turn"})
            if self.include_usage:
                out.append({"id": self.completion_id, "object": "chat.completion.chunk", "created": self.created,
                            "model": self.model, "choices": [], "usage": self.usage})
        elif kind == "messageStart":
            _object(payload)
        return out  # an event type of a later API version: nothing to say

    def _stop(self, payload: dict) -> list[dict]:
        reason = payload["stopReason"]
        if not isinstance(reason, str):
            raise TypeError
        if self._finish_sent:
            return []
        self._finish_sent = True
        answered = reason == "tool_use" and self._outputs and not self._tools  # by the output tool alone
        finish = "stop" if answered else STOP_TO_FINISH.get(reason, "stop")  # malformed_model_output, ...
        sequence = as_object(payload.get("additionalModelResponseFields")).get("stop_sequence")
        extra = {"stop_reason": sequence} if reason == "stop_sequence" and isinstance(sequence, str) else {}
        return [self._chunk({}, finish, **extra)]

    def _block_start(self, index: int, start: Any) -> list[dict]:
        tool = _object(start).get("toolUse")
        if tool is None:
            return []  # a server tool's result or an image: nothing the chat form streams
        if not isinstance(tool.get("toolUseId"), str) or not isinstance(tool.get("name"), str):
            raise TypeError
        if self.output_tool is not None and tool["name"] == self.output_tool:
            self._outputs.add(index)
            return []
        tool_index = self._tools[index] = len(self._tools)
        call = {"index": tool_index, "id": tool["toolUseId"], "type": "function",
                "function": {"name": tool["name"], "arguments": ""}}
        return [self._chunk({"tool_calls": [call]})]

    def _block_delta(self, index: int, delta: Any) -> list[dict]:
        delta = _object(delta)
        if "text" in delta:
            return [self._chunk({"content": _text(delta["text"])})] if delta["text"] else []
        if "reasoningContent" in delta:
            thought = _object(delta["reasoningContent"]).get("text")  # or a signature, or redacted bytes
            return [self._chunk({"reasoning_content": _text(thought)})] if thought else []
        if "toolUse" not in delta:
            return []  # a citation, a server tool's result, an image
        piece = _text(_object(delta["toolUse"])["input"])
        if not piece:
            return []
        if index in self._outputs:
            return [self._chunk({"content": piece})]
        if (tool_index := self._tools.get(index)) is not None:
            return [self._chunk({"tool_calls": [{"index": tool_index, "function": {"arguments": piece}}]})]
        raise TypeError  # tool input for a block that did not start as a tool


def _object(value: Any) -> dict:
    if not isinstance(value, dict):
        raise TypeError
    return value


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError
    return value


def _index(payload: dict) -> int:
    index = payload["contentBlockIndex"]
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise TypeError
    return index
