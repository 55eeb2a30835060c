"""One provider interface: `chat_stream(target, body, native)` yields the reply's chunks.

`body` is the call in the neutral form (chat completions). `native` is the client's own request
when its surface speaks a model server's wire format (`/v1/messages`: Anthropic;
`/v1/chat/completions`: OpenAI): a server of that kind gets it as the client sent it, only the
model name replaced (docs/compatibility.md). For an Anthropic server that means its own events
come back (`speaks_natively`); every other case yields chat-completion chunks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from gateway.registry.snapshot import Target
from gateway.upstream.providers import anthropic, anthropic_native, openai
from gateway.upstream.providers.base import UpstreamError, uncarried

_BY_KIND = {"openai": openai, "anthropic": anthropic}


@dataclass(frozen=True)
class Native:
    """The client's request in its surface's own wire format."""

    kind: str  # "openai" or "anthropic": the server kind that speaks it
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)  # beta and version headers, sent on as they came
    query: str = ""  # the request's query string (Claude Code sends ?beta=true)
    uncarried: tuple[str, ...] = ()  # its fields the neutral form could not carry


def speaks_natively(target: Target, native: Native | None) -> bool:
    """Whether the reply comes in the native request's own format rather than as chat chunks."""
    return native is not None and native.kind == "anthropic" and target.server.kind == "anthropic"


def chat_stream(target: Target, body: dict, native: Native | None = None) -> AsyncIterator[dict[str, Any]]:
    kind = target.server.kind
    if native is None:
        return _BY_KIND[kind].chat_stream(target, body)
    if native.kind == kind:
        if kind == "anthropic":
            return anthropic_native.message_events(target, native.body, native.headers, native.query)
        return openai.chat_stream(target, body, headers=native.headers)
    if refusal := uncarried(target.server, native.uncarried):
        return _refused(refusal)
    return _BY_KIND[kind].chat_stream(target, body)


async def _refused(failure: UpstreamError) -> AsyncIterator[dict[str, Any]]:
    raise failure
    yield {}  # an async generator: the refusal is raised where the first chunk is awaited
