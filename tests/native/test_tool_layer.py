"""The one tool layer (native/tools/): one registry, one schema per tool, one argument check and
one way to run a tool, whether agent chat and run or the MCP server endpoint calls it."""

import asyncio

import pytest

from gateway.web.errors import ApiError
from native.tools import builtin
from native.tools.mcp_client import McpEndpoint, McpTool
from native.tools.remote import remote_tool, remote_tool_name
from native.tools.tool import Caller, Tool, ToolError, ToolResult, argument_problem, run_tool

CALLER = Caller(account=None, request_id="req-1")
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 1}}, "required": ["n"],
          "additionalProperties": False}


def _recording_tool(answer=None, schema=SCHEMA):
    seen = []

    async def run(caller, arguments):
        seen.append((caller, arguments))
        if isinstance(answer, Exception):
            raise answer
        return answer or ToolResult(f"n is {arguments['n']}")

    return Tool("count", "Count.", schema, run), seen


def test_the_agent_offers_the_mcp_endpoints_own_tools():
    """The agent's built-in tools are entries of the MCP endpoint's registry: same name, text
    and schema, in the OpenAI function form."""
    listed = {entry["name"]: entry for entry in builtin.listing()}
    offered = [tool.spec() for tool in builtin.agent_tools(list(builtin.AGENT_TOOLS))]
    assert [spec["function"]["name"] for spec in offered] == ["search_collection", "start_routine"]
    for spec in offered:
        entry = listed[spec["function"]["name"]]
        assert spec["function"]["parameters"] == entry["inputSchema"]
        assert spec["function"]["description"] == entry["description"]
    assert builtin.agent_tools(["chat", "list_models", "nope"]) == []


def test_arguments_are_checked_against_the_schema_before_the_tool_runs():
    tool, seen = _recording_tool()
    result = asyncio.run(run_tool(tool, CALLER, {"n": 0}))
    assert result == ToolResult("Invalid arguments for count: n: 0 is less than the minimum of 1", is_error=True)
    assert seen == []
    assert asyncio.run(run_tool(tool, CALLER, {"n": 2})) == ToolResult("n is 2")
    assert seen == [(CALLER, {"n": 2})]


@pytest.mark.parametrize("arguments, problem", [
    ({}, "'n' is a required property"),
    ({"n": "2"}, "n: '2' is not of type 'integer'"),
    ({"n": 2, "m": 1}, "Additional properties are not allowed ('m' was unexpected)"),
    ({"n": 2}, None),
])
def test_argument_problem_names_where(arguments, problem):
    tool, _seen = _recording_tool()
    assert argument_problem(tool, arguments) == problem


def test_a_schema_that_is_not_json_schema_is_left_to_the_tools_server():
    tool, seen = _recording_tool(schema={"type": "object", "properties": {"n": {"type": 5}}})
    assert argument_problem(tool, {"n": "x"}) is None
    assert asyncio.run(run_tool(tool, CALLER, {"n": "x"})).text == "n is x"
    assert len(seen) == 1


@pytest.mark.parametrize("refusal, text", [
    (ToolError("Collection 3 is busy."), "Collection 3 is busy."),
    (ApiError(404, "Collection not found."), "Collection not found."),
])
def test_a_refusal_is_an_error_result(refusal, text):
    tool, _seen = _recording_tool(answer=refusal)
    result = asyncio.run(run_tool(tool, CALLER, {"n": 1}))
    assert result == ToolResult(text, is_error=True)
    assert result.as_mcp() == {"content": [{"type": "text", "text": text}], "isError": True}


def test_a_data_result_carries_its_json_as_text_too():
    result = ToolResult.data({"routine_id": 3, "status": "queued"})
    assert result.as_mcp() == {"content": [{"type": "text", "text": '{"routine_id": 3, "status": "queued"}'}],
                               "isError": False, "structuredContent": {"routine_id": 3, "status": "queued"}}


def test_an_mcp_servers_tool_is_a_tool_like_the_others(closed_port):
    endpoint = McpEndpoint(name="my calc", url=f"http://127.0.0.1:{closed_port}/mcp", timeout=2.0)
    tool = remote_tool(endpoint, McpTool(name="add.two", description="", input_schema=SCHEMA))
    assert tool.name == remote_tool_name("my calc", "add.two") == "my_calc__add_two"
    assert tool.description == "add.two" and tool.input_schema == SCHEMA
    # the one argument check runs before any connection is made to the (closed) port
    assert asyncio.run(run_tool(tool, CALLER, {})).text == "Invalid arguments for my_calc__add_two: " \
                                                           "'n' is a required property"
    unreachable = asyncio.run(run_tool(tool, CALLER, {"n": 1}))
    assert unreachable.is_error and "my calc" in unreachable.text


def test_a_time_bound_reached_during_an_mcp_call_is_not_a_tool_error():
    """Cancelled while it connects or closes, the `mcp` client turns the cancellation of its task
    into a transport error (about 1 in 15 at random moments). The agent's time bound (or a client
    gone) must still cancel the request, not become a tool failure while the loop goes on."""
    from native.tools.mcp_client import McpUnavailable, call_tool
    from tests.native.agent_support import TOKEN, TOKEN_HEADER, LoopbackMcp

    mcp = LoopbackMcp(slow_tool=True).start()
    endpoint = McpEndpoint(name="calc", url=mcp.url, timeout=10.0, headers={TOKEN_HEADER: TOKEN})

    async def bounded(seconds: float, tool: str, arguments: dict) -> str:
        try:
            async with asyncio.timeout(seconds):
                return (await call_tool(endpoint, tool, arguments)).text
        except TimeoutError:
            return "timed out"

    try:
        assert asyncio.run(bounded(0.5, "slow", {"seconds": 3})) == "timed out"
        outcomes = {asyncio.run(bounded(0.001 * (1 + i % 40), "add", {"a": 1, "b": 2})) for i in range(120)}
        assert outcomes <= {"timed out", "3"} and "timed out" in outcomes
        with pytest.raises(McpUnavailable):  # a real failure still is one
            asyncio.run(call_tool(McpEndpoint(name="calc", url=mcp.url, timeout=10.0), "add", {"a": 1, "b": 2}))
    finally:
        mcp.stop()
