"""The betas a Claude model on Vertex AI is sent, as Claude Code sends Vertex AI its own: a client's first-party
betas that Vertex AI refuses are dropped with the body fields only they allow, tool search goes under Vertex
AI's name for it, a web search tool brings its beta, and a server's own list replaces the default."""

from __future__ import annotations

from gateway.upstream.providers.google import vertex
from tests.gateway.upstream.google.support import collect, fake_google, key_file, vertex_target  # noqa: F401

MESSAGES = [{"role": "user", "content": "one two"}]
BODY = {"model": "gcp/x", "max_tokens": 50, "messages": MESSAGES, "stream": True}
SENT = {"max_tokens": 50, "messages": MESSAGES, "stream": True, "anthropic_version": "vertex-2023-10-16"}
# what Claude Code 2.1.332 sends Anthropic's API for Claude Sonnet 4.5
FIRST_PARTY = ("claude-code-20250219,interleaved-thinking-2025-05-14,context-management-2025-06-27,"
               "thinking-token-count-2026-05-13,advanced-tool-use-2025-11-20")
WEB_SEARCH_TOOL = {"type": "web_search_20250305", "name": "web_search", "max_uses": 5}


def sent(fake, key, body, headers, **cloud):
    events, error = collect(lambda: vertex.message_events(vertex_target(fake, key, **cloud), body, headers, ""))
    assert error is None and events[-1]["type"] == "message_stop"
    return fake.calls()[-1]


def test_claude_code_s_first_party_betas_reach_vertex_as_claude_code_sends_vertex_its_own(fake_google, key_file):  # noqa: F811
    body = {**BODY, "thinking": {"type": "enabled", "budget_tokens": 1024, "display": "omitted"},
            "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]}}
    call = sent(fake_google, key_file, body, {"anthropic-beta": FIRST_PARTY})
    assert call.headers["anthropic-beta"] == (
        "claude-code-20250219,interleaved-thinking-2025-05-14,tool-search-tool-2025-10-19")
    assert call.json == {**SENT, "thinking": {"type": "enabled", "budget_tokens": 1024}}


def test_a_web_search_tool_brings_the_beta_vertex_needs_for_it(fake_google, key_file):  # noqa: F811
    call = sent(fake_google, key_file, {**BODY, "tools": [WEB_SEARCH_TOOL]},
                {"anthropic-beta": "claude-code-20250219"})
    assert call.headers["anthropic-beta"] == "claude-code-20250219,web-search-2025-03-05"
    assert call.json == {**SENT, "tools": [WEB_SEARCH_TOOL]}
    call = sent(fake_google, key_file, {**BODY, "tools": [WEB_SEARCH_TOOL]},
                {"anthropic-beta": "web-search-2025-03-05"})
    assert call.headers["anthropic-beta"] == "web-search-2025-03-05"  # once


def test_the_server_s_own_list_replaces_the_default(fake_google, key_file):  # noqa: F811
    carried = ("context-management-2025-06-27", "thinking-display-updates-2026-08-18")
    body = {**BODY, "thinking": {"type": "enabled", "budget_tokens": 1024, "display": "omitted"},
            "context_management": {"edits": []}, "tools": [WEB_SEARCH_TOOL]}
    call = sent(fake_google, key_file, body, {"anthropic-beta": f"{FIRST_PARTY},thinking-display-updates-2026-08-18"},
                anthropic_betas=carried)
    assert call.headers["anthropic-beta"] == ",".join(carried)  # neither Claude Code's nor web search's
    assert call.json == {**SENT, "thinking": body["thinking"], "context_management": {"edits": []},
                         "tools": [WEB_SEARCH_TOOL]}
    call = sent(fake_google, key_file, BODY, {"anthropic-beta": "files-api-2025-04-14"}, anthropic_betas=carried)
    assert "anthropic-beta" not in call.headers  # none carried: no empty header either
