"""A Claude model on Vertex AI through the running gateway, read by the official SDKs: `/v1/messages` passed
through (whole and streamed, the body Vertex AI gets field for field the client's), `/v1/chat/completions`
translated, usage metered once, one access token for many calls, RESOURCE_EXHAUSTED falling through to the next
model of the chain, a reply cut midway returned in part; "Test connection" makes a real call."""

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
from tests.gateway.upstream.google.fake import CLAUDE, PROJECT, REGION
from tests.gateway.upstream.google.support import fake_google, key_file  # noqa: F401 — the fixtures
from tests.servers import wait_for_quiet_database, wait_for_usage

PROMPT = [{"role": "user", "content": "one two three four five six seven eight"}]
OTHER = "claude-opus-4-1@20250805"


@pytest.fixture
def world(transactional_db, live_gateway, fake_google, key_file):  # noqa: F811
    account = AccountFactory(group=AccountGroupFactory(name="team", api_access=True), email="dev@example.test")
    key = api_key_for(account)
    gcp = ModelServerFactory(name="gcp", kind="vertex", base_url=fake_google.url, region=REGION, gcp_project=PROJECT,
                             gcp_credentials_file=key_file, is_remote=True, read_timeout=5.0)
    claude = ModelFactory(server=gcp, name=CLAUDE, is_default=True)
    yield SimpleNamespace(
        base=live_gateway, google=fake_google, account=account, key=key, gcp=gcp, claude=claude,
        model=f"gcp/{CLAUDE}",
        openai=openai.OpenAI(base_url=f"{live_gateway}/v1", api_key=key, max_retries=0),
        anthropic=anthropic.Anthropic(base_url=live_gateway, api_key=key, max_retries=0),
    )
    wait_for_quiet_database()


def test_a_whole_messages_reply_parses_in_the_anthropic_sdk_and_vertex_gets_the_client_s_body(world):
    message = world.anthropic.messages.create(model=world.model, max_tokens=50, messages=PROMPT,
                                              metadata={"user_id": "u-1"}, extra_body={"temperature": 0.5})
    assert message.model == world.model
    assert message.content[0].text == "Echo: one two three four five six seven eight"
    assert message.stop_reason == "end_turn"
    [call] = world.google.calls()
    assert call.path == (f"/v1/projects/{PROJECT}/locations/{REGION}/publishers/anthropic/models/"
                         f"{CLAUDE}:streamRawPredict")
    assert call.problem is None
    assert call.json == {"max_tokens": 50, "messages": PROMPT, "temperature": 0.5, "metadata": {"user_id": "u-1"},
                         "stream": True, "anthropic_version": "vertex-2023-10-16"}


def test_a_streamed_messages_reply_with_a_tool_call_and_its_betas(world):
    world.google.configure(tool_arguments={"command": "ls"})
    tools = [{"name": "Bash", "description": "Run a command",
              "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}]
    with world.anthropic.beta.messages.stream(model=world.model, max_tokens=50, messages=PROMPT, tools=tools,
                                              betas=["interleaved-thinking-2025-05-14"]) as stream:
        final = stream.get_final_message()
    use = final.content[0]
    assert (final.stop_reason, use.type, use.name, use.input) == ("tool_use", "tool_use", "Bash", {"command": "ls"})
    call = world.google.calls()[-1]
    assert call.json["tools"] == tools and call.headers["anthropic-beta"] == "interleaved-thinking-2025-05-14"


def test_chat_completions_to_claude_on_vertex_parse_in_the_openai_sdk(world):
    completion = world.openai.chat.completions.create(model=world.model, messages=PROMPT, max_tokens=50)
    assert completion.choices[0].message.content == "Echo: one two three four five six seven eight"
    assert completion.choices[0].finish_reason == "stop" and completion.model == world.model
    stream = world.openai.chat.completions.create(model=world.model, messages=PROMPT, stream=True,
                                                  stream_options={"include_usage": True})
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == \
        completion.choices[0].message.content
    assert chunks[-1].usage.completion_tokens == 9


def test_usage_is_metered_once_and_one_token_serves_every_call(world):
    world.google.configure(cached_tokens=2)
    for _ in range(3):
        message = world.anthropic.messages.create(model=world.model, max_tokens=50, messages=PROMPT)
    assert (message.usage.input_tokens, message.usage.cache_read_input_tokens) == (6, 2)
    records = wait_for_usage(world.account, count=3)
    assert [(r.input_tokens, r.cached_input_tokens, r.output_tokens, r.surface) for r in records] == \
        [(8, 2, 9, "messages")] * 3
    assert len(world.google.token_requests()) == 1
    assert len({c.headers["authorization"] for c in world.google.calls()}) == 1


def test_resource_exhausted_falls_through_to_the_next_model_of_the_chain(world):
    other = ModelFactory(server=world.gcp, name=OTHER)
    ModelFallbackFactory(model=world.claude, fallback=other)
    world.google.configure(fail_status="RESOURCE_EXHAUSTED", fail_code=429, fail_times=1)
    message = world.anthropic.messages.create(model=world.model, max_tokens=50, messages=PROMPT)
    assert message.model == f"gcp/{OTHER}"
    assert [c.path.rpartition("/")[2] for c in world.google.calls()] == [f"{CLAUDE}:streamRawPredict",
                                                                         f"{OTHER}:streamRawPredict"]


def test_resource_exhausted_alone_is_a_503_with_google_s_retry_after(world):
    world.google.configure(fail_status="RESOURCE_EXHAUSTED", fail_code=429, retry_after="9")
    r = httpx.post(f"{world.base}/v1/messages", headers={"x-api-key": world.key}, timeout=30,
                   json={"model": world.model, "max_tokens": 20, "messages": PROMPT})
    assert r.status_code == 503 and r.headers["retry-after"] == "9", r.text
    assert r.json()["error"]["type"] == "api_error"


def test_a_reply_cut_midway_comes_back_in_part(world):
    world.google.configure(cut_after_tokens=2)
    r = httpx.post(f"{world.base}/v1/messages", headers={"x-api-key": world.key}, timeout=30,
                   json={"model": world.model, "max_tokens": 50, "messages": PROMPT})
    assert r.status_code == 502, r.text
    partial = r.json()["partial"]
    assert partial["content"] == [{"type": "text", "text": "Echo: one ", "citations": None}]
    r = httpx.post(f"{world.base}/v1/chat/completions", headers={"Authorization": f"Bearer {world.key}"},
                   timeout=30, json={"model": world.model, "messages": PROMPT})
    assert r.status_code == 502, r.text
    assert r.json()["partial"]["choices"][0]["message"]["content"] == "Echo: one "
