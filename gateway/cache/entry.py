"""A cached reply: the chunks the model server streamed, recorded as they passed (`Recorder`) and
replayed on a hit (`replay`), so each surface makes its own events from them as it did the first
time: chat completions chunks, messages events, responses events or native chat's deltas, whole or
streamed, whichever the client asks for now. The text is the same text; consecutive text deltas are
kept as one, so a replayed stream has fewer, longer deltas.

Three kinds of chunks: chat-completion chunks (`CHAT`, every server's reply in the neutral form), an
Anthropic server's own events (`ANTHROPIC`, a /v1/messages request passed through untranslated) and
a Gemini server's own GenerateContentResponse chunks (`GEMINI`, a generateContent request passed
through untranslated); each kind is the name of the native wire format it is in."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

CHAT = "chat"
ANTHROPIC = "anthropic"
GEMINI = "gemini"
KINDS = (CHAT, ANTHROPIC, GEMINI)
FORMAT = 1  # the stored layout; an entry of another layout is not read (a miss)
MAX_BYTES = 4 * 1024 * 1024  # a longer reply is not kept

_CHOICE_FIELDS = frozenset({"index", "delta", "finish_reason", "logprobs"})
_IGNORED_CHUNK_FIELDS = frozenset({"choices", "obfuscation"})  # OpenAI's per-chunk padding differs chunk to chunk
_EVENT_TEXT = {"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "partial_json"}


@dataclass
class Entry:
    kind: str  # one of KINDS
    model: str  # the public id of the model that made the reply
    usage: dict[str, int]  # its usage as metered (prompt, completion and total tokens)
    chunks: list[dict[str, Any]] = field(default_factory=list)

    def dumps(self) -> bytes | None:
        """The entry as stored; None when it is longer than MAX_BYTES."""
        data = json.dumps({"f": FORMAT, "kind": self.kind, "model": self.model, "usage": self.usage,
                           "chunks": self.chunks}, separators=(",", ":")).encode()
        return data if len(data) <= MAX_BYTES else None

    @classmethod
    def loads(cls, data: bytes) -> Entry | None:
        """The entry stored as `data`; None when it is not one this release wrote."""
        try:
            stored = json.loads(data)
            if stored.get("f") != FORMAT or stored["kind"] not in KINDS:
                return None
            usage = {name: int(stored["usage"][name]) for name in ("prompt_tokens", "completion_tokens",
                                                                    "total_tokens")}
            chunks = stored["chunks"]
            if not isinstance(stored["model"], str) or not isinstance(chunks, list):
                return None
            return cls(kind=stored["kind"], model=stored["model"], usage=usage, chunks=chunks)
        except (ValueError, TypeError, KeyError, AttributeError):
            return None


async def replay(entry: Entry) -> AsyncIterator[dict[str, Any]]:
    """The entry's chunks, as a model server's reply would come (each is the caller's to change:
    an entry is read anew for each hit)."""
    for chunk in entry.chunks:
        yield chunk


class Recorder:
    """The chunks of one reply, copied as they pass (a surface may change a chunk after it), with
    consecutive text deltas of the same choice, or the same content block, joined."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.chunks: list[dict[str, Any]] = []
        self._join = {CHAT: _join_chunks, ANTHROPIC: _join_events}.get(kind, _kept_apart)

    def add(self, chunk: dict[str, Any]) -> None:
        if self.chunks and (joined := self._join(self.chunks[-1], chunk)) is not None:
            self.chunks[-1] = joined
        else:
            self.chunks.append(_copy(chunk))

    def entry(self, *, model: str, usage: dict[str, int]) -> Entry:
        return Entry(kind=self.kind, model=model, usage=dict(usage), chunks=self.chunks)


def _kept_apart(last: dict[str, Any], chunk: dict[str, Any]) -> None:
    """A Gemini chunk is kept as it came: it carries its candidates' parts whole."""
    return None


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _text_of_chunk(chunk: dict[str, Any]) -> tuple[Any, str, str] | None:
    """(choice index, delta field, text) of a chunk that carries only text for one choice."""
    choices = chunk.get("choices")
    if not isinstance(choices, list) or len(choices) != 1 or chunk.get("usage"):
        return None
    choice = choices[0]
    if (not isinstance(choice, dict) or not _CHOICE_FIELDS.issuperset(choice) or choice.get("finish_reason")
            or choice.get("logprobs")):
        return None
    delta = choice.get("delta")
    if not isinstance(delta, dict) or len(delta) != 1:
        return None
    ((name, text),) = delta.items()
    if name in ("role", "tool_calls") or not isinstance(text, str):
        return None
    return choice.get("index", 0), name, text


def _join_chunks(last: dict[str, Any], chunk: dict[str, Any]) -> dict[str, Any] | None:
    before, after = _text_of_chunk(last), _text_of_chunk(chunk)
    if before is None or after is None or before[:2] != after[:2]:
        return None
    if ({k: v for k, v in last.items() if k not in _IGNORED_CHUNK_FIELDS}
            != {k: v for k, v in chunk.items() if k not in _IGNORED_CHUNK_FIELDS}):
        return None
    choice = {**last["choices"][0], "delta": {before[1]: before[2] + after[2]}}
    return {**last, "choices": [choice]}


def _text_of_event(event: dict[str, Any]) -> tuple[Any, str, str, str] | None:
    """(block index, delta type, field, text) of a content_block_delta that carries only text."""
    if event.get("type") != "content_block_delta" or set(event) != {"type", "index", "delta"}:
        return None
    delta = event["delta"]
    name = _EVENT_TEXT.get(delta.get("type")) if isinstance(delta, dict) else None
    if name is None or set(delta) != {"type", name} or not isinstance(delta[name], str):
        return None
    return event["index"], delta["type"], name, delta[name]


def _join_events(last: dict[str, Any], event: dict[str, Any]) -> dict[str, Any] | None:
    before, after = _text_of_event(last), _text_of_event(event)
    if before is None or after is None or before[:3] != after[:3]:
        return None
    index, kind, name, _ = before
    return {"type": "content_block_delta", "index": index, "delta": {"type": kind, name: before[3] + after[3]}}
