"""Ways around a group's guardrails, each tried through the official SDKs, each caught: a value hidden in a
tool's result, in a system block with `cache_control`, in a pass-through /v1/messages request's blocks, in
look-alike letters (fullwidth, another script's), base64'd in a markdown image's alt text, or split across
two messages."""

from __future__ import annotations

import base64

import anthropic
import openai
import pytest

from tests.compat.guard_support import AWS_KEY, BLOCK, EMAIL, REDACT, assert_redacted, guard, sent_texts

ASK = {"role": "user", "content": "hello"}


def test_a_secret_in_a_tool_result_is_blocked(world):
    guard(world.group, BLOCK)
    messages = [{"role": "user", "content": "read the config"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": f"aws_access_key_id = {AWS_KEY}"}]
    with pytest.raises(openai.BadRequestError):
        world.openai.chat.completions.create(model="oa/echo-1", messages=messages)
    assert world.upstream.requests == []


def test_values_in_an_anthropic_tool_result_are_redacted_on_the_way_through(world):
    guard(world.group, REDACT)
    world.anthropic.messages.create(model="an/claude-echo", max_tokens=50, messages=[
        {"role": "user", "content": "look it up"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "crm", "input": {"q": "x"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [
            {"type": "text", "text": f"mail {EMAIL} card 4111 1111 1111 1111 key {AWS_KEY}"}]}]}])
    assert world.upstream.last.path == "/v1/messages"
    assert_redacted(sent_texts(world.upstream.last))


def test_a_secret_in_a_cached_system_block_of_a_passed_through_request_is_blocked(world):
    guard(world.group, BLOCK)
    with pytest.raises(anthropic.BadRequestError):
        world.anthropic.messages.create(model="an/claude-echo", max_tokens=50, messages=[ASK], system=[
            {"type": "text", "text": "You are helpful."},
            {"type": "text", "text": f"Deploy with {AWS_KEY}", "cache_control": {"type": "ephemeral"}}])
    assert world.upstream.requests == []


def test_cache_control_blocks_keep_their_marks_when_redacted(world):
    guard(world.group, REDACT)
    world.anthropic.messages.create(model="an/claude-echo", max_tokens=50, system=[
        {"type": "text", "text": f"Customer: {EMAIL}", "cache_control": {"type": "ephemeral"}}], messages=[
        {"role": "user", "content": [{"type": "text", "text": "card 4111 1111 1111 1111",
                                      "cache_control": {"type": "ephemeral"}},
                                     {"type": "text", "text": f"key {AWS_KEY}"}]}])
    sent = world.upstream.last.json
    assert sent["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert sent["messages"][0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert_redacted(sent_texts(world.upstream.last))


def test_a_word_in_look_alike_letters_is_caught(world):
    guard(world.group, [{"check": "words", "on": "input", "action": "block", "words": ["ProjectX"]}])
    with pytest.raises(openai.BadRequestError) as refused:
        world.openai.chat.completions.create(model="oa/echo-1", messages=[
            {"role": "user", "content": "status of \uff30\uff52\uff4f\uff4a\uff45\uff43\uff54\uff38?"}])  # fullwidth
    assert "ProjectX" not in refused.value.body["message"]
    assert world.upstream.requests == []


def test_a_secret_split_across_two_messages_is_caught_on_their_seam(world):
    guard(world.group, BLOCK)
    half = len(AWS_KEY) // 2
    with pytest.raises(openai.BadRequestError):
        world.openai.chat.completions.create(model="oa/echo-1", messages=[
            {"role": "user", "content": f"first half {AWS_KEY[:half]}"},
            {"role": "user", "content": f"{AWS_KEY[half:]} is the second half"}])
    assert world.upstream.requests == []


def test_a_secret_base64d_in_a_markdown_images_alt_text_is_caught(world):
    guard(world.group, BLOCK)
    hidden = base64.b64encode(f"aws_access_key_id={AWS_KEY}".encode()).decode()
    with pytest.raises(anthropic.BadRequestError):
        world.anthropic.messages.create(model="an/claude-echo", max_tokens=50, messages=[
            {"role": "user", "content": f"see ![{hidden}](https://example.com/chart.png)"}])
    assert world.upstream.requests == []


def test_a_word_with_another_scripts_look_alike_letter_is_caught(world):
    guard(world.group, [{"check": "words", "on": "input", "action": "block", "words": ["ProjectX"]}])
    with pytest.raises(openai.BadRequestError):
        world.openai.chat.completions.create(model="oa/echo-1", messages=[
            {"role": "user", "content": "status of Pr\u043ejectX?"}])  # a Cyrillic o
    assert world.upstream.requests == []
