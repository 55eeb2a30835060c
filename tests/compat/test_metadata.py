"""OpenAI's `metadata`, a call's tags (up to 16 string keys of at most 64 characters, string values of at
most 512): checked at the edge of /v1/chat/completions and /v1/responses, sent on as it came to an
OpenAI-compatible server, and never a field an Anthropic server is refused for (docs/compatibility.md):
the model asked answers, not the next of the chain."""

from __future__ import annotations

import httpx
import pytest
from jsonschema import Draft202012Validator

CHAT = "/v1/chat/completions"
RESPONSES = "/v1/responses"
HI = [{"role": "user", "content": "hello there"}]
BILLING = {"app": "billing"}


def post(world, path: str, body: dict) -> httpx.Response:
    return httpx.post(world.base + path, json=body, timeout=30, headers={"Authorization": f"Bearer {world.key}"})


def request(path: str, model: str, metadata) -> dict:
    if path == CHAT:
        return {"model": model, "messages": HI, "metadata": metadata}
    return {"model": model, "input": "hello there", "metadata": metadata}


def text_of(path: str, body: dict) -> str:
    if path == CHAT:
        return body["choices"][0]["message"]["content"]
    return body["output"][0]["content"][0]["text"]


@pytest.mark.parametrize("path", [CHAT, RESPONSES])
def test_an_anthropic_server_answers_a_call_with_tags_and_is_not_sent_them(world, path):
    response = post(world, path, request(path, "an/claude-echo", BILLING))
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"] == "application/json"
    body = response.json()
    assert (body["model"], text_of(path, body)) == ("an/claude-echo", "Echo: hello there")  # not the default's
    assert [(r.path, "metadata" in r.json) for r in world.upstream.requests] == [("/v1/messages", False)]


def test_to_an_anthropic_server_the_user_is_its_only_metadata(world):
    response = post(world, CHAT, {**request(CHAT, "an/claude-echo", BILLING), "user": "user-9"})
    assert (response.status_code, response.json()["model"]) == (200, "an/claude-echo")
    assert world.upstream.last.json["metadata"] == {"user_id": "user-9"}


def test_a_streamed_call_with_tags_is_answered_by_the_anthropic_server(world):
    body = {**request(CHAT, "an/claude-echo", BILLING), "stream": True}
    with httpx.stream("POST", world.base + CHAT, json=body, timeout=30,
                      headers={"Authorization": f"Bearer {world.key}"}) as response:
        text = "".join(response.iter_text())
    assert response.status_code == 200 and response.headers["Content-Type"] == "text/event-stream"
    assert '"model":"an/claude-echo"' in text.replace(" ", "") and text.rstrip().endswith("data: [DONE]")
    assert "metadata" not in world.upstream.last.json


def test_an_openai_compatible_server_gets_the_tags_as_sent(world):
    tags = {"app": "billing", "team": "Økonomi", "empty": ""}
    response = post(world, CHAT, request(CHAT, "oa/echo-1", tags))
    assert (response.status_code, response.json()["model"]) == (200, "oa/echo-1")
    assert world.upstream.last.path == "/v1/chat/completions"
    assert world.upstream.last.json["metadata"] == tags


def test_a_responses_call_sends_its_tags_on_to_an_openai_compatible_server(world):
    response = post(world, RESPONSES, request(RESPONSES, "oa/echo-1", BILLING))
    assert response.status_code == 200 and response.json()["metadata"] == BILLING
    assert world.upstream.last.json["metadata"] == BILLING


def sixteen(**changed) -> dict:
    return {**{f"k{i}": "v" for i in range(16 - len(changed))}, **changed}


ACCEPTED = [sixteen(), sixteen(**{"k" * 64: "v"}), sixteen(big="x" * 512), {}, None]
REFUSED = [
    ({**sixteen(), "one_more": "v"}, "metadata: at most 16 keys, not 17.", "metadata"),
    ({"k" * 65: "v"}, f"metadata: a key is at most 64 characters long, not 65 ('{'k' * 64}'…).", "metadata"),
    ({"big": "x" * 513}, "metadata.big: at most 512 characters, not 513.", "metadata.big"),
    ({"n": 5}, "metadata.n: must be a string.", "metadata.n"),
    ({"ok": "v", "none": None}, "metadata.none: must be a string.", "metadata.none"),
    ({"nested": {"a": "b"}}, "metadata.nested: must be a string.", "metadata.nested"),
    (["app", "billing"], "metadata: must be an object.", "metadata"),
    ("app=billing", "metadata: must be an object.", "metadata"),
]


@pytest.mark.parametrize("path", [CHAT, RESPONSES])
@pytest.mark.parametrize("metadata", ACCEPTED, ids=["16 keys", "64-char key", "512-char value", "empty", "null"])
def test_tags_up_to_the_limits_are_taken(world, path, metadata):
    response = post(world, path, request(path, "oa/echo-1", metadata))
    assert response.status_code == 200, response.text
    assert text_of(path, response.json()) == "Echo: hello there"
    assert world.upstream.last.json.get("metadata") == metadata


@pytest.mark.parametrize("path", [CHAT, RESPONSES])
@pytest.mark.parametrize("metadata, message, param", REFUSED,
                         ids=["17 keys", "65-char key", "513-char value", "a number", "a null value", "an object",
                              "a list", "a string"])
def test_tags_past_the_limits_are_a_400_naming_metadata(world, path, metadata, message, param):
    response = post(world, path, request(path, "an/claude-echo", metadata))
    assert response.status_code == 400
    assert response.headers["Content-Type"] == "application/json"
    assert response.json() == {"error": {"message": message, "type": "invalid_request_error", "param": param,
                                         "code": "invalid_request_error"}}
    assert world.upstream.requests == []  # refused at the edge: no model tried


@pytest.mark.parametrize("schema", ["ChatCompletionRequest", "ResponsesRequest"])
def test_the_openapi_document_describes_the_same_limits(client, db, schema):
    response = client.get("/api/v1/openapi.json")
    assert response.status_code == 200
    metadata = Draft202012Validator(response.json()["components"]["schemas"][schema]["properties"]["metadata"])
    assert [metadata.is_valid(m) for m in ACCEPTED if m is not None] == [True] * 4
    assert [metadata.is_valid(m) for m, _, _ in REFUSED] == [False] * len(REFUSED)
