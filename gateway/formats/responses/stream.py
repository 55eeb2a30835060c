"""Chat-completion chunks -> OpenAI Responses stream events, text and function calls.

The output items are numbered in the order they start: the reply's text is a message item, each
tool call a function_call item. The message item is closed when a tool call starts (text that
comes later opens another one); function calls stay open until the reply ends, so arguments that
arrive late for an earlier call still reach it, and are then closed in output order.
"""

from __future__ import annotations

from typing import Any

from gateway.formats.responses.fields import wants_logprobs
from gateway.formats.responses.tools import namespaced, output_call
from gateway.formats.responses.translate import (
    call_item_id,
    message_id,
    message_item,
    reply_status,
    response_object,
    response_usage,
    text_part,
)


def _obj(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


class ChatToResponsesStream:
    """`chat.completion.chunk` dicts → Responses stream events, each with `type` and `sequence_number`."""

    def __init__(self, *, response_id: str, model: str, request: dict, created_at: int) -> None:
        self.response_id, self.model, self.request, self.created_at = response_id, model, request, created_at
        self._spaces = namespaced(request.get("tools"))
        self._logprobs = wants_logprobs(request)  # the text's log probabilities go with it
        self._items: list[dict] = []  # by output index: {"text": [...], "logprobs": [...]} or {"call": chat tool
        # call}, with "id" and "open"
        self._text_at: int | None = None  # the output index of the message item taking text
        self._calls: dict[int, int] = {}  # chat tool-call index -> output index
        self._sequence = 0
        self._started = self._ended = False
        self._finish_reason: str | None = None
        self._usage: dict | None = None

    @property
    def text(self) -> str:
        return "".join(piece for item in self._items for piece in item.get("text", ()))

    def _event(self, event_type: str, **fields: Any) -> dict:
        event = {"type": event_type, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        return event

    def _snapshot(self, status: str, output: list, **extra: Any) -> dict:
        return response_object(self.response_id, self.request, self.created_at, self.model, status, output, **extra)

    def _shape(self, item: dict, status: str) -> dict:
        if "call" in item:
            return output_call(item["call"], item_id=item["id"], spaces=self._spaces, status=status)
        return message_item(item["id"], "".join(item["text"]), status, item["logprobs"] if self._logprobs else None)

    def start(self) -> list[dict]:
        if self._started:
            return []
        self._started = True
        return [self._event("response.created", response=self._snapshot("in_progress", [])),
                self._event("response.in_progress", response=self._snapshot("in_progress", []))]

    def _open_message(self) -> list[dict]:
        index = self._text_at = len(self._items)
        item_id = message_id(self.response_id, index)
        self._items.append({"id": item_id, "text": [], "logprobs": [], "open": True})
        item = {"type": "message", "id": item_id, "role": "assistant", "status": "in_progress", "content": []}
        part = text_part("")
        return [self._event("response.output_item.added", output_index=index, item=item),
                self._event("response.content_part.added", item_id=item_id, output_index=index, content_index=0,
                            part=part)]

    def _open_call(self, delta: dict) -> tuple[int, list[dict]]:
        out = self._close(self._text_at, "completed") if self._text_at is not None else []
        self._text_at = None
        index = len(self._items)
        function = _obj(delta.get("function"))
        call = {"id": delta.get("id") or "", "function": {"name": function.get("name") or "", "arguments": ""}}
        item = {"id": call_item_id(self.response_id, index), "call": call, "open": True}
        self._items.append(item)
        self._calls[delta.get("index") or 0] = index
        return index, out + [self._event("response.output_item.added", output_index=index,
                                         item=self._shape(item, "in_progress"))]

    def _text(self, text: str, logprobs: list) -> list[dict]:
        out = self._open_message() if self._text_at is None else []
        item = self._items[self._text_at]
        item["text"].append(text)
        item["logprobs"] += logprobs
        return out + [self._event("response.output_text.delta", item_id=item["id"], output_index=self._text_at,
                                  content_index=0, delta=text, logprobs=logprobs)]

    def _tool_delta(self, delta: dict) -> list[dict]:
        index = self._calls.get(delta.get("index") or 0)
        out: list[dict] = []
        if index is None:
            index, out = self._open_call(delta)
        else:
            name = _obj(delta.get("function")).get("name")
            if name:
                self._items[index]["call"]["function"]["name"] += name
            if delta.get("id"):
                self._items[index]["call"]["id"] = delta["id"]
        item = self._items[index]
        arguments = _obj(delta.get("function")).get("arguments")
        if arguments:
            item["call"]["function"]["arguments"] += arguments
            out.append(self._event("response.function_call_arguments.delta", item_id=item["id"], output_index=index,
                                   delta=arguments))
        return out

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
                out += self._text(text, self._chosen(choice.get("logprobs")))
            for call in delta.get("tool_calls") or []:
                if isinstance(call, dict):
                    out += self._tool_delta(call)
            if choice.get("finish_reason"):
                self._finish_reason = choice["finish_reason"]
        return out

    def _chosen(self, logprobs: Any) -> list[dict]:
        """A chunk's log probabilities of its text, when the request asked for them."""
        content = _obj(logprobs).get("content") if self._logprobs else None
        return [entry for entry in content if isinstance(entry, dict)] if isinstance(content, list) else []

    def _close(self, index: int, status: str) -> list[dict]:
        item = self._items[index]
        if not item["open"]:
            return []
        item["open"] = False
        shaped = self._shape(item, status)
        if "call" in item:
            out = [self._event("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                               name=shaped["name"], arguments=shaped["arguments"])]
        else:
            where = {"item_id": item["id"], "output_index": index, "content_index": 0}
            part = shaped["content"][0]
            out = [self._event("response.output_text.done", **where, text=part["text"], logprobs=part["logprobs"]),
                   self._event("response.content_part.done", **where, part=part)]
        return out + [self._event("response.output_item.done", output_index=index, item=shaped)]

    def _close_all(self, status: str) -> list[dict]:
        return [event for index in range(len(self._items)) for event in self._close(index, status)]

    def finish(self) -> list[dict]:
        out = self.start()
        if self._ended:
            return out
        self._ended = True
        status, incomplete = reply_status(self._finish_reason)
        if not self._items:  # an empty reply still gets its message item, as the non-streamed reply does
            out += self._open_message()
        out += self._close_all(status)
        response = self._snapshot(status, [self._shape(item, status) for item in self._items],
                                  usage=response_usage(self._usage), incomplete=incomplete)
        out.append(self._event("response.completed" if status == "completed" else "response.incomplete",
                               response=response))
        return out

    def fail(self, code: str, message: str) -> list[dict]:
        out = self.start()
        if self._ended:
            return out
        self._ended = True
        out += self._close_all("incomplete")
        response = self._snapshot("failed", [self._shape(item, "incomplete") for item in self._items],
                                  usage=response_usage(self._usage) if self._usage else None,
                                  error={"code": code, "message": message})
        out.append(self._event("response.failed", response=response))
        return out
