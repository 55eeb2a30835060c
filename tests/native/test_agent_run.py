"""`POST /api/v1/agent/run` through a running gateway: a task run to completion in steps (a step is
one model call and the tool calls it asks for), bounded by `max_steps` (at most
AGENT_RUN_MAX_STEPS) and by AGENT_RUN_TIMEOUT_SECONDS; the 5-per-minute ceiling; metering."""

import time

import httpx
import pytest

from tests.factories import api_key_for
from tests.native.agent_support import AGENT_RUN, agent_fixture, mcp_server_fixture  # noqa: F401
from tests.servers import wait_for_usage

ADD = {"name": "calc__add", "arguments": {"a": 2, "b": 3}}
WEATHER = {"name": "calc__weather", "arguments": {"city": "Porto"}}


def test_a_task_runs_to_completion_with_its_steps(agent):
    agent.upstream.configure(tool_script=[ADD, WEATHER])
    r = agent.api.post(AGENT_RUN, {"task": "Add two and three, then look up the weather."})
    assert r.status_code == 200, r.text
    body = r.json()
    assert set(body) == {"result", "steps", "finished", "stop_reason", "request_id", "model", "usage",
                         "skipped_servers"}
    assert body["steps"] == [
        {"type": "tool_call", "name": "calc__add", "arguments": {"a": 2, "b": 3}, "result": "5"},
        {"type": "tool_call", "name": "calc__weather", "arguments": {"city": "Porto"}, "result": "Porto: sunny, 21 C"},
        {"type": "message", "content": "Tool said: Porto: sunny, 21 C"},
    ]
    assert body["result"] == "Tool said: Porto: sunny, 21 C"
    assert (body["finished"], body["stop_reason"]) == (True, "completed")
    assert body["model"] == "oa/echo-1"
    assert body["request_id"] == r.headers["X-Request-Id"]
    assert agent.mcp.calls == [("add", {"a": 2, "b": 3}), ("weather", {"city": "Porto"})]
    assert agent.upstream.requests[0].json["messages"] == [
        {"role": "user", "content": "Add two and three, then look up the weather."}]


def test_a_run_that_reaches_its_step_bound_is_unfinished(agent):
    agent.upstream.configure(tool_script=[ADD] * 10)
    body = agent.api.post(AGENT_RUN, {"task": "Keep adding.", "max_steps": 3}).json()
    assert (body["finished"], body["stop_reason"]) == (False, "max_steps")
    assert [s["type"] for s in body["steps"]] == ["tool_call"] * 3
    assert len(agent.upstream.requests) == 3
    assert len(agent.mcp.calls) == 3


def test_a_run_of_exactly_max_steps_finishes(agent):
    agent.upstream.configure(tool_script=[ADD, ADD])
    body = agent.api.post(AGENT_RUN, {"task": "Add twice.", "max_steps": 3}).json()
    assert (body["finished"], body["stop_reason"]) == (True, "completed")
    assert [s["type"] for s in body["steps"]] == ["tool_call", "tool_call", "message"]


def test_max_steps_defaults_to_the_setting(agent, settings):
    assert settings.AGENT_RUN_MAX_STEPS == 10  # the gateway process runs with the default
    agent.upstream.configure(tool_script=[ADD] * 20)
    body = agent.api.post(AGENT_RUN, {"task": "Keep adding."}).json()
    assert body["stop_reason"] == "max_steps"
    assert len(body["steps"]) == 10


@pytest.mark.parametrize("max_steps, status", [(10, 200), (11, 422), (0, 422), (-1, 422), ("many", 422)])
def test_max_steps_is_at_most_the_setting(agent, max_steps, status):
    r = agent.api.post(AGENT_RUN, {"task": "Say hi.", "max_steps": max_steps, "tools": []})
    assert r.status_code == status, r.text
    if status == 422:
        assert list(r.json()["errors"]) == ["max_steps"]


def test_the_task_is_at_most_32000_characters(agent):
    assert agent.api.post(AGENT_RUN, {"task": "x" * 32000, "tools": []}).status_code == 200
    r = agent.api.post(AGENT_RUN, {"task": "x" * 32001, "tools": []})
    assert r.status_code == 422 and list(r.json()["errors"]) == ["task"]


def test_a_model_that_does_not_exist_is_400(agent):
    r = agent.api.post(AGENT_RUN, {"task": "hi", "model": "nope"})
    assert r.status_code == 400 and set(r.json()) == {"detail"}


def test_every_model_failing_is_503_with_retry_after(agent):
    agent.upstream.configure(fail_status=529)
    r = agent.api.post(AGENT_RUN, {"task": "hi"})
    assert r.status_code == 503
    assert r.headers["Retry-After"] == "1" and r.json()["retry_after"] == 1


def test_the_usage_of_every_step_is_metered(agent):
    agent.upstream.configure(tool_script=[ADD])
    r = agent.api.post(AGENT_RUN, {"task": "one two three"})
    usage = r.json()["usage"]
    records = wait_for_usage(agent.world.account, 2)
    assert len(records) == 2 and {u.surface for u in records} == {"native_agent"}
    assert sum(u.input_tokens + u.output_tokens for u in records) == usage["total_tokens"] > 0


def test_the_5th_run_in_a_minute_is_answered_and_the_6th_is_429(agent):
    for n in range(1, 6):
        r = agent.api.post(AGENT_RUN, {"task": "hi", "tools": []})
        assert r.status_code == 200, (n, r.text)
    assert (r.headers["X-RateLimit-Limit"], r.headers["X-RateLimit-Remaining"]) == ("5", "0")
    r = agent.api.post(AGENT_RUN, {"task": "hi", "tools": []})
    assert r.status_code == 429
    assert r.json() == {"message": "Too Many Attempts."}
    assert 1 <= int(r.headers["Retry-After"]) <= 60
    assert len(agent.upstream.requests) == 5


def test_a_run_that_takes_too_long_stops_with_the_steps_done(agent):
    """A gateway whose runs may take 1 second; each model call takes 0.4."""
    from tests.servers import web_process

    headers = {"Authorization": f"Bearer {api_key_for(agent.world.account)}"}
    with web_process(REGISTRY_TTL_SECONDS="0", AGENT_RUN_TIMEOUT_SECONDS="1") as base:
        httpx.post(base + AGENT_RUN, json={"task": "Warm up."}, headers=headers, timeout=30)  # a first call is slow
        agent.upstream.configure(tool_script=[ADD] * 10, latency_ms=400)
        started = time.monotonic()
        r = httpx.post(base + AGENT_RUN, json={"task": "Keep adding."}, timeout=30, headers=headers)
        took = time.monotonic() - started
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["finished"], body["stop_reason"]) == (False, "timeout")
    assert 1 <= len(body["steps"]) <= 3
    assert took < 3


def test_a_quota_reached_between_steps_stops_the_run_unfinished(agent):
    agent.world.group.daily_tokens = 5
    agent.world.group.save()
    agent.upstream.configure(tool_script=[ADD] * 10)
    r = agent.api.post(AGENT_RUN, {"task": "one two three four"})  # step 1: 4 read + 3 written
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["finished"], body["stop_reason"]) == (False, "quota")
    assert [s["type"] for s in body["steps"]] == ["tool_call"]
    assert len(agent.upstream.requests) == 1
    [record] = wait_for_usage(agent.world.account, 1)
    assert record.input_tokens + record.output_tokens == body["usage"]["total_tokens"] == 7
    assert agent.api.post(AGENT_RUN, {"task": "again"}).status_code == 403  # the next request is refused


def test_the_steps_of_a_run_the_client_gave_up_on_are_metered(agent):
    """Each model call takes 0.4 seconds; the client waits 2.5 seconds for a run of 10 steps."""
    from gateway.models import UsageRecord

    agent.api.post(AGENT_RUN, {"task": "Warm up."})  # a first call of the gateway process is slow
    agent.upstream.configure(tool_script=[ADD] * 20, latency_ms=400)
    with pytest.raises(httpx.TimeoutException):
        httpx.post(agent.world.base + AGENT_RUN, json={"task": "one two three", "max_steps": 10}, timeout=2.5,
                   headers={"Authorization": f"Bearer {agent.world.key}", "X-Request-Id": "gave-up-1"})
    time.sleep(0.3)
    sent = len(agent.upstream.requests) - 1  # the model calls of the run
    time.sleep(1.5)  # the run was cancelled with the connection: no later step comes
    records = list(UsageRecord.objects.filter(request_id="gave-up-1"))
    assert 2 <= len(records) <= sent <= 7 and len(agent.upstream.requests) - 1 == sent
    assert {u.surface for u in records} == {"native_agent"}
    assert all(u.input_tokens > 0 and u.output_tokens == 3 for u in records)
