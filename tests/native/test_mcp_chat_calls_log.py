"""The MCP server's chat tool makes a model call outside a request of the model surfaces: each chat is a call of
the calls log of its own (surface `mcp`, tag tool=chat), answered or refused, as the console's pages count calls
(gateway/console/call_counts.py); the MCP request around it is not one."""


from gateway.models import CallRecord
from tests.faults.services import wait_for
from tests.native.mcp_support import mcp_session, run, world_fixture  # noqa: F401 — the fixture
from tests.servers import wait_for_usage


def mcp_calls(account, count: int, timeout: float = 10.0) -> list[CallRecord]:
    """The account's calls log rows, oldest first, once `count` are written (by the server's drainer)."""
    def written() -> list[CallRecord] | None:
        rows = list(CallRecord.objects.filter(account=account).order_by("created_at"))
        return rows if len(rows) >= count else None

    return wait_for(written, timeout, f"{count} calls written", interval=0.02)


def test_each_chat_of_the_tool_is_a_call_answered_or_refused(world):
    async def scenario():
        async with mcp_session(world.base, world.key) as session:
            await session.initialize()
            await session.list_tools()  # not a model call: no row
            answered = await session.call_tool("chat", {"prompt": "hello there"})
            refused = await session.call_tool("chat", {"model": "oa/secret-1", "prompt": "hi"})
            return answered, refused

    answered, refused = run(scenario())
    assert answered.is_error is False and refused.is_error is True

    [usage] = wait_for_usage(world.account)
    ok, no = mcp_calls(world.account, 2)
    assert (ok.surface, ok.model, ok.status, ok.outcome, ok.tags, ok.group_id) == (
        "mcp", "oa/echo-1", 200, "ok", {"tool": "chat"}, world.group.pk)
    assert (ok.input_tokens, ok.output_tokens, ok.request_id) == (usage.input_tokens, usage.output_tokens,
                                                                  usage.request_id)
    assert usage.tags == {"tool": "chat"}
    assert (no.surface, no.model, no.model_requested, no.status, no.outcome, no.input_tokens) == (
        "mcp", "", "oa/secret-1", 403, "refused", 0)
    assert CallRecord.objects.filter(account=world.account).count() == 2  # the MCP requests are not calls
