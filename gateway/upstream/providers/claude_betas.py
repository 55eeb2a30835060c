"""The Anthropic betas a Claude model on a cloud (AWS Bedrock, Google Vertex AI) is sent, and the body fields only
a beta allows. Each cloud answers 400 to a beta it does not take, where Anthropic's own API takes them all, and
Claude Code talking to the gateway's /v1/messages sends its first-party list: so a beta the cloud does not carry
is dropped rather than failing the call, and with it the body field only that beta allows (`gated`), as Claude
Code does when it calls the cloud itself. Each cloud has its list (bedrock/betas.py, google/betas.py); a server's
`anthropic_betas` (one per line in the admin, a list in the configuration file) replace it when given, so an
operator whose region takes a newer beta adds it without a release; docs/compatibility.md lists them."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping

# the first-party API's name of a beta -> the clouds' (Claude Code and LiteLLM say tool search so there)
RENAMED = {"advanced-tool-use-2025-11-20": "tool-search-tool-2025-10-19"}
# a body field that only a beta allows: left out when that beta is not carried (Claude Code on Bedrock and on
# Vertex AI sends neither context management nor a thinking display)
GATED = {"context_management": "context-management-2025-06-27",
         "thinking.display": "thinking-display-updates-2026-08-18"}


def from_header(headers: Mapping[str, str]) -> list[str]:
    """The values of the client's `anthropic-beta` header (comma-separated), in order."""
    value = next((v for k, v in headers.items() if k.lower() == "anthropic-beta"), "")
    return [part.strip() for part in value.split(",") if part.strip()]


def carried(allowed: Collection[str], asked: Iterable[str],
            header: Collection[str] = ()) -> tuple[list[str], list[str]]:
    """Of `asked`, in order and once each, renamed, those in `allowed`: (the rest, those in `header`)."""
    rest: list[str] = []
    in_header: list[str] = []
    for beta in asked:
        beta = RENAMED.get(beta, beta) if isinstance(beta, str) else None
        kept = in_header if beta in header else rest
        if beta in allowed and beta not in kept:
            kept.append(beta)
    return rest, in_header


def gated(body: dict, carried_betas: Collection[str]) -> dict:
    """`body` without the fields whose beta is not carried."""
    if GATED["context_management"] not in carried_betas:
        body.pop("context_management", None)
    thinking = body.get("thinking")
    if isinstance(thinking, dict) and "display" in thinking and GATED["thinking.display"] not in carried_betas:
        body["thinking"] = {key: value for key, value in thinking.items() if key != "display"}
    return body
