"""AWS Bedrock model servers (kind `bedrock`). `base_url` is the region's runtime endpoint,
https://bedrock-runtime.<region>.amazonaws.com, or a VPC endpoint the operator set.

A target speaks `anthropic` when it is a Claude model: its id is Anthropic's (`anthropic.claude-…`), a
cross-region inference profile of one (`us.anthropic.…`, `global.anthropic.…`) or an ARN that names one;
`/v1/messages` then reaches it as the client sent it (`claude`). Every other model speaks Bedrock's own
`converse` (`converse`). Signing, credentials and the event stream: `transport`; the betas: `betas`;
Titan's and Cohere's embeddings: `embeddings`."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

from gateway.registry.snapshot import Target
from gateway.upstream.providers.bedrock import claude, converse
from gateway.upstream.providers.bedrock.claude import message_events  # noqa: F401 — this kind's native call
from gateway.upstream.providers.bedrock.embeddings import embeddings  # noqa: F401 — Titan's and Cohere's

_CLAUDE_ID = re.compile(r"([a-z]{2,}(-[a-z]+)?\.)?anthropic\.", re.IGNORECASE)


def wire(target: Target) -> str:
    name = target.name
    if name.lower().startswith("arn:"):
        return "anthropic" if "anthropic" in name.lower() else "converse"
    return "anthropic" if _CLAUDE_ID.match(name) else "converse"


def chat_stream(target: Target, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    if wire(target) == "anthropic":
        return claude.chat_stream(target, body)
    return converse.converse_stream(target, body)
