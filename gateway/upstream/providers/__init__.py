"""One provider interface per kind of model server, chosen by the server's `kind`.

Every kind's module has:
- `wire(target)`: the wire format the target speaks, `openai`, `anthropic` or one of its own
  (Bedrock's `converse`): a client request in that format goes to it as sent (`Native`);
- `chat_stream(target, body, headers=None)`: the reply's chat-completion chunks for `body`, the call
  in the neutral (chat completions) form; `headers`, the client's own, when it spoke `openai` to an
  `openai`-wire target;
- `message_events(target, body, headers, query)`, for a kind whose targets may speak `anthropic`: the
  client's Messages request as it came, the server's own Messages events back;
- `gemini_events(target, body)`, for a kind whose targets may speak `gemini`: the client's
  generateContent request as it came, the server's own GenerateContentResponse chunks back;
and may have `embeddings(target, texts)` (an OpenAI-shaped embeddings body) and
`forward(target, path, ...)` (a plain OpenAI-style request: audio).

`native` is the client's own request when its surface speaks a wire format (`/v1/messages`:
Anthropic; `/v1/chat/completions`: OpenAI): a target that speaks it gets it as the client sent it, only
the model name replaced (docs/compatibility.md). For an `anthropic` or `gemini` wire that means its own
events come back (`speaks_natively`); every other case yields chat-completion chunks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from gateway.registry.snapshot import Server, Target
from gateway.upstream.providers import anthropic, azure, bedrock, openai
from gateway.upstream.providers.base import BAD_RESPONSE, REFUSED, UpstreamError, uncarried
from gateway.upstream.providers.google import gemini, vertex

_BY_KIND: dict[str, ModuleType] = {"openai": openai, "anthropic": anthropic, "bedrock": bedrock, "azure": azure,
                                   "vertex": vertex, "gemini": gemini}
# The wire formats whose replies come back in their own events, not as chat chunks.
EVENT_WIRES = frozenset({"anthropic", "gemini"})


@dataclass(frozen=True)
class Native:
    """The client's request in its surface's own wire format."""

    kind: str  # "openai", "anthropic" or "gemini": the wire format it is in
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)  # beta and version headers, sent on as they came
    query: str = ""  # the request's query string (Claude Code sends ?beta=true)
    uncarried: tuple[str, ...] = ()  # its fields the neutral form could not carry


def provider(server: Server) -> ModuleType:
    return _BY_KIND[server.kind]


def wire(target: Target) -> str:
    return provider(target.server).wire(target)


def speaks_natively(target: Target, native: Native | None) -> bool:
    """Whether the reply comes in the native request's own format rather than as chat chunks."""
    return native is not None and native.kind in EVENT_WIRES and wire(target) == native.kind


def chat_stream(target: Target, body: dict, native: Native | None = None) -> AsyncIterator[dict[str, Any]]:
    module = provider(target.server)
    if native is None:
        return module.chat_stream(target, body)
    if native.kind == module.wire(target):
        if native.kind == "anthropic":
            return module.message_events(target, native.body, native.headers, native.query)
        if native.kind == "gemini":
            return module.gemini_events(target, native.body)
        return module.chat_stream(target, body, headers=native.headers)
    if refusal := uncarried(target.server, native.uncarried):
        return _refused(refusal)
    return module.chat_stream(target, body)


async def embeddings(target: Target, texts: list[str]) -> Any:
    """The target's embeddings of `texts`, as an OpenAI embeddings reply body (parsed JSON, checked by the
    caller), or UpstreamError."""
    module = provider(target.server)
    if not hasattr(module, "embeddings"):
        raise UpstreamError(BAD_RESPONSE, 502, f"Server '{target.server.name}' does not serve embeddings.")
    return await module.embeddings(target, texts)


async def forward(target: Target, path: str, **payload: Any):
    """A plain OpenAI-style request (audio) to a kind that takes one; a refusal for the others."""
    module = provider(target.server)
    if not hasattr(module, "forward"):
        raise UpstreamError(REFUSED, 400, f"Server '{target.server.name}' does not serve audio.")
    return await module.forward(target, path, **payload)


async def _refused(failure: UpstreamError) -> AsyncIterator[dict[str, Any]]:
    raise failure
    yield {}  # an async generator: the refusal is raised where the first chunk is awaited
