"""The texts of a request in each wire format, and the same request with those texts replaced: what
the input checks read and what a redaction writes back.

    texts = texts_of(CHAT, body)              # every string a model would read as text, in one order
    body = rewritten(CHAT, body, redacted)    # a copy with them replaced; `body` itself when unchanged

A format's texts are every place a client can put words, so that a check cannot be stepped around
by the route a call takes or the block it hides in:

- chat (OpenAI's chat completions, the gateway's own form): each message's `content` (a string or
  its text parts), whatever the role (system, developer, user, assistant, tool), the arguments of an
  assistant's earlier tool calls, and a `refusal` an assistant message carries;
- anthropic (the Messages API, passed through as the client sent it): `system` (a string or its text
  blocks, `cache_control` or not), each message's text blocks, `tool_result` blocks (a string or
  their text blocks), documents' text (`source.data` of a text source, the blocks of a content
  source), search results' text, and the strings inside an earlier `tool_use`'s input;
- gemini (Google's generateContent body, camelCase or snake_case): `systemInstruction`'s text parts,
  each content's text parts, and the strings inside `functionCall.args` and `functionResponse.response`.

What is not text stays as it came (images, files, base64 data, thinking blocks and their signatures,
tool definitions): see the guardrails' decision record for what that leaves out. The walk is the
same on the request and on its copy, so the n-th text read is the n-th written; the copy is deep,
because the client's body is kept as it came (the response cache's key is made from it).

A reply's texts go through `ReplyScreen`, chunk by chunk in the reply's format (chat chunks, Anthropic
events, Gemini chunks: gateway/cache/entry.py's kinds), one output filter (gateway/guard/stream.py) per
stream of text in it (a choice's content, a tool call's arguments, an Anthropic content block, a Gemini
candidate). A filter holds back at most WINDOW characters so that what is split across chunks is still
caught: what it holds is released in later chunks, and the rest just before the chunk that ends its
stream (chat's `finish_reason`, Anthropic's `content_block_stop`, Gemini's `finishReason`), or in a chunk
of its own when a stream ends without one. Chunks are changed in place: the cache's recorder has
copied each already, and a kept reply's chunks are read anew for each hit."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gateway.guard.screening import Screening

CHAT = "chat"
OPENAI = "openai"  # a request passed through to an OpenAI-compatible server: the chat form itself
ANTHROPIC = "anthropic"
GEMINI = "gemini"

Slot = tuple[Any, Any]  # (a dict or list, its key or index) holding a string


def texts_of(kind: str, body: dict[str, Any]) -> list[str]:
    """The texts of a request of wire format `kind` (CHAT, OPENAI, ANTHROPIC, GEMINI), in a fixed order."""
    return [holder[key] for holder, key in _slots(kind, body)]


def rewritten(kind: str, body: dict[str, Any], texts: list[str]) -> dict[str, Any]:
    """`body` with its texts (as `texts_of` lists them) replaced by `texts`; `body` itself, not a
    copy, when none changed. The client's body is never changed in place."""
    slots = list(_slots(kind, body))
    if len(slots) != len(texts):
        raise ValueError(f"{len(texts)} texts for a request that has {len(slots)}")
    if all(holder[key] == text for (holder, key), text in zip(slots, texts)):
        return body
    body = copy.deepcopy(body)
    for (holder, key), text in zip(_slots(kind, body), texts):
        holder[key] = text
    return body


def _slots(kind: str, body: Any) -> Iterator[Slot]:
    if not isinstance(body, dict):
        return iter(())
    if kind in (CHAT, OPENAI):
        return _chat(body)
    if kind == ANTHROPIC:
        return _anthropic(body)
    if kind == GEMINI:
        return _gemini(body)
    raise ValueError(f"no texts are known for the wire format {kind!r}")


def _text(holder: Any, key: Any) -> Iterator[Slot]:
    if isinstance(holder, (dict, list)) and _has(holder, key) and isinstance(holder[key], str):
        yield holder, key


def _has(holder: dict | list, key: Any) -> bool:
    return key in holder if isinstance(holder, dict) else 0 <= key < len(holder)


def _strings(holder: Any, key: Any) -> Iterator[Slot]:
    """Every string inside holder[key] (a JSON value: a tool's arguments or result)."""
    if not isinstance(holder, (dict, list)) or not _has(holder, key):
        return
    value = holder[key]
    if isinstance(value, str):
        yield holder, key
    elif isinstance(value, dict):
        for inner in list(value):
            yield from _strings(value, inner)
    elif isinstance(value, list):
        for index in range(len(value)):
            yield from _strings(value, index)


def _items(value: Any) -> list:
    return value if isinstance(value, list) else []


# The chat form.

def _chat(body: dict) -> Iterator[Slot]:
    for message in _items(body.get("messages")):
        if not isinstance(message, dict):
            continue
        yield from _chat_content(message, "content")
        yield from _text(message, "refusal")
        for call in _items(message.get("tool_calls")):
            if isinstance(call, dict):
                yield from _text(call.get("function"), "arguments")


def _chat_content(holder: dict, key: str) -> Iterator[Slot]:
    """A string, or parts of which the text ones count (`text`, and the Responses API's `input_text`)."""
    content = holder.get(key)
    if isinstance(content, str):
        yield holder, key
        return
    for part in _items(content):
        if isinstance(part, dict) and part.get("type") in ("text", "input_text", "output_text"):
            yield from _text(part, "text")


# Anthropic's Messages API.

def _anthropic(body: dict) -> Iterator[Slot]:
    yield from _blocks(body, "system")
    for message in _items(body.get("messages")):
        if isinstance(message, dict):
            yield from _blocks(message, "content")


def _blocks(holder: dict, key: str) -> Iterator[Slot]:
    """A string, or content blocks: each block's text, wherever its kind keeps it."""
    content = holder.get(key)
    if isinstance(content, str):
        yield holder, key
        return
    for block in _items(content):
        if isinstance(block, dict):
            yield from _block(block)


def _block(block: dict) -> Iterator[Slot]:
    kind = block.get("type")
    if kind == "text":
        yield from _text(block, "text")
    elif kind == "tool_result":
        yield from _blocks(block, "content")
    elif kind == "tool_use":
        yield from _strings(block, "input")
    elif kind == "document":
        source = block.get("source")
        if isinstance(source, dict) and source.get("type") == "text":
            yield from _text(source, "data")
        elif isinstance(source, dict) and source.get("type") == "content":
            yield from _blocks(source, "content")
        yield from _text(block, "context")
    elif kind == "search_result":
        yield from _blocks(block, "content")


# Google's Gemini API.

def _gemini(body: dict) -> Iterator[Slot]:
    system = _field(body, "systemInstruction")
    if isinstance(system, dict):
        yield from _parts(system)
    elif isinstance(system, str):  # the API takes a bare string too
        yield from _text(body, _name(body, "systemInstruction"))
    contents = _field(body, "contents")
    if isinstance(contents, dict):  # one content, not a list of them
        contents = [contents]
    for content in _items(contents):
        if isinstance(content, dict):
            yield from _parts(content)


def _parts(content: dict) -> Iterator[Slot]:
    for part in _items(content.get("parts")):
        if not isinstance(part, dict):
            continue
        yield from _text(part, "text")
        call = _field(part, "functionCall")
        if isinstance(call, dict):
            yield from _strings(call, "args")
        result = _field(part, "functionResponse")
        if isinstance(result, dict):
            yield from _strings(result, "response")


def _name(obj: dict, camel: str) -> str:
    """The spelling of a Google field the object uses: camelCase, else snake_case."""
    if camel in obj:
        return camel
    return "".join("_" + c.lower() if c.isupper() else c for c in camel)


def _field(obj: dict, camel: str) -> Any:
    return obj.get(_name(obj, camel))


# A reply's texts, chunk by chunk: the output filters of one reply over the chunks of its format.

class ReplyScreen:
    """The output filters of one reply, one per stream of text in it, made as each stream begins."""

    def __init__(self, screening: Screening, kind: str) -> None:
        self.screening = screening
        self.kind = kind
        self.filters: dict[tuple, Any] = {}
        self.last: dict[str, Any] | None = None  # a chunk to copy the envelope of (id, model) from
        self.kinds: dict[int, str] = {}  # Anthropic: each text-carrying block's delta type, for its release

    async def feed(self, key: tuple, text: str) -> str:
        output = self.filters.get(key)
        if output is None:
            output = self.filters[key] = self.screening.output()
        return await output.feed(text)

    async def rest(self, key: tuple) -> str:
        output = self.filters.pop(key, None)
        return await output.end() if output is not None else ""

    async def chunk(self, chunk: dict[str, Any]) -> list[dict[str, Any]]:
        self.last = chunk
        if self.kind == ANTHROPIC:
            return await self._event(chunk)
        if self.kind == GEMINI:
            return await self._gemini(chunk)
        return await self._chat(chunk)

    async def end(self) -> list[dict[str, Any]]:
        """What is still held when the stream ended without its closing chunks."""
        if not self.filters:
            return []
        if self.kind == ANTHROPIC:
            events = [await self._block_rest(index) for (_, index) in list(self.filters)]
            return [e for e in events if e is not None]
        if self.kind == GEMINI:
            parts = {index: await self.rest(("g", index)) for (_, index) in list(self.filters)}
            candidates = [{"index": i, "content": {"role": "model", "parts": [{"text": t}]}}
                          for i, t in parts.items() if t]
            return [{"candidates": candidates}] if candidates else []
        choices = [await self._choice_rest(index) for index in sorted({key[1] for key in self.filters})]
        choices = [c for c in choices if c is not None]
        return [self._chat_envelope(choices)] if choices else []

    # The chat form: each choice's content, each tool call's arguments.

    async def _chat(self, chunk: dict[str, Any]) -> list[dict[str, Any]]:
        before: list[dict[str, Any]] = []
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict):
                continue
            index = choice.get("index", 0)
            delta = choice.get("delta")
            if isinstance(delta, dict):
                if isinstance(delta.get("content"), str) and delta["content"]:
                    delta["content"] = await self.feed(("c", index), delta["content"])
                for call in delta.get("tool_calls") or ():
                    function = call.get("function") if isinstance(call, dict) else None
                    arguments = function.get("arguments") if isinstance(function, dict) else None
                    if isinstance(arguments, str) and arguments:
                        function["arguments"] = await self.feed(("t", index, call.get("index", 0)), arguments)
            if choice.get("finish_reason") and (rest := await self._choice_rest(index)) is not None:
                if isinstance(delta, dict):  # what this chunk let through goes first, in the release
                    if delta.get("content"):
                        rest["delta"]["content"] = delta.pop("content") + rest["delta"].get("content", "")
                    if delta.get("tool_calls"):
                        rest["delta"]["tool_calls"] = delta.pop("tool_calls") + rest["delta"].get("tool_calls", [])
                before.append(rest)
        if before:
            return [self._chat_envelope(before, chunk), chunk]
        return [chunk]

    async def _choice_rest(self, index: int) -> dict[str, Any] | None:
        delta: dict[str, Any] = {}
        if text := await self.rest(("c", index)):
            delta["content"] = text
        calls = [key for key in self.filters if key[0] == "t" and key[1] == index]
        for key in sorted(calls):
            if arguments := await self.rest(key):
                delta.setdefault("tool_calls", []).append({"index": key[2], "function": {"arguments": arguments}})
        return {"index": index, "delta": delta, "finish_reason": None} if delta else None

    def _chat_envelope(self, choices: list[dict[str, Any]], like: dict[str, Any] | None = None) -> dict[str, Any]:
        like = like or self.last or {}
        envelope = {name: like[name] for name in ("id", "object", "created", "model") if name in like}
        return {**envelope, "choices": choices}

    # Anthropic's events: each content block's text or tool input, released before its stop.

    async def _event(self, event: dict[str, Any]) -> list[dict[str, Any]]:
        kind = event.get("type")
        index = event.get("index", 0)
        if kind == "content_block_delta" and isinstance(delta := event.get("delta"), dict):
            field = {"text_delta": "text", "input_json_delta": "partial_json"}.get(delta.get("type"))
            if field and isinstance(delta.get(field), str) and delta[field]:
                self.kinds[index] = delta["type"]
                delta[field] = await self.feed(("a", index), delta[field])
        elif kind == "content_block_start" and isinstance(block := event.get("content_block"), dict):
            if block.get("type") == "text" and isinstance(block.get("text"), str) and block["text"]:
                self.kinds[index] = "text_delta"
                block["text"] = await self.feed(("a", index), block["text"])
        elif kind == "content_block_stop" and (rest := await self._block_rest(index)) is not None:
            return [rest, event]
        return [event]

    async def _block_rest(self, index: int) -> dict[str, Any] | None:
        text = await self.rest(("a", index))
        if not text:
            return None
        kind = self.kinds.get(index, "text_delta")
        field = "text" if kind == "text_delta" else "partial_json"
        return {"type": "content_block_delta", "index": index, "delta": {"type": kind, field: text}}

    # Gemini's chunks: each candidate's text parts (thoughts aside), function calls' string arguments.

    async def _gemini(self, chunk: dict[str, Any]) -> list[dict[str, Any]]:
        for position, candidate in enumerate(chunk.get("candidates") or ()):
            if not isinstance(candidate, dict):
                continue
            index = candidate.get("index", position)
            content = candidate.get("content")
            parts = content.get("parts") if isinstance(content, dict) else None
            for part in parts if isinstance(parts, list) else ():
                if not isinstance(part, dict) or part.get("thought"):
                    continue
                if isinstance(part.get("text"), str) and part["text"]:
                    part["text"] = await self.feed(("g", index), part["text"])
                call = part.get("functionCall", part.get("function_call"))
                if isinstance(call, dict) and isinstance(call.get("args"), dict):
                    call["args"] = await self._whole_strings(call["args"])
            finished = candidate.get("finishReason", candidate.get("finish_reason"))
            if finished and (rest := await self.rest(("g", index))):
                if not isinstance(content, dict) or not isinstance(parts, list):
                    content = candidate["content"] = {"role": "model", "parts": []}
                    parts = content["parts"]
                parts.append({"text": rest})
        return [chunk]

    async def _whole_strings(self, value: Any) -> Any:
        """A function call's arguments, each string checked whole (they come in one chunk)."""
        if isinstance(value, str):
            return await self.screening.output().whole(value)
        if isinstance(value, dict):
            return {key: await self._whole_strings(inner) for key, inner in value.items()}
        if isinstance(value, list):
            return [await self._whole_strings(inner) for inner in value]
        return value
