"""Server-Sent Events: reading a model server's stream and writing ours."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def sse_data(payload: Any) -> bytes:
    """One `data:` frame (the OpenAI style: no event name)."""
    return b"data: " + _dumps(payload).encode() + b"\n\n"


def sse_event(event: str, payload: Any) -> bytes:
    """One named frame (the Anthropic style: `event:` matches the data's type)."""
    return b"event: " + event.encode() + b"\ndata: " + _dumps(payload).encode() + b"\n\n"


SSE_DONE = b"data: [DONE]\n\n"


async def sse_read(pieces: AsyncIterator[bytes]) -> AsyncIterator[tuple[str | None, str]]:
    """(event name or None, data) for each event of a stream of raw bytes, split on the blank
    line that ends an event. Works on bytes: cheaper than decoding line by line."""
    buffer = b""
    async for piece in pieces:
        buffer += piece
        if b"\r" in buffer:  # CRLF line ends, possibly split across pieces
            buffer = buffer.replace(b"\r\n", b"\n")
        start = 0
        while (end := buffer.find(b"\n\n", start)) != -1:
            event = _frame(buffer[start:end])
            if event is not None:
                yield event
            start = end + 2
        buffer = buffer[start:]
    if buffer.strip():
        event = _frame(buffer)
        if event is not None:
            yield event


def _frame(raw: bytes) -> tuple[str | None, str] | None:
    if raw.startswith(b"data: ") and b"\n" not in raw:  # the common case: one data line
        return None, raw[6:].decode()
    name: str | None = None
    data: list[str] = []
    for line in raw.split(b"\n"):
        if line.startswith(b"data:"):
            data.append(line[6:].decode() if line.startswith(b"data: ") else line[5:].decode())
        elif line.startswith(b"event:"):
            name = line[6:].strip().decode()
        # comments (":") and other fields (id:, retry:) are ignored
    return (name, "\n".join(data)) if data else None
