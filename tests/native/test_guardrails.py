"""A group's guardrails on the native surface: native chat's request redacted before the model reads
it (its reply restored), a block refused `{detail}` before anything is saved, a reply cut by an output
check in native chat's own `error` event; embeddings' inputs checked like a chat's."""

from __future__ import annotations

from native.models import Message
from tests.compat.guard_support import (
    AWS_KEY,
    BLOCK,
    CARD,
    EMAIL,
    OUTPUT_BLOCK,
    PROMPT,
    REDACT,
    assert_redacted,
    guard,
    sent_texts,
)
from tests.factories import ModelFactory
from tests.native.chat_support import CHAT, assert_detail, chat_requests
from tests.native.conftest import sse_events


def test_native_chat_redacts_the_request_and_restores_the_reply(world):
    guard(world.group, REDACT)
    r = world.api.post(CHAT, {"message": PROMPT, "stream": False})
    assert r.status_code == 200, r.text
    assert_redacted(sent_texts(chat_requests(world)[-1]))
    assert EMAIL in r.json()["text"] and CARD in r.json()["text"]


def test_native_chat_refuses_a_blocked_message_as_detail_and_saves_nothing(world):
    guard(world.group, BLOCK)
    for stream in (True, False):
        detail = assert_detail(world.api.post(CHAT, {"message": PROMPT, "stream": stream}), 400)
        assert "secrets" in detail and AWS_KEY not in detail
    assert chat_requests(world) == []
    assert not Message.objects.exists()


def test_a_reply_stopped_by_an_output_check_is_native_chats_error_event(world):
    guard(world.group, OUTPUT_BLOCK)
    world.upstream.configure(reply=f"the card is {CARD} and so on and so forth")
    events = sse_events(world.api.post(CHAT, {"message": "which card?"}))
    assert [name for name, _ in events][-2:] == ["error", "done"]
    error = events[-2][1]
    assert error["codigo"] == "content_policy_violation" and "pii" in error["message"]
    assert "4111" not in "".join(p.get("text", "") for _, p in events)
    refused = world.api.post(CHAT, {"message": "which card?", "stream": False})
    assert refused.status_code == 400 and refused.json()["codigo"] == "content_policy_violation"
    assert "4111" not in refused.text


def test_embeddings_inputs_pass_the_input_checks(world):
    ModelFactory(server=world.oa, name="embed-1", supports_chat=False, supports_embeddings=True)
    guard(world.group, BLOCK)
    detail = assert_detail(world.api.post("/api/v1/embeddings", {"input": ["fine", f"key {AWS_KEY}"]}), 400)
    assert AWS_KEY not in detail
    guard(world.group, REDACT)
    assert world.api.post("/api/v1/embeddings", {"input": [PROMPT]}).status_code == 200
    embedded = [r for r in world.upstream.requests if r.path == "/v1/embeddings"]
    assert len(embedded) == 1
    assert_redacted(sent_texts(embedded[0]))
