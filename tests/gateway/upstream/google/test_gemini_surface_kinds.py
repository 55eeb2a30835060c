"""The Gemini surface in front of each Google kind, read by google-genai through the running gateway: to a
Gemini model (on the Gemini API and on Vertex AI) the request goes as the client sent it and the reply comes
back as the server gave it; to Claude on Vertex AI it goes through the chat form. Whole and streamed replies
parse in the SDK, each call is metered once under the surface `gemini`, priced; RESOURCE_EXHAUSTED falls
through to the next model; a stream cut midway ends in Google's error."""

from __future__ import annotations

from decimal import Decimal
from types import SimpleNamespace

import pytest
from google import genai
from google.genai import errors, types

from tests.factories import (
    AccountFactory,
    AccountGroupFactory,
    ModelFactory,
    ModelFallbackFactory,
    ModelServerFactory,
    api_key_for,
)
from tests.gateway.upstream.google.fake import API_KEY, CLAUDE, GEMINI, PROJECT, REGION
from tests.gateway.upstream.google.support import fake_google, key_file  # noqa: F401 — the fixtures
from tests.servers import wait_for_quiet_database, wait_for_usage

PROMPT = "one two three four five six seven eight"
ECHO = "Echo: one two three four five six seven eight"
MODELS = {"gemini-api": f"gem/{GEMINI}", "vertex-gemini": f"gcp/{GEMINI}", "vertex-claude": f"gcp/{CLAUDE}"}


@pytest.fixture
def world(transactional_db, live_gateway, fake_google, key_file):  # noqa: F811
    account = AccountFactory(group=AccountGroupFactory(name="team", api_access=True), email="dev@example.test")
    key = api_key_for(account)
    gem = ModelServerFactory(name="gem", kind="gemini", base_url=fake_google.url, api_key=API_KEY, is_remote=True,
                             read_timeout=5.0)
    gcp = ModelServerFactory(name="gcp", kind="vertex", base_url=fake_google.url, region=REGION, gcp_project=PROJECT,
                             gcp_credentials_file=key_file, is_remote=True, read_timeout=5.0)
    prices = {"input_price": Decimal("1"), "output_price": Decimal("2")}
    flash = ModelFactory(server=gem, name=GEMINI, is_default=True, **prices)
    on_vertex = ModelFactory(server=gcp, name=GEMINI, **prices)
    ModelFactory(server=gcp, name=CLAUDE, **prices)
    options = types.HttpOptions(base_url=live_gateway, api_version="v1beta",
                                retry_options=types.HttpRetryOptions(attempts=1))
    yield SimpleNamespace(google=fake_google, account=account, flash=flash, on_vertex=on_vertex,
                          client=genai.Client(api_key=key, http_options=options))
    wait_for_quiet_database()


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_a_whole_reply_parses_and_is_metered_once_under_the_surface(world, kind):
    reply = world.client.models.generate_content(model=MODELS[kind], contents=PROMPT,
                                                 config=types.GenerateContentConfig(max_output_tokens=50))
    assert reply.text == ECHO
    assert reply.candidates[0].finish_reason == types.FinishReason.STOP
    prompt_tokens = reply.usage_metadata.prompt_token_count
    assert prompt_tokens == (8 if kind == "vertex-claude" else 4)  # each fake counts its own way
    assert reply.usage_metadata.candidates_token_count == 9
    [call] = world.google.calls()
    if kind == "vertex-claude":  # through the chat form: Anthropic's Messages body
        assert call.path.endswith(f"/publishers/anthropic/models/{CLAUDE}:streamRawPredict")
        assert (call.json["max_tokens"], call.json["messages"]) == (
            50, [{"role": "user", "content": [{"type": "text", "text": PROMPT}]}])
    else:  # as the client sent it, streamed from the server
        assert call.path.endswith(f"/models/{GEMINI}:streamGenerateContent") and call.query == "alt=sse"
        assert call.json == {"contents": [{"role": "user", "parts": [{"text": PROMPT}]}],
                             "generationConfig": {"maxOutputTokens": 50}}
    [record] = wait_for_usage(world.account)
    assert (record.surface, record.input_tokens, record.output_tokens) == ("gemini", prompt_tokens, 9)
    assert record.cost_units == (prompt_tokens * 1 + 9 * 2) * 10**4  # per million tokens, in 10^-10 units


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_a_streamed_reply_parses_in_the_sdk(world, kind):
    chunks = list(world.client.models.generate_content_stream(model=MODELS[kind], contents=PROMPT))
    assert "".join(chunk.text or "" for chunk in chunks) == ECHO
    assert chunks[-1].candidates[0].finish_reason == types.FinishReason.STOP
    assert chunks[-1].usage_metadata.candidates_token_count == 9
    [record] = wait_for_usage(world.account)
    assert (record.surface, record.output_tokens) == ("gemini", 9)


def test_resource_exhausted_falls_through_to_the_next_model(world):
    ModelFallbackFactory(model=world.flash, fallback=world.on_vertex)
    world.google.configure(fail_status="RESOURCE_EXHAUSTED", fail_code=429, fail_times=1)
    reply = world.client.models.generate_content(model=MODELS["gemini-api"], contents=PROMPT)
    assert reply.text == ECHO
    assert [c.path.startswith("/v1beta/") for c in world.google.calls()] == [True, False]
    [record] = wait_for_usage(world.account)
    assert record.model == MODELS["vertex-gemini"]


@pytest.mark.parametrize("kind", ["gemini-api", "vertex-claude"])
def test_a_stream_cut_midway_ends_in_googles_error(world, kind):
    world.google.configure(cut_after_tokens=2)
    seen = []
    with pytest.raises(errors.APIError) as raised:
        for chunk in world.client.models.generate_content_stream(model=MODELS[kind], contents=PROMPT):
            seen.append(chunk.text or "")
    assert "".join(seen) == "Echo: one "
    assert raised.value.status == "UNAVAILABLE"
