"""Bad input on /api/v1 gets a clear 4xx in the surface's shape, never a 500:
non-finite numbers, lone surrogates and NUL refused at the edge with the field named (422
`{message, errors}`), attachments whose name or text PostgreSQL cannot store refused, and a model
server's malformed reply answered 502 (or an `error` event inside a begun stream)."""

from __future__ import annotations

import base64

import httpx
import pytest

from native.models import Conversation, Message

CHAT = "/api/v1/chat"
AGENT_CHAT = "/api/v1/agent/chat"
EMBEDDINGS = "/api/v1/embeddings"


def post_raw(world, path: str, content: str) -> httpx.Response:
    return world.api.client.post(path, content=content.encode("utf-8", "surrogatepass"),
                                 headers={"Content-Type": "application/json"})


def assert_validation(response: httpx.Response, field: str, words: str, *, named_in_message: bool = True) -> str:
    """A 422 `{message, errors: {<field>: [<message>]}}` naming `field`."""
    assert response.status_code == 422, response.text
    body = response.json()
    assert set(body) == {"message", "errors"}, body
    assert list(body["errors"]) == [field], body
    assert words in body["errors"][field][0]
    assert not named_in_message or field in body["message"]
    return body["errors"][field][0]


def nothing_saved_or_sent(world) -> None:
    assert not Conversation.objects.exists() and not Message.objects.exists()
    assert world.upstream.requests == []


# ---- 1. non-finite numbers -----------------------------------------------------------------------

@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400"])
@pytest.mark.parametrize(("path", "body", "field"), [
    (CHAT, '{"message": "hi", "stream": false, "collection_id": %s}', "collection_id"),
    (AGENT_CHAT, '{"message": "hi", "messages": [{"role": "user", "content": "a", "x": [%s]}]}',
     "messages.0.x.0"),
    (EMBEDDINGS, '{"input": ["a"], "dimensions": %s}', "dimensions"),
])
def test_non_finite_numbers_are_a_422_naming_the_field(world, number, path, body, field):
    response = post_raw(world, path, body % number)
    assert_validation(response, field, "finite number")
    nothing_saved_or_sent(world)


# ---- 2. lone surrogates and NUL in text ----------------------------------------------------------

@pytest.mark.parametrize(("text", "words"), [(r"\ud800", "lone surrogate"), (r"ends in \udbff", "lone surrogate"),
                                             (r"a\u0000b", "NUL")])
def test_a_lone_surrogate_or_nul_in_the_chat_message_is_a_422(world, text, words):
    response = post_raw(world, CHAT, '{"message": "%s", "stream": false}' % text)
    assert_validation(response, "message", words)
    nothing_saved_or_sent(world)


def test_a_lone_surrogate_in_agent_chat_and_embeddings_is_a_422(world):
    assert_validation(post_raw(world, AGENT_CHAT, r'{"message": "\udc80"}'), "message", "lone surrogate")
    assert_validation(post_raw(world, EMBEDDINGS, r'{"input": ["ok", "\ud800"]}'), "input.1", "lone surrogate")
    assert world.upstream.requests == []


def test_the_shape_follows_the_surface_login_and_collections(world):
    login = post_raw(world, "/api/v1/auth/login", r'{"email": "a@b.test", "password": "\ud800"}')
    assert login.status_code == 422, login.text
    assert login.json()["status"] == "error" and list(login.json()["errors"]) == ["password"]
    collection = post_raw(world, "/api/v1/collections", r'{"name": "n\u0000"}')
    assert_validation(collection, "name", "NUL")


# ---- 4. attachments ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", [r"a\u0000.txt", r"\ud800.txt"])
def test_an_attachment_name_with_nul_or_a_lone_surrogate_is_a_422(world, name):
    body = '{"message": "read it", "stream": false, "attachments": [{"name": "%s", "content_type": "text/plain", ' \
           '"text": "hello"}]}' % name
    assert_validation(post_raw(world, CHAT, body), "attachments.0.name", "")
    nothing_saved_or_sent(world)


def test_a_text_attachment_whose_bytes_hold_nul_is_a_422(world):
    data = base64.b64encode(b"line one\x00line two").decode()
    attachment = {"name": "notes.txt", "content_type": "text/plain", "data": data}
    response = world.api.post(CHAT, {"message": "read it", "stream": False, "attachments": [attachment]})
    assert_validation(response, "attachments.0", "NUL", named_in_message=False)
    nothing_saved_or_sent(world)


# ---- 5. a malformed reply from the model server --------------------------------------------------

def test_a_tool_call_whose_name_is_not_a_string_is_a_502_on_agent_chat(world):
    world.upstream.configure(tool_name=42)
    response = world.api.post(AGENT_CHAT, {"message": "what is in my collections?"})
    assert response.status_code == 502, response.text
    assert "malformed reply" in response.json()["detail"]

