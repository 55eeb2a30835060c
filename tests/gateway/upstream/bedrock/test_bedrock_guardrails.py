"""A group's guardrails hold on a cloud's models too, whichever way the call reaches the cloud: `/v1/messages`
passed through to Claude on Bedrock as Anthropic's body, and the chat form translated to Converse for a model
that is not Claude. What the provider receives is redacted, and a blocked call reaches no provider."""

from __future__ import annotations

from types import SimpleNamespace

import anthropic
import openai
import pytest

from tests.compat.guard_support import AWS_KEY, BLOCK, PROMPT, REDACT, assert_redacted, guard
from tests.factories import AccountFactory, AccountGroupFactory, ModelFactory, ModelServerFactory, api_key_for
from tests.gateway.upstream.bedrock.fake import ACCESS_KEY, CLAUDE, REGION, SECRET_KEY
from tests.gateway.upstream.bedrock.support import fake_bedrock  # noqa: F401 — the fixture
from tests.servers import wait_for_quiet_database

NOVA = "amazon.nova-lite-v1:0"


@pytest.fixture
def world(transactional_db, live_gateway, fake_bedrock):  # noqa: F811
    group = AccountGroupFactory(name="careful", api_access=True)
    key = api_key_for(AccountFactory(group=group, email="dev@example.test"))
    aws = ModelServerFactory(name="aws", kind="bedrock", base_url=fake_bedrock.url, region=REGION, is_remote=True,
                             aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY, read_timeout=5.0)
    ModelFactory(server=aws, name=CLAUDE, is_default=True)
    ModelFactory(server=aws, name=NOVA)
    yield SimpleNamespace(
        group=group, bedrock=fake_bedrock,
        openai=openai.OpenAI(base_url=f"{live_gateway}/v1", api_key=key, max_retries=0),
        anthropic=anthropic.Anthropic(base_url=live_gateway, api_key=key, max_retries=0),
    )
    wait_for_quiet_database()


def test_what_claude_on_bedrock_and_converse_receive_is_redacted(world):
    guard(world.group, REDACT)
    world.anthropic.messages.create(model=f"aws/{CLAUDE}", max_tokens=50,
                                    messages=[{"role": "user", "content": PROMPT}])
    world.openai.chat.completions.create(model=f"aws/{NOVA}", messages=[{"role": "user", "content": PROMPT}])
    passed, converse = world.bedrock.calls()
    assert passed.path == f"/model/{CLAUDE}/invoke-with-response-stream"
    assert converse.path == f"/model/{NOVA}/converse-stream"
    for call in (passed, converse):
        assert_redacted(call.body.decode())


def test_a_blocked_call_reaches_no_bedrock_model(world):
    guard(world.group, BLOCK)
    leaking = [{"role": "user", "content": f"use {AWS_KEY}"}]
    with pytest.raises(anthropic.BadRequestError):
        world.anthropic.messages.create(model=f"aws/{CLAUDE}", max_tokens=50, messages=leaking)
    with pytest.raises(openai.BadRequestError):
        world.openai.chat.completions.create(model=f"aws/{NOVA}", messages=leaking)
    assert world.bedrock.calls() == []
