"""Gemini API model servers (kind `gemini`). `base_url` is https://generativelanguage.googleapis.com (or a
proxy of it); the server's API key goes in `x-goog-api-key`. Every model speaks `gemini` (`generate`):
a Gemini-format request reaches it as the client sent it, the chat form translated."""

from __future__ import annotations

from typing import Any

from gateway.registry.snapshot import Target
from gateway.upstream.providers.google import generate
from gateway.upstream.providers.google.embeddings import embeddings  # noqa: F401 — Google's embedding models
from gateway.upstream.providers.google.generate import gemini_events  # noqa: F401 — this kind's native call


def wire(target: Target) -> str:
    return "gemini"


def chat_stream(target: Target, body: dict[str, Any], headers: dict[str, str] | None = None):
    """The chat form translated (`headers`, a same-format client's own, are OpenAI's: nothing of them goes on)."""
    return generate.chat_stream(target, body)
