"""Google Vertex AI model servers (kind `vertex`). `base_url` is the location's endpoint,
https://{location}-aiplatform.googleapis.com (https://aiplatform.googleapis.com for `global`), or one the
operator set (Private Service Connect, a proxy); the project and the location are the server's
(`cloud.gcp_project`, `cloud.region`), and the calls carry a Google OAuth access token
(gateway/registry/google_auth.py).

A model published by Anthropic (a `claude-` name, or the model's `publisher` says so) speaks `anthropic`:
`/v1/messages` reaches it as the client sent it (`claude`). Every other model speaks `gemini` (`generate`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from gateway.registry.snapshot import Target
from gateway.upstream.providers.google import claude, generate, transport
from gateway.upstream.providers.google.claude import message_events  # noqa: F401 — Claude's native call
from gateway.upstream.providers.google.embeddings import embeddings  # noqa: F401 — Google's embedding models
from gateway.upstream.providers.google.generate import gemini_events  # noqa: F401 — Gemini's native call


def wire(target: Target) -> str:
    return "anthropic" if transport.publisher(target) == "anthropic" else "gemini"


def chat_stream(target: Target, body: dict[str, Any],
                headers: dict[str, str] | None = None) -> AsyncIterator[dict[str, Any]]:
    if wire(target) == "anthropic":
        return claude.chat_stream(target, body)
    return generate.chat_stream(target, body)
