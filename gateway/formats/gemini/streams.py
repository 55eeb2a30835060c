"""streamGenerateContent's chunks (each SSE `data:` a GenerateContentResponse) read as
`chat.completion.chunk` dicts, as gateway/formats/anthropic/streams.py `MessagesToChatStream` reads
Anthropic's events.

Each Gemini chunk carries whole parts: text (thoughts marked `thought: true`), and function calls
whole, never in pieces, so a call is one tool_calls delta with its id, name and arguments. Candidates
are the chat form's choices, by their index (Gemini leaves index 0 out). Usage comes cumulative in
`usageMetadata` (the Gemini API sends it in every chunk, Vertex in the last), so it is sent once the
upstream stream has ended (`end`)."""

from __future__ import annotations

import json
from typing import Any

from gateway.formats import StreamError
from gateway.formats.gemini.parts import call_id
from gateway.formats.gemini.usage import chat_logprobs, finish_reason, gemini_usage


class GeminiToChatStream:
    """GenerateContentResponse chunks → `chat.completion.chunk` dicts. Thoughts become
    `reasoning_content`; a function call a tool_calls delta whose id carries the call's thought
    signature; a prompt Gemini blocked a refusal (`refusal`, finish_reason "content_filter"), as an
    Anthropic `refusal` stop reads. `output_tool`, a forced tool carrying a `response_format`, is not
    needed with Gemini (it constrains its output to a JSON schema itself) but is read the same way as
    the other translations read it: its call's arguments become the reply's text. `finished` is True
    once each choice has had its finishReason (or the prompt was blocked)."""

    def __init__(self, completion_id: str, model: str, created: int, include_usage: bool = True,
                 output_tool: str | None = None) -> None:
        self.completion_id, self.model, self.created, self.include_usage = completion_id, model, created, include_usage
        self.output_tool = output_tool
        self._usage: dict | None = None  # the last usageMetadata seen
        self._started: set[int] = set()  # candidate indexes given their role
        self._calls: dict[int, int] = {}  # candidate index → tool calls so far
        self._answered: set[int] = set()  # candidates answered through the output tool
        self._done: set[int] = set()  # candidates given their finish_reason
        self._ended = False

    @property
    def finished(self) -> bool:
        """Whether every choice begun has had its finish_reason (a blocked prompt's included)."""
        return bool(self._done) and self._started <= self._done

    @property
    def usage(self) -> dict | None:
        """The chat form's usage of the last usageMetadata, None before any."""
        return gemini_usage(self._usage) if self._usage is not None else None

    def _chunk(self, index: int, delta: dict, finish: str | None = None) -> dict:
        choice = {"index": index, "delta": delta, "finish_reason": finish, "logprobs": None}
        chunk = {"id": self.completion_id, "object": "chat.completion.chunk", "created": self.created,
                 "model": self.model, "choices": [choice]}
        if self.include_usage:
            chunk["usage"] = None
        return chunk

    def feed(self, chunk: dict) -> list[dict]:
        """The chat chunks of one Gemini chunk. Raises StreamError for an error Gemini sends inside the
        stream (`{"error": {code, message, status}}`), ValueError for a chunk that is not what Gemini
        sends (read by the provider as a malformed stream)."""
        if not isinstance(chunk, dict):
            raise ValueError("A Gemini stream chunk is a JSON object.")
        if "error" in chunk:
            error = chunk["error"] if isinstance(chunk["error"], dict) else {}
            message = error.get("message")
            raise StreamError(str(error.get("status") or error.get("code") or "UNKNOWN"),
                              message if isinstance(message, str) and message else "The upstream stream failed.")
        try:
            return self._feed(chunk)
        except (TypeError, AttributeError, KeyError):  # a field missing or of the wrong type
            raise ValueError("A malformed Gemini stream chunk.") from None

    def _feed(self, chunk: dict) -> list[dict]:
        if (usage := chunk.get("usageMetadata")) is not None:
            self._usage = _object(usage)
        candidates = chunk["candidates"] if chunk.get("candidates") is not None else []
        if not isinstance(candidates, list):
            raise TypeError
        out: list[dict] = []
        if not candidates and chunk.get("promptFeedback") is not None:
            out += self._blocked(_object(chunk["promptFeedback"]))
        for candidate in candidates:
            out += self._candidate(_object(candidate))
        return out

    def _start(self, index: int) -> list[dict]:
        if index in self._started:
            return []
        self._started.add(index)
        return [self._chunk(index, {"role": "assistant", "content": ""})]

    def _blocked(self, feedback: dict) -> list[dict]:
        """A prompt Gemini would not answer: no candidate, a blockReason. The chat form's refusal, with
        Gemini's reason (and its message, where Vertex gives one)."""
        reason = feedback.get("blockReason")
        if reason is None or 0 in self._done:
            return []
        text = f"The prompt was blocked ({_text(reason)})."
        if isinstance(feedback.get("blockReasonMessage"), str) and feedback["blockReasonMessage"]:
            text += " " + feedback["blockReasonMessage"]
        self._done.add(0)
        return [*self._start(0), self._chunk(0, {"refusal": text}), self._chunk(0, {}, "content_filter")]

    def _candidate(self, candidate: dict) -> list[dict]:
        index = candidate.get("index", 0)
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise TypeError
        if index in self._done:
            return []
        out = self._start(index)
        content = _object(candidate["content"]) if candidate.get("content") is not None else {}
        found = content["parts"] if content.get("parts") is not None else []
        if not isinstance(found, list):
            raise TypeError
        said = [chunk for part in found for chunk in self._part(index, _object(part))]
        if candidate.get("logprobsResult") is not None:
            said = self._with_logprobs(index, said, chat_logprobs(candidate["logprobsResult"]))
        out += said
        reason = candidate.get("finishReason")
        if reason is not None:
            answered = index in self._answered and not self._calls.get(index)  # by the output tool alone
            finish = "stop" if answered else finish_reason(_text(reason), called_tools=bool(self._calls.get(index)))
            out.append(self._chunk(index, {}, finish))
            self._done.add(index)
        return out

    def _with_logprobs(self, index: int, said: list[dict], logprobs: dict) -> list[dict]:
        """A Gemini chunk's log probabilities go with its first text, else in a chunk of their own."""
        carrier = next((chunk for chunk in said if "content" in chunk["choices"][0]["delta"]), None)
        if carrier is None:
            carrier = self._chunk(index, {})
            said = [carrier, *said]
        carrier["choices"][0]["logprobs"] = logprobs
        return said

    def _part(self, index: int, part: dict) -> list[dict]:
        if "text" in part:
            text = _text(part["text"])
            if not text:
                return []  # a part that carries only a thought signature
            return [self._chunk(index, {"reasoning_content" if part.get("thought") is True else "content": text})]
        if "functionCall" not in part:
            return []  # code run by a server tool, an image: nothing the chat form streams
        call = _object(part["functionCall"])
        name, args = _text(call["name"]), call.get("args")
        arguments = json.dumps(_object(args) if args is not None else {}, ensure_ascii=False)
        if self.output_tool is not None and name == self.output_tool:
            self._answered.add(index)
            return [self._chunk(index, {"content": arguments})]
        number = self._calls.get(index, 0)
        self._calls[index] = number + 1
        tool_call = {"index": number, "id": call_id(call.get("id"), part.get("thoughtSignature")),
                     "type": "function", "function": {"name": name, "arguments": arguments}}
        return [self._chunk(index, {"tool_calls": [tool_call]})]

    def end(self) -> list[dict]:
        """The closing chunks once the upstream stream has ended: the finish_reason of a choice that
        had none (a stream that ended without one), and the usage chunk."""
        if self._ended:
            return []
        self._ended = True
        out = [self._chunk(index, {}, "tool_calls" if self._calls.get(index) else "stop")
               for index in sorted(self._started - self._done)]
        if self.include_usage and self._usage is not None:
            out.append({"id": self.completion_id, "object": "chat.completion.chunk", "created": self.created,
                        "model": self.model, "choices": [], "usage": self.usage})
        return out


def _object(value: Any) -> dict:
    if not isinstance(value, dict):
        raise TypeError
    return value


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError
    return value
