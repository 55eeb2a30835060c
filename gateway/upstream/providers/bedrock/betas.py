"""The Anthropic betas a Claude model on Bedrock is sent, as Claude Code sends them when it calls Bedrock
itself: in the body's `anthropic_beta`, but for `claude-code-20250219`, which stays in the `anthropic-beta`
header; tool search under Bedrock's name for it. Bedrock answers `invalid beta flag` (a 400) to one it does
not take, so a client's beta that Bedrock does not carry (the first-party API's files, MCP connector, skills,
web search or fetch, code execution, prompt-caching scopes, token counts of thinking) is dropped, and with it
the body field only that beta allows (gateway/upstream/providers/claude_betas.py, shared with Vertex AI);
docs/compatibility.md ("AWS Bedrock") lists both sides. The server's `anthropic_betas` replace the list below
when given."""

from __future__ import annotations

from collections.abc import Iterable

from gateway.registry.snapshot import Server
from gateway.upstream.providers import claude_betas

# The betas Bedrock documents for Claude models (its Anthropic Claude Messages API reference and the
# model pages), and those that AWS's SDK users and Claude Code send to Bedrock's runtime
DOCUMENTED = (
    "computer-use-2024-10-22",
    "computer-use-2025-01-24",
    "computer-use-2025-11-24",
    "token-efficient-tools-2025-02-19",
    "interleaved-thinking-2025-05-14",
    "output-128k-2025-02-19",
    "dev-full-thinking-2025-05-14",
    "context-1m-2025-08-07",
    "fine-grained-tool-streaming-2025-05-14",
    "effort-2025-11-24",
    "tool-search-tool-2025-10-19",
    "tool-examples-2025-10-29",
    "compact-2026-01-12",
    "mid-conversation-output-config-2026-07-01",
    "mid-conversation-tool-changes-2026-07-01",
    "thinking-binding-controls-2026-08-01",
    "thinking-display-updates-2026-08-18",
)


# in the header, not the body (Claude Code on Bedrock); like every other, only when the client asked for it
HEADER = ("claude-code-20250219",)


def carried(server: Server, asked: Iterable[str]) -> tuple[list[str], list[str]]:
    """Of `asked`, in order and once each, the betas `server` sends on: (in the body, in the header)."""
    return claude_betas.carried(set(server.cloud.anthropic_betas or (*DOCUMENTED, *HEADER)), asked, HEADER)
