"""`/api/v1/mcp` through the official `mcp` Python client (2.3.0) against a running gateway: the
handshake and the tool list, the models a group may use, protocol errors as JSON-RPC errors, and
keys that are wrong or revoked mid-session. The tools at work: test_mcp_tools.py; the framing on
the wire: test_mcp_server.py."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from accounts.keys import api_key_revoke
from tests.native.mcp_support import PATH, mcp_session, run, world_fixture  # noqa: F401 — the fixture

TOOLS = {"list_models", "chat", "search_collection", "list_routines", "start_routine"}
RawRequest = types.Request[dict[str, Any], str]


def test_it_initializes_and_lists_the_tools(world):
    async def scenario():
        async with mcp_session(world.base, world.key) as session:
            init = await session.initialize()
            tools = await session.list_tools()
            pong = await session.send_ping()
            return init, tools, pong

    init, tools, pong = run(scenario())
    assert init.protocol_version == "2025-11-25"
    assert init.server_info.name == "model-gateway"
    assert init.capabilities.tools is not None
    assert {t.name for t in tools.tools} == TOOLS
    for tool in tools.tools:
        assert tool.input_schema["type"] == "object"
        assert tool.description
    assert pong is not None


def test_the_high_level_client_probes_for_2026_then_falls_back_to_initialize(world):
    seen = []

    async def scenario():
        async def record(response: httpx2.Response) -> None:
            if response.request.method == "POST":
                seen.append(json.loads(response.request.content).get("method"))

        http = httpx2.AsyncClient(headers={"X-API-Key": world.key}, event_hooks={"response": [record]},
                                  timeout=httpx2.Timeout(30.0))  # httpx's 5 s is short on a busy 2-core machine
        async with http, Client(streamable_http_client(world.base + PATH, http_client=http)) as client:
            return client.session.protocol_version, await client.call_tool("list_routines", {})

    version, result = run(scenario())
    assert version == "2025-11-25"
    assert result.structured_content == {"routines": []}
    assert seen[:3] == ["server/discover", "initialize", "notifications/initialized"]


def test_list_models_shows_the_models_of_the_callers_group_only(world):
    async def scenario():
        async with mcp_session(world.base, world.key) as session:
            await session.initialize()
            return await session.call_tool("list_models", {})

    result = run(scenario())
    assert result.is_error is False
    models = result.structured_content["models"]
    assert [(m["id"], m["default"]) for m in models] == [("oa/echo-1", True), ("oa/embed-1", False)]
    assert models[1]["capabilities"] == ["embeddings"]
    assert json.loads(result.content[0].text) == result.structured_content


def test_protocol_errors_reach_the_client_as_json_rpc_errors(world):
    async def scenario():
        errors = {}
        async with mcp_session(world.base, world.key) as session:
            await session.initialize()
            for label, request in (
                ("unknown method", RawRequest(method="resources/list", params={})),
                ("unknown tool", RawRequest(method="tools/call", params={"name": "rm_rf", "arguments": {}})),
                ("arguments not an object",
                 RawRequest(method="tools/call", params={"name": "chat", "arguments": "hi"})),
            ):
                with pytest.raises(MCPError) as caught:
                    await session.send_request(request, types.CallToolResult)
                errors[label] = (caught.value.code, caught.value.message)
            schema = await session.call_tool("start_routine", {"routine_id": "seven"})
            still = await session.call_tool("list_routines", {})
        return errors, schema, still

    errors, schema, still = run(scenario())
    assert errors == {
        "unknown method": (-32601, "Method not found: resources/list"),
        "unknown tool": (-32602, "Unknown tool: rm_rf"),
        "arguments not an object": (-32602, "Invalid params: 'arguments' must be an object."),
    }
    # At 2025-11-25 arguments against the tool's schema are a tool error the model can read (SEP-1303).
    assert schema.is_error is True
    assert schema.content[0].text == "Invalid arguments for start_routine: routine_id: 'seven' is not of type 'integer'"
    assert still.is_error is False  # the session goes on


def test_a_bad_key_fails_the_clients_initialize(world):
    """The answer is the /api/v1 refusal of spec 5.3 (401 `{message: 'Unauthenticated.'}`); the
    client raises MCPError -32603 from its initialize, and its HTTP layer sees the 401."""
    seen = []

    async def scenario():
        async with mcp_session(world.base, "svc_usr_1_wrongwrongwrongwrongwrongwrongwr", seen=seen) as session:
            with pytest.raises(MCPError) as caught:
                await session.initialize()
            return caught

    caught = run(scenario())
    assert caught.value.code == -32603
    assert caught.value.message == "Server returned an error response"
    assert seen == [("POST", 401, "application/json")]


def test_a_revoked_key_mid_session_fails_the_next_call(world):
    async def scenario():
        async with mcp_session(world.base, world.key) as session:
            await session.initialize()
            first = await session.call_tool("list_routines", {})
            await asyncio.to_thread(api_key_revoke, account=world.account)
            with pytest.raises(MCPError) as caught:
                await session.call_tool("list_routines", {})
            return first, caught.value

    first, error = run(scenario())
    assert first.is_error is False
    assert error.code == -32603
