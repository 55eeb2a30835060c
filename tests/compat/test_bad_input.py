"""Bad input on the /v1 surfaces gets a clear 4xx in the surface's shape, never a 500:
non-finite numbers and lone surrogates refused at the edge, every field the API types
checked for its type, and a model server's malformed reply answered 502 (or the stream's own
failure signal once a stream has begun)."""

from __future__ import annotations

import json

import httpx
import pytest

CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"
RESPONSES = "/v1/responses"
COUNT = "/v1/messages/count_tokens"
INPUT_TOKENS = "/v1/responses/input_tokens"

# A valid body per route, written as JSON text so a test can splice in what `json.dumps` never writes.
BODIES = {
    CHAT: '{"model": "oa/echo-1", "messages": [{"role": "user", "content": %s}], "temperature": %s}',
    MESSAGES: '{"model": "oa/echo-1", "max_tokens": 50, "messages": [{"role": "user", "content": %s}], '
              '"temperature": %s}',
    RESPONSES: '{"model": "oa/echo-1", "input": %s, "temperature": %s}',
    COUNT: '{"model": "oa/echo-1", "messages": [{"role": "user", "content": %s}], "temperature": %s}',
    INPUT_TOKENS: '{"model": "oa/echo-1", "input": %s, "temperature": %s}',
}
TEXT_PARAM = {CHAT: "messages[0].content", MESSAGES: "messages.0.content", RESPONSES: "input",
              COUNT: "messages.0.content", INPUT_TOKENS: "input"}


def post(world, path: str, content: str | bytes, **headers) -> httpx.Response:
    return httpx.post(world.base + path, content=content, timeout=30,
                      headers={"Authorization": f"Bearer {world.key}", "Content-Type": "application/json", **headers})


def assert_openai_error(response: httpx.Response, status: int, param: str | None) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["param"] == param
    assert param is None or param in error["message"]
    return error


def assert_anthropic_error(response: httpx.Response, status: int, field: str, kind: str = "invalid_request_error"):
    assert response.status_code == status, response.text
    body = response.json()
    assert body["type"] == "error" and set(body["error"]) == {"type", "message"}
    assert body["error"]["type"] == kind
    assert field in body["error"]["message"]
    return body["error"]


def assert_refused(world, path: str, response: httpx.Response, field: str) -> None:
    if path.startswith(MESSAGES):
        assert_anthropic_error(response, 400, field)
    else:
        error = assert_openai_error(response, 400, field)
        assert error["type"] == "invalid_request_error"
    assert world.upstream.requests == []  # refused at the edge: nothing went upstream


# ---- 1. NaN, Infinity, -Infinity and 1e400 -------------------------------------------------------


@pytest.mark.parametrize("path", list(BODIES))
@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400", "-1e400"])
def test_non_finite_numbers_are_refused_at_the_edge_with_the_field_named(world, path, number):
    response = post(world, path, BODIES[path] % ('"hi"', number))
    assert_refused(world, path, response, "temperature")
    assert "finite number" in response.text


# ---- 2. lone surrogates --------------------------------------------------------------------------


@pytest.mark.parametrize("path", list(BODIES))
@pytest.mark.parametrize("text", [r'"\ud800"', r'"ok \udfff then"', r'"\ude00\ud83d"'])
def test_lone_surrogates_in_message_text_are_refused_at_the_edge(world, path, text):
    response = post(world, path, BODIES[path] % (text, "0.5"))
    assert_refused(world, path, response, TEXT_PARAM[path])
    assert "lone surrogate" in response.text


def test_a_lone_surrogate_in_a_key_or_a_tool_schema_is_refused(world):
    tools = r'[{"type": "function", "function": {"name": "f", "parameters": {"\udc00": 1}}}]'
    response = post(world, CHAT, '{"model": "oa/echo-1", "messages": [{"role": "user", "content": "x"}], '
                                 f'"tools": {tools}}}')
    assert_refused(world, CHAT, response, r"tools[0].function.parameters.\udc00")


def test_a_surrogate_pair_written_as_escapes_is_valid_text(world):
    response = post(world, CHAT, BODIES[CHAT] % (r'"smile \ud83d\ude00"', "0.5"))
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == "Echo: smile \U0001F600"


def test_nul_in_text_on_v1_goes_to_the_model_as_it_is(world):
    """/v1 stores no text, so a NUL is not refused there (it is on /api, where text is stored)."""
    response = post(world, CHAT, BODIES[CHAT] % (r'"a\u0000b"', "0.5"))
    assert response.status_code == 200, response.text
    assert world.upstream.last.json["messages"][0]["content"] == "a\x00b"


# ---- 3. every typed field checked for its type ---------------------------------------------------

TYPED = [
    (CHAT, "stream_options", '"yes"', "stream_options"),
    (CHAT, "stream_options", "[1]", "stream_options"),
    (CHAT, "stream_options", '{"include_usage": "yes"}', "stream_options.include_usage"),
    (CHAT, "stream", '"true"', "stream"),
    (CHAT, "model", "42", "model"),
    (CHAT, "max_tokens", '"10"', "max_tokens"),
    (CHAT, "max_tokens", "true", "max_tokens"),
    (CHAT, "temperature", '"hot"', "temperature"),
    (CHAT, "tools", "5", "tools"),
    (CHAT, "tools", '["f"]', "tools"),
    (CHAT, "tool_choice", "7", "tool_choice"),
    (CHAT, "stop", "[1]", "stop"),
    (CHAT, "n", '"1"', "n"),
    (CHAT, "messages", '{"role": "user"}', "messages"),
    (MESSAGES, "stream", '"yes"', "stream"),
    (MESSAGES, "max_tokens", '"50"', "max_tokens"),
    (MESSAGES, "model", "[1]", "model"),
    (MESSAGES, "system", "5", "system"),
    (MESSAGES, "tools", "5", "tools"),
    (MESSAGES, "tool_choice", '"auto"', "tool_choice"),
    (MESSAGES, "temperature", '"hot"', "temperature"),
    (MESSAGES, "stop_sequences", '"x"', "stop_sequences"),
    (RESPONSES, "input", "5", "input"),
    (RESPONSES, "instructions", "5", "instructions"),
    (RESPONSES, "stream", '"yes"', "stream"),
    (RESPONSES, "max_output_tokens", '"9"', "max_output_tokens"),
    (RESPONSES, "model", "{}", "model"),
    (RESPONSES, "temperature", "[]", "temperature"),
]


@pytest.mark.parametrize(("path", "field", "value", "param"), TYPED,
                         ids=[f"{p.rsplit('/', 1)[-1]}-{f}-{v}" for p, f, v, _ in TYPED])
def test_every_typed_body_field_is_checked_for_its_type(world, path, field, value, param):
    body = json.loads(BODIES[path] % ('"hi"', "0.5"))
    body[field] = json.loads(value)
    response = post(world, path, json.dumps(body))
    assert_refused(world, path, response, param)
    assert "must be" in response.text


def test_a_stream_options_that_is_not_an_object_is_a_400_not_a_500(world):
    body = {"model": "oa/echo-1", "messages": [{"role": "user", "content": "hi"}], "stream": True,
            "stream_options": "include_usage"}
    response = post(world, CHAT, json.dumps(body))
    error = assert_openai_error(response, 400, "stream_options")
    assert error == {"message": "stream_options: must be an object.", "type": "invalid_request_error",
                     "param": "stream_options", "code": "invalid_request_error"}


@pytest.mark.parametrize(("field", "value", "param"), [
    ("role", "1", "messages[0].role"), ("content", "5", "messages[0].content"),
    ("tool_calls", '"x"', "messages[0].tool_calls"), ("name", "[]", "messages[0].name"),
])
def test_the_fields_of_each_chat_message_are_typed(world, field, value, param):
    body = {"model": "oa/echo-1", "messages": [{"role": "user", "content": "hi"}]}
    body["messages"][0][field] = json.loads(value)
    assert_refused(world, CHAT, post(world, CHAT, json.dumps(body)), param)


def test_nulls_stand_for_absent_fields(world):
    """The SDKs send null for options left unset: that is not a wrong type."""
    body = {"model": "oa/echo-1", "messages": [{"role": "user", "content": "hi"}], "stream": None,
            "stream_options": None, "temperature": None, "max_tokens": None, "tools": None, "stop": None}
    response = post(world, CHAT, json.dumps(body))
    assert response.status_code == 200, response.text


# ---- 5. a malformed reply from the model server --------------------------------------------------

TOOLS = [{"type": "function", "function": {"name": "weather", "parameters": {"type": "object"}}}]
MESSAGES_TOOLS = [{"name": "weather", "input_schema": {"type": "object"}}]


@pytest.mark.parametrize("model", ["oa/echo-1", "an/claude-echo"])
def test_a_tool_call_whose_name_is_not_a_string_is_a_502_in_the_chat_shape(world, model):
    world.upstream.configure(tool_name=42)
    body = {"model": model, "messages": [{"role": "user", "content": "weather?"}], "tools": TOOLS}
    response = post(world, CHAT, json.dumps(body))
    error = assert_openai_error(response, 502, None)
    assert error["type"] == "server_error" and error["code"] == "upstream_error"
    assert "malformed reply" in error["message"] and "function.name" in error["message"]
    assert response.headers["x-inference-request-id"]


def test_a_tool_call_whose_name_is_not_a_string_is_a_502_in_the_messages_shape(world):
    world.upstream.configure(tool_name=42)
    body = {"model": "oa/echo-1", "max_tokens": 50, "messages": [{"role": "user", "content": "weather?"}],
            "tools": MESSAGES_TOOLS}
    response = post(world, MESSAGES, json.dumps(body))
    assert_anthropic_error(response, 502, "malformed reply", kind="api_error")


def _sse(response: httpx.Response) -> list[tuple[str | None, str]]:
    frames = []
    for frame in response.text.strip().split("\n\n"):
        name = None
        data = []
        for line in frame.split("\n"):
            if line.startswith("event: "):
                name = line[len("event: "):]
            elif line.startswith("data: "):
                data.append(line[len("data: "):])
        frames.append((name, "\n".join(data)))
    return frames


def test_a_malformed_tool_call_inside_a_chat_stream_is_the_streams_failure_signal(world):
    world.upstream.configure(tool_name=["not", "a", "name"])
    body = {"model": "oa/echo-1", "messages": [{"role": "user", "content": "weather?"}], "tools": TOOLS,
            "stream": True}
    response = post(world, CHAT, json.dumps(body))
    assert response.status_code == 200
    frames = _sse(response)
    assert frames[-1] == (None, "[DONE]")
    error = json.loads(frames[-2][1])["error"]
    assert error["code"] == "upstream_error" and "malformed reply" in error["message"]


def test_a_malformed_tool_call_inside_a_messages_stream_is_an_error_event(world):
    world.upstream.configure(tool_name=42)
    body = {"model": "oa/echo-1", "max_tokens": 50, "messages": [{"role": "user", "content": "weather?"}],
            "tools": MESSAGES_TOOLS, "stream": True}
    response = post(world, MESSAGES, json.dumps(body))
    assert response.status_code == 200
    frames = _sse(response)
    names = [name for name, _ in frames]
    assert names[-1] == "error" and "message_stop" not in names
    assert json.loads(frames[-1][1])["error"]["type"] == "api_error"
