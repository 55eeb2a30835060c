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
because the client's body is kept as it came (the response cache's key is made from it)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

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
