"""The MCP server's chat tool under the caller's group's guardrails: a prompt carrying a secret is refused
as the tool's error (its words name the check, never the value) with nothing sent to a model, and a
redacted prompt reaches the model with its values replaced, the reply restored."""

from tests.compat.guard_support import AWS_KEY, BLOCK, CARD, EMAIL, PROMPT, REDACT, assert_redacted, guard
from tests.native.mcp_support import mcp_session, run, world_fixture  # noqa: F401 — the fixture


def chat(world, prompt: str):
    async def scenario():
        async with mcp_session(world.base, world.key) as session:
            await session.initialize()
            return await session.call_tool("chat", {"prompt": prompt})

    return run(scenario())


def test_the_chat_tool_refuses_a_blocked_prompt(world):
    guard(world.group, BLOCK)
    result = chat(world, PROMPT)
    assert result.is_error is True
    text = result.content[0].text
    assert "guardrails" in text and AWS_KEY not in text
    assert [r for r in world.upstream.requests if r.path == "/v1/chat/completions"] == []


def test_the_chat_tool_redacts_and_restores(world):
    guard(world.group, REDACT)
    result = chat(world, PROMPT)
    assert result.is_error is False
    [sent] = [r for r in world.upstream.requests if r.path == "/v1/chat/completions"]
    assert_redacted(sent.body.decode())
    assert EMAIL in result.content[0].text and CARD in result.content[0].text
