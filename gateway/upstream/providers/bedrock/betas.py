"""The Anthropic betas a Claude model on Bedrock is sent, as Claude Code sends them when it calls Bedrock
itself: in the body's `anthropic_beta`, but for `claude-code-20250219`, which stays in the `anthropic-beta`
header; tool search under Bedrock's name for it. Bedrock answers `invalid beta flag` (a 400) to one it does
not take, so a client's beta that Bedrock does not carry (the first-party API's files, MCP connector, skills,
web search or fetch, code execution, prompt-caching scopes, token counts of thinking) is dropped rather than
failing the call, and with it the body field only that beta allows (`gated`); docs/compatibility.md
("AWS Bedrock") lists both sides.

The server's `bedrock_betas` (one per line in the admin, a list in the configuration file) replace the
list below when given: an operator whose region takes a newer beta adds it without a release."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gateway.registry.snapshot import Server

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
# the first-party API's name of a beta -> Bedrock's (Claude Code and LiteLLM say tool search so there)
RENAMED = {"advanced-tool-use-2025-11-20": "tool-search-tool-2025-10-19"}
# a body field that only a beta allows: left out when that beta is not carried (Claude Code on Bedrock sends
# neither context management nor a thinking display)
GATED = {"context_management": "context-management-2025-06-27",
         "thinking.display": "thinking-display-updates-2026-08-18"}


def from_header(headers: Mapping[str, str]) -> list[str]:
    """The values of the client's `anthropic-beta` header (comma-separated), in order."""
    value = next((v for k, v in headers.items() if k.lower() == "anthropic-beta"), "")
    return [part.strip() for part in value.split(",") if part.strip()]


def carried(server: Server, asked: Iterable[str]) -> tuple[list[str], list[str]]:
    """Of `asked`, in order and once each, the betas `server` sends on: (in the body, in the header)."""
    allowed = set(server.cloud.bedrock_betas or (*DOCUMENTED, *HEADER))
    body: list[str] = []
    header: list[str] = []
    for beta in asked:
        beta = RENAMED.get(beta, beta) if isinstance(beta, str) else None
        kept = header if beta in HEADER else body
        if beta in allowed and beta not in kept:
            kept.append(beta)
    return body, header


def gated(body: dict, carried_betas: list[str]) -> dict:
    """`body` without the fields whose beta is not carried."""
    if GATED["context_management"] not in carried_betas:
        body.pop("context_management", None)
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and "display" in thinking and GATED["thinking.display"] not in carried_betas:
        body["thinking"] = {key: value for key, value in thinking.items() if key != "display"}
    return body
