"""Gemini models through the running gateway, on the Gemini API and on Vertex AI, read by the official SDKs: the
chat form translated to generateContent and its stream read back (whole and streamed), `/v1/messages` through
the chat form, embeddings, usage metered once, RESOURCE_EXHAUSTED falling through to the next model, a reply
cut midway returned in part, a prompt Gemini blocks a refusal in each surface's shape. (The translation is
gateway/formats/gemini/'s.)"""

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
from tests.gateway.upstream.google.fake import API_KEY, GEMINI, PROJECT, REGION
from tests.gateway.upstream.google.support import fake_google, key_file  # noqa: F401 — the fixtures
from tests.servers import wait_for_quiet_database, wait_for_usage

PROMPT = [{"role": "user", "content": "one two three four five six seven eight"}]
ECHO = "Echo: one two three four five six seven eight"


@pytest.fixture
def world(transactional_db, live_gateway, fake_google, key_file):  # noqa: F811
    account = AccountFactory(group=AccountGroupFactory(name="team", api_access=True), email="dev@example.test")
    key = api_key_for(account)
    gem = ModelServerFactory(name="gem", kind="gemini", base_url=fake_google.url, api_key=API_KEY, is_remote=True,
                             read_timeout=5.0)
    gcp = ModelServerFactory(name="gcp", kind="vertex", base_url=fake_google.url, region=REGION, gcp_project=PROJECT,
                             gcp_credentials_file=key_file, is_remote=True, read_timeout=5.0)
    flash = ModelFactory(server=gem, name=GEMINI, is_default=True)
    on_vertex = ModelFactory(server=gcp, name=GEMINI)
    ModelFactory(server=gem, name="gemini-embedding-001", supports_chat=False, supports_embeddings=True)
    ModelFactory(server=gcp, name="text-embedding-005", supports_chat=False, supports_embeddings=True)
    yield SimpleNamespace(
        base=live_gateway, google=fake_google, account=account, key=key, flash=flash, on_vertex=on_vertex,
        openai=openai.OpenAI(base_url=f"{live_gateway}/v1", api_key=key, max_retries=0),
        anthropic=anthropic.Anthropic(base_url=live_gateway, api_key=key, max_retries=0),
    )
    wait_for_quiet_database()


@pytest.mark.parametrize("server", ["gem", "gcp"])
def test_chat_completions_whole_and_streamed_parse_in_the_openai_sdk(world, server):
    model = f"{server}/{GEMINI}"
    completion = world.openai.chat.completions.create(model=model, messages=PROMPT, max_tokens=50)
    assert (completion.choices[0].message.content, completion.choices[0].finish_reason) == (ECHO, "stop")
    assert completion.model == model and completion.usage.prompt_tokens == 4
    chunks = list(world.openai.chat.completions.create(model=model, messages=PROMPT, stream=True,
                                                       stream_options={"include_usage": True}))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == ECHO
    assert chunks[-1].usage.completion_tokens == 9
    call = world.google.calls()[-1]
    assert call.path.endswith(f"/models/{GEMINI}:streamGenerateContent") and call.query == "alt=sse"
    assert call.json["contents"] == [{"role": "user", "parts": [{"text": PROMPT[0]["content"]}]}]
    assert call.problem is None


def test_messages_to_a_gemini_model_go_through_the_chat_form(world):
    message = world.anthropic.messages.create(model=f"gem/{GEMINI}", max_tokens=50, messages=PROMPT)
    assert (message.content[0].text, message.stop_reason) == (ECHO, "end_turn")
    assert world.google.calls()[-1].json["generationConfig"]["maxOutputTokens"] == 50


def test_embeddings_on_both_kinds(world):
    for model, method in (("gem/gemini-embedding-001", "batchEmbedContents"), ("gcp/text-embedding-005", "predict")):
        reply = world.openai.embeddings.create(model=model, input=["one two", "three"])
        assert [d.embedding[0] for d in reply.data] == [7.0, 5.0]
        assert world.google.calls()[-1].path.endswith(f":{method}")


def test_usage_is_metered_once(world):
    world.openai.chat.completions.create(model=f"gem/{GEMINI}", messages=PROMPT, max_tokens=50)
    [record] = wait_for_usage(world.account)
    assert (record.input_tokens, record.output_tokens, record.surface) == (4, 9, "chat.completions")


def test_resource_exhausted_falls_through_to_the_next_model(world):
    ModelFallbackFactory(model=world.flash, fallback=world.on_vertex)
    world.google.configure(fail_status="RESOURCE_EXHAUSTED", fail_code=429, fail_times=1)
    completion = world.openai.chat.completions.create(model=f"gem/{GEMINI}", messages=PROMPT, max_tokens=50)
    assert completion.model == f"gcp/{GEMINI}"
    assert [c.path.startswith("/v1beta/") for c in world.google.calls()] == [True, False]


def test_a_reply_cut_midway_comes_back_in_part(world):
    world.google.configure(cut_after_tokens=2)
    r = httpx.post(f"{world.base}/v1/chat/completions", headers={"Authorization": f"Bearer {world.key}"},
                   timeout=30, json={"model": f"gem/{GEMINI}", "messages": PROMPT})
    assert r.status_code == 502, r.text
    assert r.json()["partial"]["choices"][0]["message"]["content"] == "Echo: one "


@pytest.mark.django_db
def test_test_connection_calls_a_gemini_model(fake_google):  # noqa: F811
    from gateway.console import server_check

    server = ModelServerFactory(name="gem", kind="gemini", base_url=fake_google.url, api_key=API_KEY, is_remote=True)
    ModelFactory(server=server, name=GEMINI)
    outcome = server_check.connection_test(row=server)
    assert outcome.ok, outcome.message
    assert outcome.message.startswith(f"Chat call to gem/{GEMINI} answered: “Echo: This is a connection test")


def test_a_prompt_gemini_blocks_is_a_refusal_in_each_surfaces_shape(world):
    """promptFeedback.blockReason and no candidate: the chat form's refusal with finish_reason content_filter,
    Anthropic's `refusal` stop, and an incomplete Response for content_filter, each as its SDK reads it."""
    world.google.configure(block_reason="SAFETY")
    model = f"gem/{GEMINI}"
    completion = world.openai.chat.completions.create(model=model, messages=PROMPT, max_tokens=50)
    assert completion.choices[0].finish_reason == "content_filter"
    assert completion.choices[0].message.refusal == "The prompt was blocked (SAFETY)."
    message = world.anthropic.messages.create(model=model, max_tokens=50, messages=PROMPT)
    assert message.stop_reason == "refusal" and message.content[0].text == "The prompt was blocked (SAFETY)."
    response = world.openai.responses.create(model=model, input=PROMPT[0]["content"], max_output_tokens=50)
    assert (response.status, response.incomplete_details.reason) == ("incomplete", "content_filter")
