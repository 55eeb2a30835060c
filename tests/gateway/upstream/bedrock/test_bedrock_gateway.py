"""A Claude model on Bedrock through the running gateway, read by the official SDKs: `/v1/messages` passed through
(whole and streamed), `/v1/chat/completions` translated, usage metered once with the prompt cache's reads and
writes, a throttled model falling through to the next of its chain, a reply cut midway returned in part."""

from __future__ import annotations

from types import SimpleNamespace

import anthropic
import httpx
import openai
import pytest

from tests.factories import (
    AccountFactory,
    AccountGroupFactory,
    ModelFactory,
    ModelFallbackFactory,
    ModelServerFactory,
    api_key_for,
)
from tests.gateway.upstream.bedrock.fake import ACCESS_KEY, CLAUDE, PROFILE, REGION, SECRET_KEY
from tests.gateway.upstream.bedrock.support import fake_bedrock  # noqa: F401 — the fixture
from tests.servers import wait_for_quiet_database, wait_for_usage

PROMPT = [{"role": "user", "content": "one two three four five six seven eight"}]


@pytest.fixture
def world(transactional_db, live_gateway, fake_bedrock):  # noqa: F811
    account = AccountFactory(group=AccountGroupFactory(name="team", api_access=True), email="dev@example.test")
    key = api_key_for(account)
    aws = ModelServerFactory(name="aws", kind="bedrock", base_url=fake_bedrock.url, region=REGION, is_remote=True,
                             aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY, read_timeout=5.0)
    claude = ModelFactory(server=aws, name=CLAUDE, is_default=True)
    yield SimpleNamespace(
        base=live_gateway, bedrock=fake_bedrock, account=account, key=key, aws=aws, claude=claude,
        model=f"aws/{CLAUDE}",
        openai=openai.OpenAI(base_url=f"{live_gateway}/v1", api_key=key, max_retries=0),
        anthropic=anthropic.Anthropic(base_url=live_gateway, api_key=key, max_retries=0),
    )
    wait_for_quiet_database()


def test_a_whole_messages_reply_parses_in_the_anthropic_sdk(world):
    message = world.anthropic.messages.create(model=world.model, max_tokens=50, messages=PROMPT)
    assert message.model == world.model
    assert message.content[0].text == "Echo: one two three four five six seven eight"
    assert message.stop_reason == "end_turn"
    assert "amazon-bedrock-invocationMetrics" not in message.model_dump_json()
    [call] = world.bedrock.calls()
    assert call.path == f"/model/{CLAUDE}/invoke-with-response-stream" and call.problem is None
    assert call.json == {"max_tokens": 50, "messages": PROMPT, "anthropic_version": "bedrock-2023-05-31"}


def test_a_streamed_messages_reply_parses_in_the_anthropic_sdk_with_a_tool_call(world):
    world.bedrock.configure(tool_arguments={"command": "ls"})
    tools = [{"name": "Bash", "description": "Run a command",
              "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}]
    with world.anthropic.messages.stream(model=world.model, max_tokens=50, messages=PROMPT, tools=tools) as stream:
        final = stream.get_final_message()
    use = final.content[0]
    assert (final.stop_reason, use.type, use.name, use.input) == ("tool_use", "tool_use", "Bash", {"command": "ls"})
    assert world.bedrock.calls()[-1].json["tools"] == tools


def test_chat_completions_to_a_claude_model_on_bedrock_parse_in_the_openai_sdk(world):
    completion = world.openai.chat.completions.create(model=world.model, messages=PROMPT, max_tokens=50)
    assert completion.choices[0].message.content == "Echo: one two three four five six seven eight"
    assert completion.choices[0].finish_reason == "stop" and completion.model == world.model
    stream = world.openai.chat.completions.create(model=world.model, messages=PROMPT, stream=True,
                                                  stream_options={"include_usage": True})
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == completion.choices[0].message.content
    assert chunks[-1].usage.completion_tokens == 9
    sent = world.bedrock.calls()[-1].json
    assert sent["anthropic_version"] == "bedrock-2023-05-31" and "model" not in sent and "stream" not in sent


def test_usage_with_the_prompt_cache_s_reads_and_writes_is_metered_once(world):
    world.bedrock.configure(cached_tokens=2, cache_write_tokens=3)
    message = world.anthropic.messages.create(model=world.model, max_tokens=50, messages=PROMPT)
    assert (message.usage.input_tokens, message.usage.cache_read_input_tokens,
            message.usage.cache_creation_input_tokens) == (3, 2, 3)
    [record] = wait_for_usage(world.account)
    assert (record.input_tokens, record.cached_input_tokens, record.output_tokens) == (8, 2, 9)
    assert record.surface == "messages"


def test_a_throttled_model_falls_through_to_the_next_of_its_chain(world):
    profile = ModelFactory(server=world.aws, name=PROFILE)
    ModelFallbackFactory(model=world.claude, fallback=profile)
    world.bedrock.configure(fail_error="ThrottlingException", fail_status=429, fail_times=1)
    message = world.anthropic.messages.create(model=world.model, max_tokens=50, messages=PROMPT)
    assert message.model == f"aws/{PROFILE}"
    assert [c.path.split("/")[2] for c in world.bedrock.calls()] == [CLAUDE, PROFILE]


def test_a_throttled_model_alone_is_a_503_with_bedrock_s_retry_after(world):
    world.bedrock.configure(fail_error="ThrottlingException", fail_status=429, retry_after="9")
    r = httpx.post(f"{world.base}/v1/messages", headers={"x-api-key": world.key}, timeout=30,
                   json={"model": world.model, "max_tokens": 20, "messages": PROMPT})
    assert r.status_code == 503 and r.headers["retry-after"] == "9", r.text
    assert r.json()["error"]["type"] == "api_error"


def test_a_reply_cut_midway_comes_back_in_part(world):
    world.bedrock.configure(cut_after_tokens=2)
    r = httpx.post(f"{world.base}/v1/messages", headers={"x-api-key": world.key}, timeout=30,
                   json={"model": world.model, "max_tokens": 50, "messages": PROMPT})
    assert r.status_code == 502, r.text
    partial = r.json()["partial"]
    assert partial["content"] == [{"type": "text", "text": "Echo: one ", "citations": None}]
    assert partial["model"] == world.model
    r = httpx.post(f"{world.base}/v1/chat/completions", headers={"Authorization": f"Bearer {world.key}"},
                   timeout=30, json={"model": world.model, "messages": PROMPT})
    assert r.status_code == 502, r.text
    assert r.json()["partial"]["choices"][0]["message"]["content"] == "Echo: one "


def test_a_stream_with_an_exception_midway_ends_with_an_error_event(world):
    world.bedrock.configure(exception_after_tokens=2)
    r = httpx.post(f"{world.base}/v1/messages", headers={"x-api-key": world.key}, timeout=30,
                   json={"model": world.model, "max_tokens": 50, "messages": PROMPT, "stream": True})
    assert r.status_code == 200
    assert "event: message_stop" not in r.text
    last = r.text.rstrip().splitlines()[-1]
    assert last.startswith('data: {"type":"error","error":{"type":"api_error"'), last
