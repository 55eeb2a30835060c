"""`/api/v1/mcp`: the gateway as an MCP server (Streamable HTTP, JSON-RPC 2.0).

Two halves: the official `mcp` Python client (2.3.0) against a running gateway, calling every
tool with real effects (a model on the reference upstream, a collection with chunks, routines);
then the framing on the wire, request by request (statuses, bodies, headers)."""

from __future__ import annotations

import asyncio
import json
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import Any

import httpx
import httpx2
import mcp_types as types
import pytest
from mcp.client import Client
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from accounts.keys import api_key_revoke
from gateway.embeddings import embedding_model_for
from native.collections import NewDocument, collection_create, document_write
from native.models import Collection
from routines.models import Routine, Run
from tests.contract import assert_limit_headers, assert_native_unauthenticated, assert_no_rate_headers
from tests.factories import (
    AccountFactory,
    AccountGroupFactory,
    ModelFactory,
    ModelServerFactory,
    RoutineFactory,
    api_key_for,
    bearer,
    session_for,
)
from tests.servers import wait_for_quiet_database, wait_for_usage
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture

PATH = "/api/v1/mcp"
TOOLS = {"list_models", "chat", "search_collection", "list_routines", "start_routine"}
ACCEPT = "application/json, text/event-stream"
RawRequest = types.Request[dict[str, Any], str]


def run(coroutine):
    return asyncio.run(coroutine)


@asynccontextmanager
async def mcp_session(base: str, key: str, *, seen: list | None = None):
    """An initialized ClientSession of the official client, authenticated by `key` as a Bearer
    token. `seen` collects (status, content type) of every HTTP response."""

    async def record(response: httpx2.Response) -> None:
        if seen is not None:
            seen.append((response.request.method, response.status_code, response.headers.get("content-type")))

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=httpx2.Timeout(30.0),
                              event_hooks={"response": [record]})
    async with http, streamable_http_client(base + PATH, http_client=http) as (read, write):
        async with ClientSession(read, write) as session:
            yield session


def _routine(account, name: str, **fields) -> Routine:
    return RoutineFactory(account=account, name=name, prompt=f"Say {name}.",
                          webhook_token=f"tok-{name}-{account.pk}", **fields)


@pytest.fixture
def world(transactional_db, live_gateway, upstream):  # noqa: F811
    """An account whose group may use two of three models (`oa/echo-1` the default, and an
    embedding model), with a key; an outsider with a key of their own."""
    group = AccountGroupFactory(name="team", api_access=True, all_models=False)
    account = AccountFactory(group=group, email="dev@example.test")
    outsider = AccountFactory(group=AccountGroupFactory(name="others", api_access=True), email="out@example.test")
    oa = ModelServerFactory(name="oa", kind="openai", base_url=f"{upstream.url}/v1", read_timeout=2.0)
    default = ModelFactory(server=oa, name="echo-1", is_default=True)
    embedder = ModelFactory(server=oa, name="embed-1", supports_chat=False, supports_embeddings=True)
    ModelFactory(server=oa, name="secret-1")  # not granted to the group
    default.groups.add(group)
    embedder.groups.add(group)
    yield SimpleNamespace(base=live_gateway, upstream=upstream, group=group, account=account, key=api_key_for(account),
                          outsider=outsider, outsider_key=api_key_for(outsider))
    wait_for_quiet_database()


# --- The official client ---------------------------------------------------------------------------


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

        http = httpx2.AsyncClient(headers={"X-API-Key": world.key}, event_hooks={"response": [record]})
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


def test_chat_answers_from_the_upstream_and_is_metered_as_mcp(world):
    async def scenario():
        async with mcp_session(world.base, world.key) as session:
            await session.initialize()
            return await session.call_tool("chat", {"prompt": "hello there", "system": "Be brief."})

    result = run(scenario())
    assert result.is_error is False, result.content
    assert result.content[0].text == "Echo: hello there"
    assert result.structured_content["model"] == "oa/echo-1"
    sent = world.upstream.last.json
    assert sent["model"] == "echo-1"
    assert sent["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello there"}]
    record = wait_for_usage(world.account)[0]
    usage = result.structured_content["usage"]
    assert (record.surface, record.model) == ("mcp", "oa/echo-1")
    assert (record.input_tokens, record.output_tokens) == (usage["prompt_tokens"], usage["completion_tokens"])


def test_chat_takes_a_conversation_and_a_named_model(world):
    async def scenario():
        async with mcp_session(world.base, world.key) as session:
            await session.initialize()
            return await session.call_tool("chat", {"model": "oa/echo-1", "messages": [
                {"role": "user", "content": "one"}, {"role": "assistant", "content": "Echo: one"},
                {"role": "user", "content": "two"}]})

    result = run(scenario())
    assert result.content[0].text == "Echo: two"
    assert len(world.upstream.last.json["messages"]) == 3


def test_chat_refusals_are_tool_errors(world):
    """A model the group may not use, a used-up quota, a chain that fails: `isError` results
    saying why, and no upstream call for what the gateway refuses itself."""
    async def call(arguments):
        async with mcp_session(world.base, world.key) as session:
            await session.initialize()
            return await session.call_tool("chat", arguments)

    not_allowed = run(call({"model": "oa/secret-1", "prompt": "hi"}))
    assert not_allowed.is_error is True
    assert not_allowed.content[0].text == "The model 'oa/secret-1' is not allowed for your account group."
    both = run(call({"prompt": "hi", "messages": [{"role": "user", "content": "hi"}]}))
    assert both.is_error is True and "either 'prompt' or 'messages'" in both.content[0].text
    assert world.upstream.requests == []

    world.upstream.configure(fail_status=503)
    failed = run(call({"prompt": "hi"}))
    assert failed.is_error is True
    assert failed.content[0].text.startswith("Every model in the chain is unavailable right now; retry in ")

    world.upstream.configure(fail_status=None)
    world.group.daily_tokens = 0
    world.group.save()
    spent = run(call({"prompt": "hi"}))
    assert spent.is_error is True and spent.content[0].text.startswith("Token quota reached")


def test_chat_with_a_model_or_server_that_does_not_exist_is_a_tool_error_not_the_default(world):
    async def call(model):
        async with mcp_session(world.base, world.key) as session:
            await session.initialize()
            return await session.call_tool("chat", {"model": model, "prompt": "hi"})

    for model in ("no-such-model", "oa/no-such-model", "nosuchserver/echo-1"):
        result = run(call(model))
        assert result.is_error is True
        assert result.content[0].text.startswith(f"The model '{model}' does not exist")
    assert world.upstream.requests == []


def test_a_reply_cut_midway_is_a_tool_error_with_what_arrived_and_is_metered(world):
    world.upstream.configure(reply="alpha beta gamma delta epsilon zeta", cut_after_tokens=2)

    async def scenario():
        async with mcp_session(world.base, world.key) as session:
            await session.initialize()
            return await session.call_tool("chat", {"prompt": "go"})

    result = run(scenario())
    assert result.is_error is True
    text = result.content[0].text
    assert text.startswith("The model server failed mid-reply: ")
    partial = text.split("Partial reply: ", 1)[1]
    assert partial and "alpha beta gamma delta epsilon zeta".startswith(partial)
    record = wait_for_usage(world.account)[0]
    assert record.surface == "mcp" and record.output_tokens > 0


def test_search_collection_finds_passages_of_the_callers_collection_only(world):
    collection = collection_create(account=world.account, name="handbook")
    target = embedding_model_for(account=world.account)
    for name, text in (("pets.txt", "Cats purr and dogs bark at the mailman."),
                       ("space.txt", "Rockets need fuel to reach orbit around the planet.")):
        run(document_write(collection=collection, target=target,
                           document=NewDocument(name=name, content_type="text/plain", size=len(text), text=text)))
    theirs = collection_create(account=world.outsider, name="private")

    async def scenario():
        async with mcp_session(world.base, world.key) as session:
            await session.initialize()
            found = await session.call_tool("search_collection",
                                            {"collection_id": collection.pk, "query": "rockets orbit fuel", "k": 1})
            other = await session.call_tool("search_collection", {"collection_id": theirs.pk, "query": "rockets"})
            return found, other

    found, other = run(scenario())
    assert found.is_error is False, found.content
    hits = found.structured_content["results"]
    assert len(hits) == 1
    assert hits[0]["document_name"] == "space.txt"
    assert "Rockets need fuel" in hits[0]["text"]
    assert other.is_error is True
    assert other.content[0].text == "Collection not found."
    assert Collection.objects.count() == 2


def test_search_collection_takes_k_written_as_a_float(world):
    collection = collection_create(account=world.account, name="handbook")
    target = embedding_model_for(account=world.account)
    for name, text in (("pets.txt", "Cats purr and dogs bark."), ("space.txt", "Rockets need fuel."),
                       ("food.txt", "Bread needs flour.")):
        run(document_write(collection=collection, target=target,
                           document=NewDocument(name=name, content_type="text/plain", size=len(text), text=text)))

    async def scenario():
        async with mcp_session(world.base, world.key) as session:
            await session.initialize()
            return await session.call_tool("search_collection",
                                           {"collection_id": collection.pk, "query": "rockets", "k": 2.0})

    found = run(scenario())
    assert found.is_error is False, found.content
    assert len(found.structured_content["results"]) == 2


def test_list_and_start_routines_of_the_caller(world):
    daily = _routine(world.account, "daily")
    paused = _routine(world.account, "paused", is_enabled=False, disabled_reason="user")
    theirs = _routine(world.outsider, "theirs")

    async def scenario():
        async with mcp_session(world.base, world.key) as session:
            await session.initialize()
            listed = await session.call_tool("list_routines", {})
            started = await session.call_tool("start_routine", {"routine_id": daily.pk})
            refused = await session.call_tool("start_routine", {"routine_id": paused.pk})
            foreign = await session.call_tool("start_routine", {"routine_id": theirs.pk})
            return listed, started, refused, foreign

    listed, started, refused, foreign = run(scenario())
    routines = listed.structured_content["routines"]
    assert [(r["id"], r["name"], r["is_enabled"]) for r in routines] == [
        (daily.pk, "daily", True), (paused.pk, "paused", False)]
    assert [list(r) for r in routines] == [["id", "name", "trigger", "is_enabled", "disabled_reason", "schedule",
                                            "last_run_at", "next_run_at"]] * 2  # the API's fields, these only
    assert (routines[0]["disabled_reason"], routines[1]["disabled_reason"]) == (None, "user")
    assert all("webhook_token" not in r and "webhook_secret" not in r for r in routines)
    assert started.is_error is False
    run_row = Run.objects.get(routine=daily)
    assert run_row.trigger == "manual"
    assert started.structured_content == {"routine_id": daily.pk, "run_id": run_row.pk, "status": "queued",
                                          "trigger": "manual"}
    assert refused.is_error is True
    assert refused.content[0].text == f"Routine {paused.pk} is paused; enable it before starting it."
    assert foreign.is_error is True
    assert foreign.content[0].text == f"Routine {theirs.pk} not found."
    assert not Run.objects.filter(routine__in=[paused, theirs]).exists()


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


# --- The wire, message by message --------------------------------------------------------------------


def test_a_chat_the_client_gives_up_on_is_metered_with_what_arrived(world):
    """Two tokens a second from the model; the client waits 1.5 seconds for the tools/call."""
    world.upstream.configure(reply="alpha beta gamma delta epsilon zeta eta theta", tokens_per_second=2)
    headers = {**bearer(world.key), "Accept": ACCEPT, "X-Request-Id": "mcp-went-away"}
    with httpx.Client(base_url=world.base, headers=headers) as http:
        started = http.post(PATH, json=rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                                          "clientInfo": {"name": "raw", "version": "1"}}, id=0))
        http.headers.update({"Mcp-Session-Id": started.headers["Mcp-Session-Id"],
                             "MCP-Protocol-Version": "2025-11-25"})
        with pytest.raises(httpx.TimeoutException):
            http.post(PATH, json=rpc("tools/call", {"name": "chat", "arguments": {"prompt": "go"}}), timeout=1.5)
    [record] = wait_for_usage(world.account)
    assert record.surface == "mcp" and record.request_id == "mcp-went-away"
    assert 0 < record.output_tokens < 8


def rpc(method: str, params: dict | None = None, id: Any = 1) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    if id is not None:
        message["id"] = id
    return message


class Wire:
    """Posts raw bodies to /api/v1/mcp through Django's test client."""

    def __init__(self, client, key: str) -> None:
        self.client, self.key = client, key
        self.session: str | None = None
        self.version: str | None = None

    def post(self, body: Any, *, raw: bytes | None = None, headers: dict | None = None,
             content_type: str = "application/json"):
        base = {**bearer(self.key), "Accept": ACCEPT}
        if self.session:
            base["Mcp-Session-Id"] = self.session
        if self.version:
            base["MCP-Protocol-Version"] = self.version
        data = raw if raw is not None else json.dumps(body)
        return self.client.post(PATH, data=data, content_type=content_type, headers={**base, **(headers or {})})

    def initialize(self, version: str = "2025-11-25"):
        response = self.post(rpc("initialize", {"protocolVersion": version, "capabilities": {},
                                                "clientInfo": {"name": "raw", "version": "1"}}, id=0))
        self.session = response["Mcp-Session-Id"]
        self.version = response.json()["result"]["protocolVersion"]
        return response


@pytest.fixture
def wire(transactional_db, client, owner):
    return Wire(client, api_key_for(owner))


def error_of(response, status=200):
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert set(body) == {"jsonrpc", "id", "error"}, body
    return body["id"], body["error"]["code"], body["error"]["message"]


def test_initialize_answers_json_with_a_session_id(wire):
    response = wire.initialize()
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"jsonrpc": "2.0", "id": 0, "result": {
        "protocolVersion": "2025-11-25",
        "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": {"name": "model-gateway", "version": "0.1.0"},
        "instructions": response.json()["result"]["instructions"],
    }}
    assert wire.session and all(0x21 <= ord(c) <= 0x7E for c in wire.session)
    assert_limit_headers(response, 300, 299)


def test_initialize_negotiates_the_version(wire):
    assert wire.initialize("2025-03-26").json()["result"]["protocolVersion"] == "2025-03-26"
    assert wire.initialize("2099-01-01").json()["result"]["protocolVersion"] == "2025-11-25"
    missing = wire.post(rpc("initialize", {"capabilities": {}}, id=4))
    assert error_of(missing) == (4, -32602, "Invalid params: 'protocolVersion' must be a string.")


def test_notifications_and_client_responses_get_202_without_a_body(wire):
    wire.initialize()
    for message in (rpc("notifications/initialized", id=None), rpc("notifications/whatever", {"x": 1}, id=None),
                    {"jsonrpc": "2.0", "id": 9, "result": {}}):
        response = wire.post(message)
        assert response.status_code == 202
        assert response.content == b""


def test_ping_and_tools_list(wire):
    wire.initialize()
    assert wire.post(rpc("ping", id="a")).json() == {"jsonrpc": "2.0", "id": "a", "result": {}}
    listed = wire.post(rpc("tools/list", {}, id=2)).json()["result"]["tools"]
    assert [t["name"] for t in listed] == ["list_models", "chat", "search_collection", "list_routines",
                                           "start_routine"]
    assert listed[2]["inputSchema"]["required"] == ["collection_id", "query"]


def test_get_and_delete_are_not_offered(wire):
    wire.initialize()
    for method in ("get", "delete"):
        response = getattr(wire.client, method)(PATH, headers={**bearer(wire.key), "Accept": "text/event-stream",
                                                               "Mcp-Session-Id": wire.session})
        assert response.status_code == 405
        assert response["Allow"] == "POST"
        assert response.json() == {"message": "Method Not Allowed."}


def test_malformed_json_is_a_parse_error_inside_a_200(wire):
    wire.initialize()
    assert error_of(wire.post(None, raw=b'{"jsonrpc": "2.0", "id": 1,')) == (
        None, -32700, "Parse error: the body is not valid JSON.")
    assert error_of(wire.post(None, raw=b"\xff\xfe")) == (None, -32700, "Parse error: the body is not valid JSON.")


def test_messages_that_are_not_json_rpc_are_invalid_requests(wire):
    wire.initialize()
    assert error_of(wire.post(7))[1:] == (-32600, "Invalid Request: expected a JSON-RPC message or a batch of them.")
    assert error_of(wire.post({"jsonrpc": "1.0", "id": 3, "method": "ping"}))[:2] == (3, -32600)
    assert error_of(wire.post({"jsonrpc": "2.0", "id": None, "method": "ping"}))[:2] == (None, -32600)
    assert error_of(wire.post({"jsonrpc": "2.0", "id": True, "method": "ping"}))[:2] == (None, -32600)
    assert error_of(wire.post({"jsonrpc": "2.0", "id": 5}))[:2] == (5, -32600)
    assert error_of(wire.post(rpc("tools/list", id=6) | {"params": [1]}))[:2] == (6, -32602)


def test_unknown_methods_tools_and_bad_arguments(wire):
    wire.initialize()
    assert error_of(wire.post(rpc("resources/list", {}, id=1))) == (1, -32601, "Method not found: resources/list")
    assert error_of(wire.post(rpc("tools/call", {"name": "nope", "arguments": {}}, id=2))) == (
        2, -32602, "Unknown tool: nope")
    assert error_of(wire.post(rpc("tools/call", {"arguments": {}}, id=3)))[:2] == (3, -32602)
    assert error_of(wire.post(rpc("tools/call", {"name": "chat", "arguments": [1]}, id=4)))[:2] == (4, -32602)
    wrong = wire.post(rpc("tools/call", {"name": "search_collection", "arguments": {"query": "x"}}, id=5))
    text = "Invalid arguments for search_collection: 'collection_id' is a required property"
    assert wrong.json() == {"jsonrpc": "2.0", "id": 5,
                            "result": {"isError": True, "content": [{"type": "text", "text": text}]}}


def test_schema_errors_are_protocol_errors_before_2025_11_25(wire):
    wire.initialize("2025-06-18")
    wrong = wire.post(rpc("tools/call", {"name": "start_routine", "arguments": {"routine_id": 0}}, id=1))
    assert error_of(wrong) == (1, -32602, "Invalid params: arguments for start_routine: routine_id: "
                                          "0 is less than the minimum of 1")


def test_server_discover_is_an_unknown_method_even_before_initialize(wire):
    """So the client's probe for the 2026-07-28 protocol falls back to initialize."""
    response = wire.post(rpc("server/discover", {}, id=1), headers={"MCP-Protocol-Version": "2026-07-28"})
    assert error_of(response) == (1, -32601, "Method not found: server/discover")


def test_sessions_are_required_and_belong_to_their_account(wire, outsider):
    assert error_of(wire.post(rpc("tools/list", id=1)), 400) == (
        None, -32600, "Bad Request: missing Mcp-Session-Id header; send initialize first.")
    wire.session = "forged:session:id"
    assert error_of(wire.post(rpc("tools/list", id=1)), 404)[1:] == (
        -32600, "Not Found: unknown or expired session; send initialize again.")
    wire.initialize()
    theirs = Wire(wire.client, api_key_for(outsider))
    theirs.session = wire.session
    assert error_of(theirs.post(rpc("tools/list", id=1)), 404)[1] == -32600
    assert wire.post(rpc("tools/list", id=1)).status_code == 200


def test_sessions_expire(wire, settings):
    wire.initialize()
    settings.MCP_SESSION_MAX_AGE_SECONDS = -1
    assert error_of(wire.post(rpc("ping", id=1)), 404)[1] == -32600


def test_the_protocol_version_header_must_be_the_sessions(wire):
    wire.initialize("2025-06-18")
    wire.version = "2024-01-01"
    _, code, message = error_of(wire.post(rpc("ping", id=1)), 400)
    assert (code, message) == (-32600, "Bad Request: protocol version '2024-01-01' is not supported.")
    wire.version = "2025-11-25"
    assert error_of(wire.post(rpc("ping", id=1)), 400)[2] == (
        "Bad Request: protocol version '2025-11-25' is not the version negotiated for this session.")
    wire.version = None  # no header: the session's version
    assert wire.post(rpc("ping", id=1)).status_code == 200


def test_batches_only_at_2025_03_26(wire):
    wire.initialize("2025-03-26")
    answered = wire.post([rpc("ping", id=1), rpc("notifications/initialized", id=None), rpc("tools/list", id=2),
                          rpc("nope", id=3), rpc("initialize", {"protocolVersion": "2025-03-26"}, id=4), 17])
    assert answered.status_code == 200
    body = answered.json()
    assert [(m["id"], "result" in m, m.get("error", {}).get("code")) for m in body] == [
        (1, True, None), (2, True, None), (3, False, -32601), (4, False, -32600), (None, False, -32600)]
    only_notifications = wire.post([rpc("notifications/initialized", id=None)])
    assert only_notifications.status_code == 202 and only_notifications.content == b""
    assert error_of(wire.post([]))[1:] == (-32600, "Invalid Request: the batch is empty.")
    assert len(wire.post([rpc("ping", id=n) for n in range(20)]).json()) == 20
    assert error_of(wire.post([rpc("ping", id=n) for n in range(21)])) == (
        None, -32600, "Invalid Request: batch too large (at most 20 messages).")

    wire.initialize("2025-06-18")
    assert error_of(wire.post([rpc("ping", id=1)])) == (
        None, -32600, "Invalid Request: protocol version 2025-06-18 has no batches.")


def test_accept_content_type_and_origin(wire):
    wire.initialize()
    assert error_of(wire.post(rpc("ping"), headers={"Accept": ""}), 406)[2] == (
        "Not Acceptable: the client must accept application/json.")
    assert error_of(wire.post(rpc("ping"), headers={"Accept": "text/event-stream"}), 406)[1] == -32600
    assert wire.post(rpc("ping"), headers={"Accept": "*/*"}).status_code == 200
    assert error_of(wire.post(rpc("ping"), content_type="text/plain"), 415)[1] == -32600
    assert error_of(wire.post(rpc("ping"), headers={"Origin": "https://evil.example"}), 403)[2] == (
        "Forbidden: the Origin of this request is not allowed.")
    assert wire.post(rpc("ping"), headers={"Origin": "http://testserver"}).status_code == 200


def test_origins_the_operator_allows(wire, settings):
    settings.MCP_ALLOWED_ORIGINS = ["https://console.example"]
    wire.initialize()
    assert wire.post(rpc("ping"), headers={"Origin": "https://console.example"}).status_code == 200


def test_credentials_like_every_api_v1_endpoint(wire, owner):
    no_key = wire.client.post(PATH, data=json.dumps(rpc("ping")), content_type="application/json",
                              headers={"Accept": ACCEPT})
    assert_native_unauthenticated(no_key)
    wire.key = "svc_usr_1_notarealkeynotarealkeynotareal"
    assert_native_unauthenticated(wire.post(rpc("ping")))
    key = api_key_for(owner)
    via_header = wire.client.post(PATH, data=json.dumps(rpc("initialize", {"protocolVersion": "2025-11-25"})),
                                  content_type="application/json", headers={"Accept": ACCEPT, "X-API-Key": key})
    assert via_header.status_code == 200
    wire.key = session_for(owner)
    assert wire.initialize().status_code == 200


def test_a_session_token_of_a_group_without_api_access_gets_403(wire, owner):
    wire.key = session_for(owner)
    owner.group.api_access = False
    owner.group.save()
    refused = wire.post(rpc("initialize", {"protocolVersion": "2025-11-25"}))
    assert refused.status_code == 403
    assert_no_rate_headers(refused)


def test_the_general_row_of_300_a_minute(wire, settings):
    """The last allowed request and the first refused one; `{codigo, detail}` (spec 8.1, 8.3)."""
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "general": 3}
    wire.initialize()
    wire.post(rpc("notifications/initialized", id=None))
    last = wire.post(rpc("ping"))
    assert last.status_code == 200
    assert_limit_headers(last, 3, 0)
    refused = wire.post(rpc("ping"))
    assert refused.status_code == 429
    assert refused.json()["codigo"] == "limite_de_requisicoes"
    assert refused["Retry-After"]
