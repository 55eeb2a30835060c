"""A group's guardrails on the reply, through the official SDKs: a card number the model streams is cut
or rewritten before any of it leaves (the window holds back what a finding may be split across), a
kept reply passes the checks of the group asking, and a group without guardrails sends the upstream
the very bytes it sent before."""

from __future__ import annotations

import anthropic
import openai
import pytest

from tests.compat.cache_support import caching
from tests.compat.guard_support import CARD, OUTPUT_BLOCK, OUTPUT_REDACT, PLACEHOLDER, guard
from tests.gateway.calls_log.conftest import call_of

SAID = f"Sure, the card on file is {CARD} and that is all I know about it"
DIGITS = ("4111", "1111 1111")
LONG = " and then" * 60  # a reply longer than the window: its text leaves before the stream ends
ASK = [{"role": "user", "content": "what card is on file?"}]


def leaked(text: str) -> bool:
    return any(part in text for part in DIGITS)


def test_a_streamed_card_is_cut_with_openais_error_chunk(world):
    guard(world.group, OUTPUT_BLOCK)
    world.upstream.configure(reply=SAID)
    received = []
    with pytest.raises(openai.APIError) as cut:
        for chunk in world.openai.chat.completions.create(model="oa/echo-1", messages=ASK, stream=True,
                                                          extra_headers={"X-Request-Id": "cut-1"}):
            received.append(chunk.choices[0].delta.content or "" if chunk.choices else "")
    assert "pii" in str(cut.value) and not leaked(str(cut.value))
    assert not leaked("".join(received))
    row = call_of("cut-1")
    assert (row.outcome, row.error_code, row.cost_units) == ("cut", "content_policy_violation", 0)
    assert [(f["check"], f["direction"]) for f in row.guard] == [("pii", "output")]


def test_a_whole_reply_with_a_card_is_refused_400(world):
    guard(world.group, OUTPUT_BLOCK)
    world.upstream.configure(reply=SAID)
    with pytest.raises(openai.BadRequestError) as refused:
        world.openai.chat.completions.create(model="oa/echo-1", messages=ASK)
    assert refused.value.body["code"] == "content_policy_violation"
    assert not leaked(str(refused.value.body))


@pytest.mark.parametrize("model", ["an/claude-echo", "oa/echo-1"])
def test_a_streamed_card_on_messages_ends_in_anthropics_error_event(world, model):
    guard(world.group, OUTPUT_BLOCK)
    world.upstream.configure(reply=SAID)
    received = []
    with pytest.raises(anthropic.APIStatusError) as cut:
        with world.anthropic.messages.stream(model=model, max_tokens=200, messages=ASK) as events:
            for text in events.text_stream:
                received.append(text)
    assert "invalid_request_error" in str(cut.value.body) and not leaked(str(cut.value.body))
    assert not leaked("".join(received))


def test_a_streamed_card_on_responses_fails_the_response(world):
    guard(world.group, OUTPUT_BLOCK)
    world.upstream.configure(reply=SAID)
    events = list(world.openai.responses.create(model="oa/echo-1", input="what card?", stream=True))
    assert events[-1].type == "response.failed"
    assert "content_policy_violation" in events[-1].response.error.message
    assert not leaked("".join(e.delta for e in events if e.type == "response.output_text.delta"))


@pytest.mark.parametrize("model", ["oa/echo-1", "an/claude-echo"])
def test_a_streamed_card_is_rewritten_within_the_window(world, model):
    guard(world.group, OUTPUT_REDACT)
    world.upstream.configure(reply=SAID + LONG)
    chunks = list(world.openai.chat.completions.create(model=model, messages=ASK, stream=True))
    pieces = [c.choices[0].delta.content or "" for c in chunks if c.choices]
    text = "".join(pieces)
    assert not leaked(text) and PLACEHOLDER.search(text)
    assert text.startswith("Sure, the card on file is <") and text.endswith(LONG)
    assert chunks[-1].choices[0].finish_reason == "stop"
    first = next(i for i, p in enumerate(pieces) if p)
    assert first < len(pieces) - 30  # released as the stream went on, held back by the window only
    assert len(text) - len("".join(pieces[:first + 1])) > 100


def test_a_streamed_card_on_anthropic_events_is_rewritten(world):
    guard(world.group, OUTPUT_REDACT)
    world.upstream.configure(reply=SAID)
    with world.anthropic.messages.stream(model="an/claude-echo", max_tokens=200, messages=ASK) as events:
        text = "".join(events.text_stream)
        final = events.get_final_message()
    assert not leaked(text) and PLACEHOLDER.search(text) and text.endswith("all I know about it")
    assert final.content[0].text == text


def test_a_kept_reply_passes_the_checks_of_the_group_asking(world):
    caching(world.group)
    world.upstream.configure(reply=SAID)
    first = world.openai.chat.completions.create(model="oa/echo-1", messages=ASK).choices[0].message.content
    assert CARD in first  # no guardrails yet: the reply as the model gave it, now kept
    guard(world.group, OUTPUT_REDACT)
    raw = world.openai.chat.completions.with_raw_response.create(model="oa/echo-1", messages=ASK)
    assert raw.headers["X-Cache"] == "hit"
    again = raw.parse().choices[0].message.content
    assert not leaked(again) and PLACEHOLDER.search(again)
    chunks = list(world.openai.chat.completions.create(model="oa/echo-1", messages=ASK, stream=True))
    assert not leaked("".join(c.choices[0].delta.content or "" for c in chunks if c.choices))
    assert len(world.upstream.requests) == 1


def test_a_group_without_guardrails_sends_the_same_bytes_as_one_whose_checks_find_nothing(world):
    request = {"model": "oa/echo-1", "messages": [{"role": "system", "content": "be brief"}, *ASK],
               "temperature": 0.5}
    world.openai.chat.completions.create(**request)
    world.anthropic.messages.create(model="an/claude-echo", max_tokens=20, system=[
        {"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}], messages=ASK)
    plain = [r.body for r in world.upstream.requests]
    guard(world.group, [{"check": "words", "on": "both", "action": "block", "words": ["ProjectX"]},
                        {"check": "pii", "on": "input", "action": "redact"}])
    world.openai.chat.completions.create(**request)
    world.anthropic.messages.create(model="an/claude-echo", max_tokens=20, system=[
        {"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}], messages=ASK)
    assert [r.body for r in world.upstream.requests[2:]] == plain
