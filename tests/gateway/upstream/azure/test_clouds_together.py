"""The two clouds beside each other, through the running gateway: an alias whose deployments are on Bedrock
and Azure (its standby) answers from Azure while Bedrock throttles; a Claude model on Bedrock falls back to an
Azure deployment; a group's response cache keeps a Bedrock Claude reply and replays it in Anthropic's own
events without asking Bedrock again, metered as a cached call."""

from __future__ import annotations

import anthropic
import pytest

from gateway.models import UsageRecord
from tests.factories import (
    AccountFactory,
    AccountGroupFactory,
    AliasDeploymentFactory,
    AliasFactory,
    ModelFactory,
    ModelFallbackFactory,
    ModelServerFactory,
    api_key_for,
)
from tests.gateway.upstream.bedrock.fake import ACCESS_KEY, CLAUDE, REGION, SECRET_KEY
from tests.gateway.upstream.bedrock.support import fake_bedrock  # noqa: F401 — the fixture
from tests.servers import wait_for_quiet_database, wait_for_usage

NOVA = "amazon.nova-lite-v1:0"
HELLO = [{"role": "user", "content": "one two three"}]


@pytest.fixture
def clouds(cloud, fake_bedrock):  # noqa: F811 — `cloud`: the gateway with an Azure server (conftest.py)
    aws = ModelServerFactory(name="aws", kind="bedrock", base_url=fake_bedrock.url, region=REGION, is_remote=True,
                             aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY, read_timeout=5.0)
    cloud.claude = ModelFactory(server=aws, name=CLAUDE)
    cloud.nova = ModelFactory(server=aws, name=NOVA)
    cloud.bedrock = fake_bedrock
    wait_for_quiet_database()
    return cloud


def test_an_alias_over_bedrock_and_azure_answers_from_azure_while_bedrock_throttles(clouds):
    alias = AliasFactory(name="team-chat")
    AliasDeploymentFactory(alias=alias, model=clouds.nova, weight=1)
    AliasDeploymentFactory(alias=alias, model=clouds.chat, weight=0)  # a standby: tried after Bedrock
    clouds.bedrock.configure(fail_error="ThrottlingException", fail_status=429)
    wait_for_quiet_database()
    answered = [clouds.openai.chat.completions.create(model="team-chat", messages=HELLO) for _ in range(6)]
    assert {a.choices[0].message.content for a in answered} == {"Echo: one two three"}
    assert len(clouds.azure.fake.requests) == 6  # every call ended on Azure
    # Bedrock was asked first once; failing since, it goes after the standby (gateway/registry/pools.py)
    assert len(clouds.bedrock.calls()) == 1
    records = wait_for_usage(clouds.account, 6)
    assert {r.model for r in records} == {"az/gpt-4o-deployment"}


def test_a_claude_model_on_bedrock_falls_back_to_an_azure_deployment_on_both_surfaces(clouds):
    ModelFallbackFactory(model=clouds.claude, fallback=clouds.chat, position=0)
    clouds.bedrock.configure(fail_error="ServiceUnavailableException", fail_status=503)
    wait_for_quiet_database()
    completion = clouds.openai.chat.completions.create(model=f"aws/{CLAUDE}", messages=HELLO)
    assert (completion.model, completion.choices[0].message.content) == ("az/gpt-4o-deployment",
                                                                         "Echo: one two three")
    message = clouds.anthropic.messages.create(model=f"aws/{CLAUDE}", max_tokens=40, messages=HELLO)
    assert message.model == "az/gpt-4o-deployment" and message.content[0].text == "Echo: one two three"
    assert len(clouds.bedrock.calls()) == 2 and len(clouds.azure.fake.requests) == 2


def test_the_response_cache_replays_a_bedrock_claude_reply_in_anthropics_events(clouds, live_gateway):
    group = AccountGroupFactory(name="cached", api_access=True, response_cache_ttl=300)
    account = AccountFactory(group=group, email="cache@example.test")
    client = anthropic.Anthropic(base_url=live_gateway, api_key=api_key_for(account), max_retries=0)
    wait_for_quiet_database()
    first = client.messages.create(model=f"aws/{CLAUDE}", max_tokens=40, messages=HELLO)
    with client.messages.stream(model=f"aws/{CLAUDE}", max_tokens=40, messages=HELLO) as stream:
        kinds = [event.type for event in stream]
        again = stream.get_final_message()
    assert again.content[0].text == first.content[0].text == "Echo: one two three"
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert len(clouds.bedrock.calls()) == 1  # the second answer was the kept one
    records = wait_for_usage(account, 2)
    assert [r.cached for r in records] == [False, True]
    assert UsageRecord.objects.filter(account=account, cached=True).get().cost_units == 0
