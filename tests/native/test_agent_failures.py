"""Provider failures on `POST /api/v1/agent/chat` (spec 7.3), each row through a running gateway:
when every model of the chain fails retryably the answer is 503 with `Retry-After` and
`retry_after`, `detail` ending with when to retry, whatever the provider sent; a provider's own
refusal keeps its status. Also a fallback taking over, and a reply cut midway."""

import httpx
import pytest

from gateway.models import UsageRecord
from tests.factories import ModelFactory, ModelFallbackFactory, ModelServerFactory
from tests.native.agent_support import AGENT_CHAT, agent_fixture, mcp_server_fixture  # noqa: F401
from tests.servers import wait_for_usage

HELLO = {"message": "one two three", "tools": []}


def assert_retry_later(r, retry_after):
    assert r.status_code == 503, r.text
    assert r.headers["Retry-After"] == str(retry_after)
    body = r.json()
    assert set(body) == {"detail", "retry_after"}
    assert body["retry_after"] == retry_after
    assert body["detail"].endswith(f"retry in {retry_after} seconds.")


@pytest.mark.parametrize("status, retry_after", [
    (429, 1),  # rate limit (the upstream asks for 1 second)
    (529, 1),  # overloaded
    (503, 1),
    (500, 10),  # a server error without Retry-After: the gateway's own wait
    (502, 10),
    (401, 10),  # the provider refused the key
    (403, 10),
    (402, 10),  # used-up provider quota
])
def test_every_model_failing_retryably_is_503_with_retry_after(agent, status, retry_after):
    agent.upstream.configure(fail_status=status)
    assert_retry_later(agent.api.post(AGENT_CHAT, HELLO), retry_after)


def test_a_missing_provider_key_is_503(agent):
    cloud = ModelServerFactory(name="cloud", kind="openai", base_url=f"{agent.upstream.url}/v1", is_remote=True,
                               api_key="")
    ModelFactory(server=cloud, name="big-1")
    agent.world.default.enabled = False  # no default to fall back on
    agent.world.default.save()
    assert_retry_later(agent.api.post(AGENT_CHAT, {**HELLO, "model": "cloud/big-1"}), 10)
    assert agent.upstream.requests == []


def test_an_unreachable_model_server_is_503(agent):
    agent.world.oa.base_url = "http://127.0.0.1:9/v1"  # nothing listens on the discard port
    agent.world.oa.save()
    assert_retry_later(agent.api.post(AGENT_CHAT, HELLO), 10)


def test_a_provider_refusal_keeps_its_status(agent):
    agent.upstream.configure(fail_status=400)
    r = agent.api.post(AGENT_CHAT, HELLO)
    assert r.status_code == 400
    assert r.json() == {"detail": "Bad Request (injected by the test upstream)"}
    assert "Retry-After" not in r.headers


def test_a_provider_refusal_is_not_answered_by_another_model(agent):
    other = ModelServerFactory(name="an", kind="anthropic", base_url=agent.upstream.url)
    claude = ModelFactory(server=other, name="claude-echo")
    ModelFallbackFactory(model=agent.world.default, fallback=claude)
    agent.upstream.configure(fail_status=422, fail_paths=["/v1/chat/completions"])
    r = agent.api.post(AGENT_CHAT, HELLO)
    assert r.status_code == 422 and set(r.json()) == {"detail"}
    assert [q.path for q in agent.upstream.requests] == ["/v1/chat/completions"]


def test_a_fallback_answers_when_the_model_fails_retryably(agent):
    other = ModelServerFactory(name="an", kind="anthropic", base_url=agent.upstream.url)
    claude = ModelFactory(server=other, name="claude-echo")
    ModelFallbackFactory(model=agent.world.default, fallback=claude)
    agent.upstream.configure(fail_status=529, fail_paths=["/v1/chat/completions"])
    r = agent.api.post(AGENT_CHAT, HELLO)
    assert r.status_code == 200
    assert r.json()["model"] == "an/claude-echo"
    assert r.json()["reply"] == "Echo: one two three"


def test_the_tool_loop_goes_on_with_the_model_that_answered(agent):
    """The Anthropic-kind fallback takes over in round 1 and answers round 2 after the tool ran."""
    other = ModelServerFactory(name="an", kind="anthropic", base_url=agent.upstream.url)
    claude = ModelFactory(server=other, name="claude-echo")
    ModelFallbackFactory(model=agent.world.default, fallback=claude)
    agent.upstream.configure(fail_status=503, fail_paths=["/v1/chat/completions"], tool_name="calc__add",
                             tool_arguments={"a": 1, "b": 4})
    r = agent.api.post(AGENT_CHAT, {"message": "add", "tools": ["calc__add"]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["tool_calls"] == [{"name": "calc__add", "arguments": {"a": 1, "b": 4}, "result": "5"}]
    assert body["reply"] == "Tool said: 5"
    assert body["model"] == "an/claude-echo"
    paths = [q.path for q in agent.upstream.requests]
    assert paths == ["/v1/chat/completions", "/v1/messages", "/v1/messages"]


def test_a_reply_cut_midway_is_502_with_what_arrived_and_is_metered(agent):
    agent.upstream.configure(cut_after_tokens=2)
    r = agent.api.post(AGENT_CHAT, HELLO)
    assert r.status_code == 502
    assert r.json()["partial"] == "Echo: one "

    [record] = wait_for_usage(agent.world.account, 1)
    assert record.surface == "native_agent" and record.output_tokens > 0


def test_a_reply_that_stalls_is_504_with_what_arrived(agent):
    agent.upstream.configure(stall_after_tokens=1, stall_seconds=5)
    r = httpx.post(agent.world.base + AGENT_CHAT, json=HELLO, headers={"Authorization": f"Bearer {agent.world.key}"},
                   timeout=30)
    assert r.status_code == 504
    assert r.json() == {"detail": "The model stopped answering mid-reply.", "partial": "Echo: "}


def test_failures_are_not_metered(agent):
    agent.upstream.configure(fail_status=429)
    agent.api.post(AGENT_CHAT, HELLO)
    agent.upstream.configure(fail_status=400)
    agent.api.post(AGENT_CHAT, HELLO)
    import time

    time.sleep(0.2)
    assert not UsageRecord.objects.filter(account=agent.world.account).exists()
