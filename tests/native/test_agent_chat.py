"""`POST /api/v1/agent/chat` through a running gateway: a model on the reference upstream calls
the tools of a real MCP server on loopback, gets their results, and answers; tools restricted by
name; models and quotas; the fixed message limit, the 400s of spec 7.2, the 20-per-minute
ceiling, and metering. The built-in tools: test_agent_builtin_tools.py; which MCP servers a group
sees: test_agent_mcp_servers.py."""

import time

import pytest

from tests.factories import McpServerFactory
from tests.native.agent_support import (  # noqa: F401
    AGENT_CHAT,
    agent_fixture,
    many_calls_fixture,
    mcp_server_fixture,
    offered,
)
from tests.servers import wait_for_usage

ADD = {"name": "calc__add", "arguments": {"a": 2, "b": 3}}


def test_it_calls_an_mcp_tool_and_answers_with_its_result(agent):
    agent.upstream.configure(tool_script=[ADD])
    r = agent.api.post(AGENT_CHAT, {"message": "What is 2 + 3?"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["reply"] == "Tool said: 5"
    assert body["tool_calls"] == [{"name": "calc__add", "arguments": {"a": 2, "b": 3}, "result": "5"}]
    assert agent.mcp.calls == [("add", {"a": 2, "b": 3})]
    assert body["model"] == "oa/echo-1"
    assert body["request_id"] == r.headers["X-Request-Id"]
    first, second = agent.upstream.requests
    assert "calc__add" in offered(first)
    assert second.json["messages"][-1]["role"] == "tool"
    assert second.json["messages"][-1]["content"] == "5"
    assert body["skipped_servers"] == []
    assert set(body) == {"reply", "tool_calls", "request_id", "model", "usage", "skipped_servers"}


def test_the_usage_of_every_round_is_summed_and_metered(agent):
    agent.upstream.configure(tool_script=[ADD])
    r = agent.api.post(AGENT_CHAT, {"message": "one two three"})
    usage = r.json()["usage"]
    # the upstream counts words: round 1 reads 3 and calls a tool (2 tokens: name + 2 argument pieces = 3),
    # round 2 reads 3 + the tool result "5" and answers "Tool said: 5" (3 tokens)
    assert usage == {"prompt_tokens": 3 + 4, "completion_tokens": 3 + 3, "total_tokens": 13}
    records = wait_for_usage(agent.world.account, 2)
    request_id = r.headers["X-Request-Id"]
    assert {(u.surface, u.model, u.request_id) for u in records} == {("native_agent", "oa/echo-1", request_id)}
    assert sum(u.input_tokens for u in records) == 7 and sum(u.output_tokens for u in records) == 6


def test_it_calls_tools_several_times_before_answering(agent):
    agent.upstream.configure(tool_script=[ADD, {"name": "calc__weather", "arguments": {"city": "Lisbon"}}])
    body = agent.api.post(AGENT_CHAT, {"message": "Add, then the weather."}).json()
    assert [c["name"] for c in body["tool_calls"]] == ["calc__add", "calc__weather"]
    assert body["tool_calls"][1]["result"] == "Lisbon: sunny, 21 C"
    assert body["reply"] == "Tool said: Lisbon: sunny, 21 C"
    assert agent.mcp.calls == [("add", {"a": 2, "b": 3}), ("weather", {"city": "Lisbon"})]
    assert len(agent.upstream.requests) == 3


def test_tool_rounds_are_bounded_then_the_model_must_answer(agent, settings):
    rounds = settings.AGENT_MAX_TOOL_ROUNDS  # the gateway process runs with the default, 5
    assert rounds == 5
    agent.upstream.configure(tool_script=[ADD] * 20)
    body = agent.api.post(AGENT_CHAT, {"message": "Keep adding."}).json()
    assert len(body["tool_calls"]) == rounds
    requests = agent.upstream.requests
    assert len(requests) == rounds + 1
    assert all("tool_choice" not in q.json for q in requests[:-1])
    assert requests[-1].json["tool_choice"] == "none"
    assert body["reply"] == "Tool said: 5"


def test_tool_calls_of_one_round_beyond_the_cap_are_answered_with_an_error(agent, many_calls, settings):
    most = settings.AGENT_MAX_TOOL_CALLS_PER_ROUND  # the gateway process runs with the default, 8
    assert most == 8
    r = agent.api.post(AGENT_CHAT, {"message": "add a lot", "model": "many/caller-1", "tools": ["calc__add"]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["reply"] == "done"
    assert len(body["tool_calls"]) == 12
    assert [c.get("result") for c in body["tool_calls"][:most]] == [str(i + 1) for i in range(most)]
    refused = f"Not run: at most {most} tool calls are run per round."
    assert body["tool_calls"][most:] == [{"name": "calc__add", "arguments": {"a": i, "b": 1}, "error": refused}
                                         for i in range(most, 12)]
    assert len(agent.mcp.calls) == most
    first, second = many_calls.requests
    answers = [m for m in second["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in answers] == [f"call_{i}" for i in range(12)]
    assert answers[-1]["content"] == f"Error: {refused}"


def test_a_turn_that_takes_too_long_is_504_and_what_was_used_is_metered(agent):
    """A gateway whose chat turns may take 1 second; each model call takes 0.4."""
    import httpx

    from tests.factories import api_key_for
    from tests.servers import web_process

    agent.upstream.configure(tool_script=[ADD] * 10, latency_ms=400)
    with web_process(REGISTRY_TTL_SECONDS="0", AGENT_CHAT_TIMEOUT_SECONDS="1") as base:
        r = httpx.post(base + AGENT_CHAT, json={"message": "Keep adding."}, timeout=30,
                       headers={"Authorization": f"Bearer {api_key_for(agent.world.account)}"})
        assert r.status_code == 504, r.text
        assert r.json() == {"detail": "The agent did not answer within 1 seconds."}
        assert len(agent.upstream.requests) <= 3  # of the 6 calls the turn would make
        records = wait_for_usage(agent.world.account, 1)
    assert {u.request_id for u in records} == {r.headers["X-Request-Id"]}


def test_a_failing_tool_is_reported_to_the_model_and_in_the_reply(agent):
    agent.upstream.configure(tool_script=[{"name": "calc__explode", "arguments": {}}])
    body = agent.api.post(AGENT_CHAT, {"message": "Break it."}).json()
    [call] = body["tool_calls"]
    assert call["name"] == "calc__explode" and call["arguments"] == {} and "result" not in call
    assert call["error"]
    tool_message = agent.upstream.requests[-1].json["messages"][-1]
    assert tool_message["role"] == "tool" and tool_message["content"] == f"Error: {call['error']}"


def test_a_call_to_a_tool_that_does_not_exist_is_an_error_for_the_model(agent):
    agent.upstream.configure(tool_script=[{"name": "calc__nothing", "arguments": {"x": 1}}])
    body = agent.api.post(AGENT_CHAT, {"message": "Try."}).json()
    assert body["tool_calls"] == [{"name": "calc__nothing", "arguments": {"x": 1},
                                   "error": "There is no tool named 'calc__nothing'."}]
    assert agent.mcp.calls == []


def test_the_auth_header_is_sent_and_a_wrong_one_gets_the_server_skipped(agent):
    agent.calc.auth_header_value = "wrong-secret-value"
    agent.calc.save()
    agent.upstream.configure(tool_script=[ADD])
    r = agent.api.post(AGENT_CHAT, {"message": "What is 2 + 3?"})
    assert r.status_code == 200
    body = r.json()
    assert body["skipped_servers"] == [{"server": "calc", "error": "MCP server 'calc' answered HTTP 401."}]
    assert agent.mcp.refused >= 1 and agent.mcp.calls == []
    assert "wrong-secret-value" not in r.text
    assert all(not name.startswith("calc__") for name in offered(agent.upstream.requests[0]))


def test_an_unreachable_mcp_server_is_skipped_and_reported(agent):
    from tests.servers import free_port

    McpServerFactory(name="gone", url=f"http://127.0.0.1:{free_port()}/mcp", timeout=2)
    agent.upstream.configure(tool_script=[ADD])
    r = agent.api.post(AGENT_CHAT, {"message": "What is 2 + 3?"})
    assert r.status_code == 200
    body = r.json()
    assert body["skipped_servers"] == [{"server": "gone", "error": "MCP server 'gone' could not be reached."}]
    assert body["tool_calls"][0]["result"] == "5"  # the other server still works


def test_prior_turns_go_to_the_model_before_the_message(agent):
    prior = [{"role": "user", "content": "My name is Ana."}, {"role": "assistant", "content": "Hello Ana."}]
    r = agent.api.post(AGENT_CHAT, {"message": "What is my name?", "messages": prior, "tools": []})
    assert r.status_code == 200
    assert r.json()["reply"] == "Echo: What is my name?"
    assert agent.upstream.last.json["messages"] == [*prior, {"role": "user", "content": "What is my name?"}]
    assert "tools" not in agent.upstream.last.json


# ---- choosing tools ------------------------------------------------------------------------------

def test_every_tool_is_offered_by_default_in_the_function_form(agent):
    agent.api.post(AGENT_CHAT, {"message": "hi"})
    tools = {t["function"]["name"]: t for t in agent.upstream.requests[0].json["tools"]}
    assert set(tools) == {"search_collection", "start_routine", "calc__add", "calc__weather", "calc__explode"}
    add = tools["calc__add"]
    assert add["type"] == "function"
    assert add["function"]["description"] == "Add two integers."
    assert add["function"]["parameters"]["properties"]["a"]["type"] == "integer"
    assert add["function"]["parameters"]["required"] == ["a", "b"]


@pytest.mark.parametrize("wanted, expected", [
    (["calc__add"], ["calc__add"]),
    (["calc"], ["calc__add", "calc__weather", "calc__explode"]),
    (["start_routine", "calc__weather"], ["start_routine", "calc__weather"]),
])
def test_tools_can_be_restricted_by_name(agent, wanted, expected):
    r = agent.api.post(AGENT_CHAT, {"message": "hi", "tools": wanted})
    assert r.status_code == 200, r.text
    assert sorted(offered(agent.upstream.requests[0])) == sorted(expected)


@pytest.mark.parametrize("name", ["nothing", "nothing__add", "calc__nothing"])
def test_a_tool_or_server_that_does_not_exist_is_400(agent, name):
    r = agent.api.post(AGENT_CHAT, {"message": "hi", "tools": [name]})
    assert r.status_code == 400
    assert set(r.json()) == {"detail"}
    assert name in r.json()["detail"]
    assert agent.upstream.requests == []


# ---- models ------------------------------------------------------------------------------------

@pytest.mark.parametrize("model", ["no-such-model", "oa/no-such-model", "nosuchserver/echo-1"])
def test_a_model_or_model_server_that_does_not_exist_is_400_not_the_default(agent, model):
    r = agent.api.post(AGENT_CHAT, {"message": "hi", "model": model})
    assert r.status_code == 400
    assert set(r.json()) == {"detail"} and model in r.json()["detail"]
    assert agent.upstream.requests == []


@pytest.mark.parametrize("model", ["echo-1", "oa/echo-1"])
def test_a_model_named_either_way_answers(agent, model):
    r = agent.api.post(AGENT_CHAT, {"message": "hi", "model": model, "tools": []})
    assert r.status_code == 200
    assert r.json()["model"] == "oa/echo-1"


def test_a_model_the_group_may_not_use_is_403(agent):
    agent.world.group.all_models = False
    agent.world.group.save()
    r = agent.api.post(AGENT_CHAT, {"message": "hi"})
    assert r.status_code == 403 and set(r.json()) == {"detail"}


def test_a_used_up_token_quota_is_403_with_detail(agent):
    from gateway.calls.metering import meter

    agent.world.group.daily_tokens = 10
    agent.world.group.save()
    meter(account_id=agent.world.account.pk, model="oa/echo-1", surface="messages", input_tokens=10, output_tokens=0)
    r = agent.api.post(AGENT_CHAT, {"message": "hi"})
    assert r.status_code == 403 and set(r.json()) == {"detail"}
    assert agent.upstream.requests == []


def test_a_quota_reached_between_rounds_stops_the_turn_with_403_and_meters_what_was_used(agent):
    agent.world.group.daily_tokens = 5
    agent.world.group.save()
    agent.upstream.configure(tool_script=[ADD] * 20)
    r = agent.api.post(AGENT_CHAT, {"message": "one two three four"})  # round 1: 4 read + 3 written
    assert r.status_code == 403, r.text
    assert set(r.json()) == {"detail"} and "daily ceiling of 5 tokens" in r.json()["detail"]
    assert len(agent.upstream.requests) == 1
    [record] = wait_for_usage(agent.world.account, 1)
    assert (record.input_tokens, record.output_tokens) == (4, 3)
    assert record.request_id == r.headers["X-Request-Id"]


# ---- the request ---------------------------------------------------------------------------------

def test_a_message_of_32000_characters_is_taken_and_32001_is_refused(agent):
    r = agent.api.post(AGENT_CHAT, {"message": "x" * 32000, "tools": []})
    assert r.status_code == 200
    r = agent.api.post(AGENT_CHAT, {"message": "x" * 32001, "tools": []})
    assert r.status_code == 422
    body = r.json()
    assert set(body) == {"message", "errors"} and list(body["errors"]) == ["message"]
    assert len(agent.upstream.requests) == 1


@pytest.mark.parametrize("body", [{}, {"message": ""}, {"message": 5}, {"message": "hi", "messages": "no"},
                                  {"message": "hi", "messages": [{"role": "tool", "content": "x"}]},
                                  {"message": "hi", "messages": [None]}, {"message": "hi", "tools": "calc"}])
def test_a_malformed_request_is_422(agent, body):
    r = agent.api.post(AGENT_CHAT, body)
    assert r.status_code == 422
    assert set(r.json()) == {"message", "errors"}


def test_a_body_that_is_not_json_is_400(agent):
    r = agent.api.client.post(AGENT_CHAT, content=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and set(r.json()) == {"detail"}


def test_without_a_credential_it_is_401(agent):
    import httpx

    from tests.contract import assert_native_unauthenticated

    assert_native_unauthenticated(httpx.post(agent.world.base + AGENT_CHAT, json={"message": "hi"}))


def test_the_20th_call_in_a_minute_is_answered_and_the_21st_is_429(agent):
    for n in range(1, 21):
        r = agent.api.post(AGENT_CHAT, {"message": "hi", "tools": []})
        assert r.status_code == 200, (n, r.text)
    assert (r.headers["X-RateLimit-Limit"], r.headers["X-RateLimit-Remaining"]) == ("20", "0")
    now = int(time.time())
    r = agent.api.post(AGENT_CHAT, {"message": "hi", "tools": []})
    assert r.status_code == 429
    assert r.json() == {"message": "Too Many Attempts."}
    assert (r.headers["X-RateLimit-Limit"], r.headers["X-RateLimit-Remaining"]) == ("20", "0")
    assert 1 <= int(r.headers["Retry-After"]) <= 60
    assert now < int(r.headers["X-RateLimit-Reset"]) <= now + 61
    assert len(agent.upstream.requests) == 20


def test_the_shared_counter_is_used(agent):
    """20 calls to the version endpoint (ceiling 60) leave agent chat (ceiling 20) nothing."""
    for _ in range(20):
        assert agent.api.get("/api/v1/version").status_code == 200
    r = agent.api.post(AGENT_CHAT, {"message": "hi", "tools": []})
    assert r.status_code == 429 and r.json() == {"message": "Too Many Attempts."}


def test_a_reply_in_progress_when_the_client_goes_away_is_metered_with_what_arrived(agent):
    """The model streams two tokens a second; the client gives up after 1.5 seconds, in the
    middle of the first round: the prompt and the tokens that had arrived are metered, once."""
    import httpx

    from gateway.models import UsageRecord

    agent.api.post(AGENT_CHAT, {"message": "Warm up.", "tools": []})  # a first call of the process is slow
    agent.upstream.configure(tokens_per_second=2)
    message = "one two three four five six seven eight nine ten eleven twelve"
    with pytest.raises(httpx.TimeoutException):
        httpx.post(agent.world.base + AGENT_CHAT, json={"message": message, "tools": []}, timeout=1.5,
                   headers={"Authorization": f"Bearer {agent.world.key}", "X-Request-Id": "went-away-1"})
    deadline = time.monotonic() + 5
    while not UsageRecord.objects.filter(request_id="went-away-1").exists():
        assert time.monotonic() < deadline, "the round in progress was not metered"
        time.sleep(0.05)
    time.sleep(0.5)  # nothing more comes for this request
    [record] = UsageRecord.objects.filter(request_id="went-away-1")
    assert record.surface == "native_agent" and record.input_tokens > 0
    assert 0 < record.output_tokens < len(f"Echo: {message}".split())


def test_agent_chat_and_run_also_count_on_the_general_counter(agent):
    """Spec 8.1 rule 3: the 300-per-minute counter is fed by agent calls too."""
    assert agent.api.post(AGENT_CHAT, {"message": "hi", "tools": []}).status_code == 200
    assert agent.api.post("/api/v1/agent/run", {"task": "hi", "tools": []}).status_code == 200
    listing = agent.api.get("/api/v1/conversations")
    assert (listing.headers["X-RateLimit-Limit"], listing.headers["X-RateLimit-Remaining"]) == ("300", "297")
