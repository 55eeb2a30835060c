"""Pure translations between the gateway's neutral format (the OpenAI Chat Completions wire format
as plain dicts) and the other wire formats it speaks: Anthropic Messages (`anthropic/`), OpenAI Responses
(`responses/`) and AWS Bedrock's Converse (`converse/`). No I/O: each translation is plain dict building,
run per request and per event.

May import: `gateway.web` (the error type and field checks), `gateway.telemetry`, `gateway.state`."""

from __future__ import annotations


class StreamError(Exception):
    """An error event received inside an upstream stream (for instance Anthropic's
    `{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}`)."""

    def __init__(self, type: str, message: str) -> None:  # noqa: A002 - mirrors the wire field
        super().__init__(f"{type}: {message}")
        self.type = type
        self.message = message
