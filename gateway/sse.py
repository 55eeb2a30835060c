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


async def sse_read(lines: AsyncIterator[str]) -> AsyncIterator[tuple[str | None, str]]:
    """(event name or None, data) for each event of a stream of lines."""
    event: str | None = None
    data: list[str] = []
    async for line in lines:
        if not line:
            if data:
                yield event, "\n".join(data)
            event, data = None, []
        elif line.startswith("data:"):
            data.append(line[6:] if line.startswith("data: ") else line[5:])
        elif line.startswith("event:"):
            event = line[6:].strip()
        # comments (":") and other fields (id:, retry:) are ignored
    if data:
        yield event, "\n".join(data)
