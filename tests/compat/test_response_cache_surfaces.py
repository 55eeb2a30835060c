"""The response cache on /v1/messages, the same format passed through (an Anthropic
server) and translated (an OpenAI-compatible one), and on /v1/responses, through the official SDKs:
a hit reaches no model server and gives the same reply in the surface's own events, streamed from a
reply kept whole and whole from a reply kept from a stream. The surface is part of the key."""

import pytest

from tests.compat.cache_support import ASK, TEXT, caching, chat, messages, model_calls, responses, without_ids

MESSAGE_EVENTS = ["message_start", "content_block_start", "content_block_delta", "content_block_stop",
                  "message_delta", "message_stop"]


@pytest.mark.parametrize("model", ["an/claude-echo", "oa/echo-1"], ids=["same-format", "translated"])
def test_a_message_kept_whole_is_given_whole_and_streamed(world, model):
    caching(world.group)
    whole = messages(world, model=model)
    again = messages(world, model=model)
    streamed = messages(world, model=model, stream=True)
    assert (whole.cache, again.cache, streamed.cache) == ("miss", "hit", "hit")
    assert model_calls(world) == 1
    assert again.text == streamed.text == whole.text == TEXT
    assert without_ids(again.body) == without_ids(whole.body)
    assert again.body["id"] == f"msg_{again.headers['X-Inference-Request-Id']}" and again.body["model"] == model
    kinds = [e["type"] for e in streamed.events]
    assert [k for i, k in enumerate(kinds) if i == 0 or kinds[i - 1] != k] == MESSAGE_EVENTS
    start = streamed.events[0]["message"]
    assert (start["id"], start["model"]) == (f"msg_{streamed.headers['X-Inference-Request-Id']}", model)
    final = streamed.events[-2]
    assert final["delta"]["stop_reason"] == "end_turn"
    assert final["usage"]["output_tokens"] == whole.body["usage"]["output_tokens"]


@pytest.mark.parametrize("model", ["an/claude-echo", "oa/echo-1"], ids=["same-format", "translated"])
def test_a_message_kept_from_a_stream_is_given_whole(world, model):
    caching(world.group)
    streamed = messages(world, model=model, stream=True)
    whole = messages(world, model=model)
    assert (streamed.cache, whole.cache) == ("miss", "hit") and model_calls(world) == 1
    assert whole.text == streamed.text == TEXT
    fresh = messages(world, model=model, headers={"Cache-Control": "no-cache"})
    assert without_ids(whole.body) == without_ids(fresh.body)


def test_a_passed_through_messages_request_is_keyed_with_its_beta_headers(world):
    caching(world.group)
    messages(world)
    assert messages(world, headers={"anthropic-beta": "interleaved-thinking-2025-05-14"}).cache == "miss"
    assert messages(world, headers={"anthropic-beta": "interleaved-thinking-2025-05-14"}).cache == "hit"
    assert messages(world, metadata={"user_id": "someone"}).cache == "hit"
    assert model_calls(world) == 2


def test_a_response_kept_whole_is_given_whole_and_streamed(world):
    caching(world.group)
    whole = responses(world)
    again = responses(world)
    streamed = responses(world, stream=True)
    assert (whole.cache, again.cache, streamed.cache) == ("miss", "hit", "hit")
    assert model_calls(world) == 1
    assert again.text == streamed.text == whole.text == TEXT
    assert without_ids(again.body, "output") == without_ids(whole.body, "output")
    assert [without_ids(item) for item in again.body["output"]] == [without_ids(item) for item in whole.body["output"]]
    assert again.body["id"] == f"resp_{again.headers['X-Inference-Request-Id']}"
    kinds = [e["type"] for e in streamed.events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert streamed.body["usage"] == whole.body["usage"]


def test_a_response_kept_from_a_stream_is_given_whole(world):
    caching(world.group)
    streamed = responses(world, stream=True)
    whole = responses(world)
    assert (streamed.cache, whole.cache) == ("miss", "hit") and model_calls(world) == 1
    assert whole.text == streamed.text == TEXT


def test_each_surface_keeps_its_own_replies(world):
    caching(world.group)
    chat(world)
    messages(world, model="oa/echo-1")
    responses(world)
    assert model_calls(world) == 3
    assert [chat(world).cache, messages(world, model="oa/echo-1").cache, responses(world).cache] == ["hit"] * 3
    assert model_calls(world) == 3


def test_a_streamed_hit_through_the_sdks_stream_helpers(world):
    caching(world.group)
    messages(world)
    with world.anthropic.messages.stream(model="an/claude-echo", max_tokens=64, messages=ASK) as stream:
        assert stream.get_final_text() == TEXT
    assert stream.response.headers["X-Cache"] == "hit"
    assert model_calls(world) == 1
