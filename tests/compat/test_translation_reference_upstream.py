"""The reference upstream's Anthropic side answers what the translation tests lean on: a stop
sequence ends the reply before it, `thinking` brings a signed thinking block first, a forced tool
and `output_config.format` answer with a sample of their schema (tests/upstream/anthropic_wire.py)."""

import json

import anthropic
import pytest


@pytest.fixture
def client(upstream):
    """The upstream itself, no gateway in between (the fixture comes through tests/compat/conftest.py)."""
    return anthropic.Anthropic(base_url=upstream.url, api_key="k", max_retries=0)


HI = [{"role": "user", "content": "one two STOP three"}]
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}, "kind": {"enum": ["a", "b"]},
                                           "items": {"type": "array", "items": {"$ref": "#/$defs/Item"}}},
          "$defs": {"Item": {"type": "object", "properties": {"ok": {"type": "boolean"}}}}}
EXPECTED = {"n": 1, "kind": "a", "items": [{"ok": True}]}


def test_a_stop_sequence_ends_the_reply_before_it(client):
    message = client.messages.create(model="m", max_tokens=50, messages=HI, stop_sequences=["three", "STOP"])
    assert (message.content[0].text, message.stop_reason, message.stop_sequence) == (
        "Echo: one two ", "stop_sequence", "STOP")
    with client.messages.stream(model="m", max_tokens=50, messages=HI, stop_sequences=["STOP"]) as stream:
        final = stream.get_final_message()
    assert (final.content[0].text, final.stop_reason, final.stop_sequence) == (
        "Echo: one two ", "stop_sequence", "STOP")
    cut = client.messages.create(model="m", max_tokens=2, messages=HI, stop_sequences=["STOP"])
    assert (cut.stop_reason, cut.stop_sequence) == ("max_tokens", None)


@pytest.mark.parametrize("stream", [False, True])
def test_thinking_brings_a_signed_thinking_block(client, stream):
    kwargs = {"model": "m", "max_tokens": 2000, "messages": [{"role": "user", "content": "hi"}],
              "thinking": {"type": "enabled", "budget_tokens": 1024}}
    if stream:
        with client.messages.stream(**kwargs) as events:
            message = events.get_final_message()
    else:
        message = client.messages.create(**kwargs)
    assert [b.type for b in message.content] == ["thinking", "text"]
    assert (message.content[0].thinking, message.content[0].signature) == (
        "Thinking about: hi", "sig-reference-upstream")
    assert message.content[1].text == "Echo: hi"


def test_a_forced_tool_and_an_output_format_answer_with_a_sample_of_the_schema(client):
    tools = [{"name": "record", "input_schema": SCHEMA}]
    forced = client.messages.create(model="m", max_tokens=50, messages=HI, tools=tools,
                                    tool_choice={"type": "tool", "name": "record"})
    assert forced.content[0].input == EXPECTED
    formatted = client.messages.create(model="m", max_tokens=50, messages=HI,
                                       output_config={"format": {"type": "json_schema", "schema": SCHEMA}})
    assert json.loads(formatted.content[0].text) == EXPECTED
