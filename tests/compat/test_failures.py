"""Failure rows of spec 6.2, 7.2 and 7.3 on the /v1 surfaces, through a running gateway."""


import anthropic
import httpx
import openai
import pytest

from gateway.calls.tokens import count_text
from tests.factories import ModelFallbackFactory
from tests.servers import wait_for_usage

CHAT_PATH = "/v1/chat/completions"  # what the `oa` server is asked
MESSAGES_PATH = "/v1/messages"  # what the `an` server is asked
HELLO = [{"role": "user", "content": "one two three four five"}]


def chat(world, model="oa/echo-1", **kwargs):
    return world.openai.chat.completions.create(model=model, messages=HELLO, **kwargs)


def raw_chat(world, model="oa/echo-1", **body):
    return httpx.post(f"{world.base}/v1/chat/completions", json={"model": model, "messages": HELLO, **body},
                      headers={"Authorization": f"Bearer {world.key}"}, timeout=30)


def test_a_retryable_failure_falls_through_to_the_fallback(world):
    ModelFallbackFactory(model=world.default, fallback=world.claude)
    world.upstream.configure(fail_status=503, fail_paths=[CHAT_PATH])
    completion = chat(world)
    assert completion.model == "an/claude-echo"
    assert completion.choices[0].message.content == "Echo: one two three four five"


def test_a_refusal_falls_through_to_the_default_on_v1(world):
    world.upstream.configure(fail_status=400, fail_paths=[MESSAGES_PATH])
    completion = chat(world, model="an/claude-echo")
    assert completion.model == "oa/echo-1"
    assert completion.choices[0].message.content.startswith("Echo:")


def test_a_refusal_keeps_its_status_when_no_other_model_can_answer(world):
    world.upstream.configure(fail_status=400)
    with pytest.raises(openai.BadRequestError) as exc:
        chat(world, model="an/claude-echo")
    assert exc.value.status_code == 400
    with pytest.raises(anthropic.BadRequestError):
        world.anthropic.messages.create(model="an/claude-echo", max_tokens=10, messages=HELLO)


def test_every_model_failing_retryably_is_503_with_retry_after(world):
    world.upstream.configure(fail_status=429)
    r = raw_chat(world, model="an/claude-echo")
    assert r.status_code == 503
    assert r.headers["Retry-After"] == "1"  # the largest the servers asked for
    error = r.json()["error"]
    assert error["code"] == "service_unavailable"
    assert error["message"].endswith("retry in 1 seconds.")
    with pytest.raises(openai.InternalServerError):
        chat(world)
    with pytest.raises(anthropic.InternalServerError):
        world.anthropic.messages.create(model="oa/echo-1", max_tokens=10, messages=HELLO)


def test_an_unreachable_server_is_skipped(world):
    world.oa.base_url = "http://127.0.0.1:9/v1"  # nothing listens on the discard port
    world.oa.save()
    ModelFallbackFactory(model=world.default, fallback=world.claude)
    assert chat(world).model == "an/claude-echo"


def test_a_reply_that_stalls_is_504_with_the_partial_reply(world):
    world.upstream.configure(stall_after_tokens=2, stall_seconds=5)
    r = raw_chat(world)
    assert r.status_code == 504
    body = r.json()
    assert body["error"]["code"] == "read_timeout"
    assert body["partial"]["choices"][0]["message"]["content"] == "Echo: one "
    assert r.headers["X-Inference-Request-Id"]


def test_a_reply_cut_midway_is_502_with_the_partial_reply(world):
    world.upstream.configure(cut_after_tokens=3)
    r = raw_chat(world, model="an/claude-echo")
    assert r.status_code == 502
    assert r.json()["partial"]["choices"][0]["message"]["content"] == "Echo: one two "


def test_a_messages_reply_that_stalls_is_504_with_a_partial_message(world):
    world.upstream.configure(stall_after_tokens=1, stall_seconds=5)
    r = httpx.post(f"{world.base}/v1/messages", headers={"x-api-key": world.key},
                   json={"model": "oa/echo-1", "max_tokens": 50, "messages": HELLO}, timeout=30)
    assert r.status_code == 504
    body = r.json()
    assert body["type"] == "error" and body["error"]["type"] == "timeout_error"
    assert body["partial"]["content"][0]["text"] == "Echo: "


def test_a_chat_stream_cut_midway_ends_with_an_error_item_then_done(world):
    world.upstream.configure(cut_after_tokens=2)
    r = raw_chat(world, stream=True)
    assert r.status_code == 200
    frames = [f for f in r.text.split("\n\n") if f]
    assert frames[-1] == "data: [DONE]"
    assert '"error"' in frames[-2] and '"code":"disconnected"' in frames[-2]
    with pytest.raises(openai.APIError) as exc:
        for _ in chat(world, stream=True):
            pass
    assert not isinstance(exc.value, openai.APIStatusError)


def test_a_chat_stream_that_stalls_ends_with_read_timeout(world):
    world.upstream.configure(stall_after_tokens=2, stall_seconds=5)
    received = []
    with pytest.raises(openai.APIError) as exc:
        for chunk in chat(world, stream=True):
            received.append(chunk.choices[0].delta.content or "")
    assert "".join(received) == "Echo: one "  # text before the failure is valid
    assert exc.value.body["code"] == "read_timeout"


def test_a_messages_stream_cut_midway_ends_with_an_error_event(world):
    world.upstream.configure(cut_after_tokens=2)
    with pytest.raises(anthropic.APIStatusError) as exc:
        with world.anthropic.messages.stream(model="an/claude-echo", max_tokens=50, messages=HELLO) as stream:
            for _ in stream.text_stream:
                pass
    assert exc.value.body["error"]["type"] == "api_error"
    r = httpx.post(f"{world.base}/v1/messages", headers={"x-api-key": world.key},
                   json={"model": "an/claude-echo", "max_tokens": 50, "messages": HELLO, "stream": True}, timeout=30)
    assert "event: error" in r.text and "message_stop" not in r.text


def test_a_responses_stream_cut_midway_ends_with_response_failed(world):
    world.upstream.configure(cut_after_tokens=2)
    with world.openai.responses.create(model="oa/echo-1", input="one two three", stream=True) as stream:
        events = list(stream)
    assert events[-1].type == "response.failed"
    assert events[-1].response.status == "failed"
    assert events[-1].response.error.code == "server_error"
    assert "disconnected" in events[-1].response.error.message


def test_a_cut_stream_counts_the_tokens_delivered(world):
    world.upstream.configure(cut_after_tokens=3, usage=False)
    r = raw_chat(world, stream=True)
    assert '"error"' in r.text
    record = wait_for_usage(world.account)[0]
    assert record.output_tokens == count_text("Echo: one two ")  # the three tokens that arrived
    assert record.input_tokens > 0
    assert record.model == "oa/echo-1"


def test_a_successful_call_is_metered_with_the_servers_usage(world):
    completion = chat(world)
    record = wait_for_usage(world.account)[0]
    assert (record.input_tokens, record.output_tokens) == (
        completion.usage.prompt_tokens, completion.usage.completion_tokens)
    assert record.surface == "chat.completions"
