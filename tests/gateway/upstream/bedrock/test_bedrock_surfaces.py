"""Bedrock behind the surfaces that always go through the chat form: `/v1/responses` (whole and streamed, read by
the official SDK) and native chat (`/api/v1/chat`), for a Claude model and a Converse one, metered once each; and
the model call's trace span naming its provider `aws.bedrock` (OpenTelemetry's GenAI name for it)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import httpx
import openai
import pytest

from tests.asgi import call
from tests.factories import AccountFactory, AccountGroupFactory, ModelFactory, ModelServerFactory, api_key_for
from tests.gateway.telemetry.test_traces import by_kind, exported  # noqa: F401 — a fixture among them
from tests.gateway.upstream.bedrock.fake import ACCESS_KEY, CLAUDE, REGION, SECRET_KEY
from tests.gateway.upstream.bedrock.support import fake_bedrock  # noqa: F401 — the fixture
from tests.native.conftest import sse_events
from tests.servers import wait_for_quiet_database, wait_for_usage

NOVA = "amazon.nova-lite-v1:0"


def bedrock_server(fake):
    aws = ModelServerFactory(name="aws", kind="bedrock", base_url=fake.url, region=REGION, is_remote=True,
                             aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY, read_timeout=5.0)
    ModelFactory(server=aws, name=CLAUDE, is_default=True)
    ModelFactory(server=aws, name=NOVA)
    return aws


@pytest.fixture
def world(transactional_db, live_gateway, fake_bedrock):  # noqa: F811
    account = AccountFactory(group=AccountGroupFactory(name="team", api_access=True), email="dev@example.test")
    key = api_key_for(account)
    bedrock_server(fake_bedrock)
    yield SimpleNamespace(account=account, bedrock=fake_bedrock,
                          openai=openai.OpenAI(base_url=f"{live_gateway}/v1", api_key=key, max_retries=0),
                          api=httpx.Client(base_url=live_gateway, headers={"Authorization": f"Bearer {key}"},
                                           timeout=30))
    wait_for_quiet_database()


@pytest.mark.parametrize("model, path", [(CLAUDE, "invoke-with-response-stream"), (NOVA, "converse-stream")])
def test_responses_whole_and_streamed_and_native_chat_reach_both_kinds_of_bedrock_model(world, model, path):
    public = f"aws/{model}"
    whole = world.openai.responses.create(model=public, input="hello bedrock")
    assert (whole.model, whole.output_text, whole.status) == (public, "Echo: hello bedrock", "completed")
    with world.openai.responses.create(model=public, input="hello bedrock", stream=True) as stream:
        events = list(stream)
    assert events[-1].type == "response.completed"
    assert events[-1].response.output_text == "Echo: hello bedrock"
    events = sse_events(world.api.post("/api/v1/chat", json={"message": "hello bedrock", "model": public}))
    assert [name for name, _ in events][0] == "meta" and events[0][1]["model"] == public
    assert "".join(p["text"] for name, p in events if name == "delta") == "Echo: hello bedrock"
    assert events[-1][0] == "done"
    calls = world.bedrock.calls()
    assert [c.path.rsplit("/", 1)[-1] for c in calls] == [path] * 3 and all(c.problem is None for c in calls)
    records = wait_for_usage(world.account, 3)
    assert [(r.surface, r.model) for r in records] == [("responses", public)] * 2 + [("native_chat", public)]


def test_a_bedrock_call_s_span_names_the_provider_aws_bedrock(transactional_db, settings, fake_bedrock,  # noqa: F811
                                                              exported):  # noqa: F811
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "v1": 1000}
    key = api_key_for(AccountFactory(group=AccountGroupFactory(api_access=True)))
    bedrock_server(fake_bedrock)
    status, _, body = call("POST", "/v1/chat/completions", headers=[
        (b"authorization", f"Bearer {key}".encode()), (b"content-type", b"application/json")],
        body=json.dumps({"model": f"aws/{NOVA}", "messages": [{"role": "user", "content": "hi"}]}).encode())
    assert status == 200, body
    (attempt,) = by_kind(exported, "CLIENT")
    assert attempt.attributes["gen_ai.provider.name"] == "aws.bedrock"
    assert attempt.attributes["gen_ai.request.model"] == NOVA
