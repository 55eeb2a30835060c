"""`/api/v1/mcp`: the gateway as an MCP server (Streamable HTTP, JSON-RPC 2.0), the framing on
the wire, request by request through Django's test client (statuses, bodies, headers): sessions,
protocol versions, batches, Accept/Content-Type/Origin, credentials and the rate limit. The
official client against a running gateway: test_mcp_client.py and test_mcp_tools.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.contract import assert_limit_headers, assert_native_unauthenticated, assert_no_rate_headers
from tests.factories import api_key_for, bearer, session_for
from tests.native.mcp_support import ACCEPT, PATH, rpc


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
