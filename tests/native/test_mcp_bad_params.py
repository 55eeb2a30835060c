"""`/api/v1/mcp` answers -32602 (invalid params), never -32603 (internal error), to malformed
params: params or arguments that are not objects, a name that is not a string, arguments of the
wrong types, and values no JSON encoder downstream can write (NaN, Infinity, 1e400, a lone
surrogate, NUL), with the place named."""

from __future__ import annotations

import pytest

from tests.native.test_mcp_server import error_of, rpc, wire  # noqa: F401 — the fixture


def raw_call(wire, text: str, *, id: int = 7):  # noqa: F811, A002
    """A tools/call whose `params` are written as JSON text (what json.dumps never writes)."""
    body = '{"jsonrpc": "2.0", "id": %d, "method": "tools/call", "params": %s}' % (id, text)
    return wire.post(None, raw=body.encode("utf-8", "surrogatepass"))


@pytest.mark.parametrize(("params", "where"), [
    ('{"name": "chat", "arguments": {"prompt": "hi", "temperature": NaN}}', "params.arguments.temperature"),
    ('{"name": "chat", "arguments": {"prompt": "hi", "temperature": Infinity}}', "params.arguments.temperature"),
    ('{"name": "chat", "arguments": {"prompt": "hi", "max_tokens": -Infinity}}', "params.arguments.max_tokens"),
    ('{"name": "search_collection", "arguments": {"collection_id": 1e400, "query": "q"}}',
     "params.arguments.collection_id"),
    ('{"name": "chat", "arguments": {"prompt": "\\ud800"}}', "params.arguments.prompt"),
    ('{"name": "chat", "arguments": {"messages": [{"role": "user", "content": "\\udfff"}]}}',
     "params.arguments.messages.0.content"),
    ('{"name": "search_collection", "arguments": {"collection_id": 1, "query": "a\\u0000b"}}',
     "params.arguments.query"),
    ('{"name": "chat\\ud800", "arguments": {}}', "params.name"),
    ('{"name": "list_models", "arguments": {}, "_meta": {"progressToken": NaN}}', "params._meta.progressToken"),
])
def test_values_no_encoder_can_write_are_invalid_params_naming_the_place(wire, params, where):  # noqa: F811
    wire.initialize()
    message_id, code, message = error_of(raw_call(wire, params))
    assert (message_id, code) == (7, -32602)
    assert message.startswith(f"Invalid params: {where}: ")


@pytest.mark.parametrize("params", ["[1]", '"x"', "5", "true", "NaN"])
def test_params_that_are_not_an_object_are_invalid_params(wire, params):  # noqa: F811
    wire.initialize()
    assert error_of(raw_call(wire, params))[:2] == (7, -32602)


@pytest.mark.parametrize("arguments", ["[1]", '"x"', "5", "false"])
def test_arguments_that_are_not_an_object_are_invalid_params(wire, arguments):  # noqa: F811
    wire.initialize()
    response = raw_call(wire, '{"name": "list_models", "arguments": %s}' % arguments)
    assert error_of(response) == (7, -32602, "Invalid params: 'arguments' must be an object.")


@pytest.mark.parametrize("name", ["5", "null", "[]", "{}", '""'])
def test_a_name_that_is_not_a_string_is_invalid_params(wire, name):  # noqa: F811
    wire.initialize()
    response = raw_call(wire, '{"name": %s, "arguments": {}}' % name)
    assert error_of(response) == (7, -32602, "Invalid params: 'name' must be the name of a tool.")


@pytest.mark.parametrize(("name", "arguments", "where"), [
    ("chat", {"prompt": 5}, "prompt"),
    ("chat", {"prompt": "hi", "temperature": "hot"}, "temperature"),
    ("chat", {"prompt": "hi", "max_tokens": 1.5}, "max_tokens"),
    ("chat", {"messages": "hi"}, "messages"),
    ("chat", {"messages": [{"role": "user", "content": 5}]}, "messages/0/content"),
    ("search_collection", {"collection_id": "1", "query": "q"}, "collection_id"),
    ("search_collection", {"collection_id": 1, "query": ["q"]}, "query"),
    ("search_collection", {"collection_id": 1, "query": "q", "k": "5"}, "k"),
    ("start_routine", {"routine_id": True}, "routine_id"),
    ("list_models", {"extra": 1}, ""),
])
def test_arguments_of_the_wrong_types_are_invalid_params_before_2025_11_25(wire, name, arguments, where):  # noqa: F811
    wire.initialize("2025-06-18")
    message_id, code, message = error_of(wire.post(rpc("tools/call", {"name": name, "arguments": arguments}, id=3)))
    assert (message_id, code) == (3, -32602)
    assert message.startswith(f"Invalid params: arguments for {name}: {where}")


@pytest.mark.parametrize(("name", "arguments"), [
    ("chat", {"prompt": 5}), ("search_collection", {"collection_id": "1", "query": "q"}),
    ("start_routine", {"routine_id": [1]}),
])
def test_arguments_of_the_wrong_types_are_tool_errors_from_2025_11_25(wire, name, arguments):  # noqa: F811
    """SEP-1303: the model reads the error and corrects its call. Never -32603."""
    wire.initialize()
    body = wire.post(rpc("tools/call", {"name": name, "arguments": arguments}, id=4)).json()
    assert body["id"] == 4 and "error" not in body
    assert body["result"]["isError"] is True
    assert body["result"]["content"][0]["text"].startswith(f"Invalid arguments for {name}: ")


def test_a_batch_answers_each_bad_message_with_its_own_id(wire):  # noqa: F811
    wire.initialize("2025-03-26")
    batch = ('[{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": NaN}},'
             ' {"jsonrpc": "2.0", "id": 2, "method": "ping"},'
             ' {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": [1]}]')
    answers = wire.post(None, raw=batch.encode()).json()
    assert [(a["id"], a.get("error", {}).get("code")) for a in answers] == [(1, -32602), (2, None), (3, -32602)]


def test_initialize_with_a_non_finite_value_is_invalid_params(wire):  # noqa: F811
    body = b'{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25", ' \
           b'"capabilities": {"x": Infinity}, "clientInfo": {"name": "raw", "version": "1"}}}'
    assert error_of(wire.post(None, raw=body))[:2] == (0, -32602)
