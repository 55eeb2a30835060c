"""A group's guardrails on the input of every /v1 chat surface, through the official SDKs and the running
gateway in front of the reference upstream: a redaction reaches the upstream with the values replaced
and the reply restored; a block refuses in the surface's own shape and the upstream receives nothing."""

from __future__ import annotations

import anthropic
import openai
import pytest

from tests.compat.guard_support import (
    AWS_KEY,
    BLOCK,
    CARD,
    EMAIL,
    PROMPT,
    REDACT,
    assert_redacted,
    guard,
    sent_texts,
)
from tests.factories import ModelFactory
from tests.gateway.calls_log.conftest import call_of
from tests.servers import wait_for_usage

ASK = [{"role": "user", "content": PROMPT}]


@pytest.mark.parametrize("stream", [False, True])
def test_chat_completions_redacts_what_goes_up_and_restores_the_reply(world, stream):
    guard(world.group, REDACT)
    if stream:
        chunks = list(world.openai.chat.completions.create(model="oa/echo-1", messages=ASK, stream=True))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    else:
        text = world.openai.chat.completions.create(model="oa/echo-1", messages=ASK).choices[0].message.content
    assert_redacted(sent_texts(world.upstream.last))
    assert EMAIL in text and CARD in text  # restored: the client sees its own data
    assert AWS_KEY not in text  # a secret's placeholder is never turned back


@pytest.mark.parametrize("stream", [False, True])
def test_messages_to_an_anthropic_server_redacts_and_restores(world, stream):
    guard(world.group, REDACT)
    request = {"model": "an/claude-echo", "max_tokens": 200, "messages": ASK}
    if stream:
        with world.anthropic.messages.stream(**request) as events:
            text = events.get_final_text()
    else:
        text = world.anthropic.messages.create(**request).content[0].text
    assert world.upstream.last.path == "/v1/messages"  # passed through as the client sent it
    assert_redacted(sent_texts(world.upstream.last))
    assert EMAIL in text and CARD in text


def test_messages_to_an_openai_server_redacts_the_translated_request(world):
    guard(world.group, REDACT)
    text = world.anthropic.messages.create(model="oa/echo-1", max_tokens=200, messages=ASK).content[0].text
    assert world.upstream.last.path == "/v1/chat/completions"
    assert_redacted(sent_texts(world.upstream.last))
    assert EMAIL in text and CARD in text


@pytest.mark.parametrize("stream", [False, True])
def test_responses_redacts_and_restores(world, stream):
    guard(world.group, REDACT)
    if stream:
        events = list(world.openai.responses.create(model="oa/echo-1", input=PROMPT, stream=True))
        text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    else:
        text = world.openai.responses.create(model="oa/echo-1", input=PROMPT).output_text
    assert_redacted(sent_texts(world.upstream.last))
    assert EMAIL in text and CARD in text


def test_a_block_on_chat_completions_is_openais_400_and_nothing_goes_up(world):
    guard(world.group, BLOCK)
    with pytest.raises(openai.BadRequestError) as refused:
        world.openai.chat.completions.create(model="oa/echo-1", messages=ASK,
                                             extra_headers={"X-Request-Id": "blocked-chat"})
    error = refused.value.body
    assert refused.value.status_code == 400
    assert error["code"] == "content_policy_violation" and error["type"] == "invalid_request_error"
    assert "secrets" in error["message"] and AWS_KEY not in error["message"]
    assert world.upstream.requests == []
    row = call_of("blocked-chat")
    assert (row.status, row.error_code, row.input_tokens, row.cost_units) == (400, "content_policy_violation", 0, 0)
    assert [(f["check"], f["action"], f["direction"], f["index"]) for f in row.guard] == [
        ("secrets", "block", "input", 0)]
    assert AWS_KEY not in str(row.guard)


def test_a_block_on_messages_is_anthropics_invalid_request_error(world):
    guard(world.group, BLOCK)
    with pytest.raises(anthropic.BadRequestError) as refused:
        world.anthropic.messages.create(model="an/claude-echo", max_tokens=50, messages=ASK)
    body = refused.value.body
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert "secrets" in body["error"]["message"] and AWS_KEY not in body["error"]["message"]
    assert world.upstream.requests == []


def test_a_block_on_responses_and_streams_refuses_before_any_byte(world):
    guard(world.group, BLOCK)
    with pytest.raises(openai.BadRequestError) as refused:
        list(world.openai.responses.create(model="oa/echo-1", input=PROMPT, stream=True))
    assert refused.value.body["code"] == "content_policy_violation"
    with pytest.raises(openai.BadRequestError):
        list(world.openai.chat.completions.create(model="oa/echo-1", messages=ASK, stream=True))
    assert world.upstream.requests == []


def test_a_redacted_call_is_logged_with_its_findings_and_metered(world):
    guard(world.group, REDACT)
    world.openai.chat.completions.create(model="oa/echo-1", messages=ASK, extra_headers={"X-Request-Id": "red-1"})
    row = call_of("red-1")
    entities = sorted((f["check"], f["entity"], f["action"], f["direction"]) for f in row.guard)
    assert entities == [("pii", "CREDIT_CARD", "redact", "input"), ("pii", "EMAIL_ADDRESS", "redact", "input"),
                        ("secrets", "AWS_ACCESS_KEY", "redact", "input")]
    assert all(set(f) == {"check", "entity", "action", "direction", "index", "offset"} for f in row.guard)
    assert PROMPT.index(EMAIL) in {f["offset"] for f in row.guard}
    assert wait_for_usage(world.account)[0].input_tokens > 0  # a redacted call is a call: billed


def test_the_metrics_count_findings_by_check_and_action(world):
    import httpx

    from tests.compat.cache_support import scrape

    guard(world.group, BLOCK)
    key = ("gateway_guard_findings_total", (("action", "block"), ("check", "secrets")))
    before = scrape(world.base, httpx.get).get(key, 0)
    with pytest.raises(openai.BadRequestError):
        world.openai.chat.completions.create(model="oa/echo-1", messages=ASK)
    assert scrape(world.base, httpx.get)[key] == before + 1


def test_the_text_to_speak_passes_the_input_checks(world):
    ModelFactory(server=world.oa, name="whisper-1", supports_chat=False, supports_audio=True)
    guard(world.group, REDACT)
    world.openai.audio.speech.create(model="oa/whisper-1", voice="alloy", input=PROMPT, response_format="wav").read()
    assert_redacted(sent_texts(world.upstream.last))
    guard(world.group, BLOCK)
    with pytest.raises(openai.BadRequestError) as refused:
        world.openai.audio.speech.create(model="oa/whisper-1", voice="alloy", input=PROMPT)
    assert refused.value.body["code"] == "content_policy_violation"
    assert len(world.upstream.requests) == 1
