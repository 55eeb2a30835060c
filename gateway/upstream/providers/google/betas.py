"""The Anthropic betas a Claude model on Vertex AI is sent, in the `anthropic-beta` header, as Claude Code sends
them when it calls Vertex AI itself. Vertex AI answers 400 ("Unexpected value(s) … for the `anthropic-beta`
header") to one it does not take, so a client's beta that Vertex AI does not carry (the first-party API's
context management, structured outputs, files, MCP connector, skills, code execution, prompt-caching scopes,
token counts of thinking) is dropped, with the body field only that beta allows (gateway/upstream/providers/
claude_betas.py, shared with Bedrock); docs/compatibility.md ("Claude on Vertex AI") lists both sides. The
server's `anthropic_betas` replace the list below when given.

A web search tool in the body needs its beta on Vertex AI, where Anthropic's API takes the tool without one:
Claude Code talking to the gateway does not send it, so the gateway adds it (Claude Code on Vertex AI sends it
on every call)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.registry.snapshot import Server
from gateway.upstream.providers import claude_betas

# Those Claude Code 2.1 sends Vertex AI itself (its list for the clouds, less those it keeps to Anthropic's API
# for Vertex AI: context management, structured outputs, and thinking token counts up to Claude Opus 4.7, an
# operator's list adding it for later models), and those Google documents for Claude on Vertex AI (computer
# use, web search, tool search, the 1M context window)
CARRIED = (
    "claude-code-20250219",
    "interleaved-thinking-2025-05-14",
    "context-1m-2025-08-07",
    "web-search-2025-03-05",
    "tool-search-tool-2025-10-19",
    "effort-2025-11-24",
    "computer-use-2024-10-22",
    "computer-use-2025-01-24",
    "computer-use-2025-11-24",
    "afk-mode-2026-01-31",
    "dangerous-tool-use-2026-09-03",
    "fallback-credit-2026-06-01",
    "thinking-binding-controls-2026-08-01",
    "thinking-display-updates-2026-08-18",
)
# a server tool (its type) -> the beta Vertex AI needs for it, where Anthropic's API needs none
TOOL_BETAS = {"web_search_20250305": "web-search-2025-03-05"}


def carried(server: Server, body: Mapping[str, Any], headers: Mapping[str, str]) -> list[str]:
    """The betas `server` sends with `body`: the client's, in order and once each, that it carries, then those the
    body's tools need."""
    tools = body.get("tools") if isinstance(body.get("tools"), list) else []
    needed = [TOOL_BETAS[tool["type"]] for tool in tools
              if isinstance(tool, dict) and isinstance(tool.get("type"), str) and tool["type"] in TOOL_BETAS]
    allowed = set(server.cloud.anthropic_betas or CARRIED)
    return claude_betas.carried(allowed, [*claude_betas.from_header(headers), *needed])[0]
