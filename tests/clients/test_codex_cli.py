"""Codex CLI through the gateway's /v1/responses with RESPONSES_TOOLS on: Codex speaks only the
Responses API, sends its function tools on every call, and runs the one the model asks for.

The reference upstream is scripted to call Codex's shell tool once (`echo hi`); Codex runs it, sends its
output back as function_call_output, and prints the model's answer ("Tool said: <the output>"). Codex runs
offline: a proxy refuses, and records, every connection beyond loopback."""

import pytest

from tests.clients.codex_support import TOOL_ARGUMENTS, TOOL_NAME, run_codex
from tests.compat.conftest import world  # noqa: F401 — the fixture: an account, servers oa and an
from tests.servers import web_process
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture `world` uses

ARGUMENTS = '{"cmd":"echo hi"}'


@pytest.fixture(scope="module")
def tools_gateway(django_db_setup, django_db_blocker):
    """A gateway process with RESPONSES_TOOLS on, on the test database."""
    with django_db_blocker.unblock():
        with web_process(REGISTRY_TTL_SECONDS="0", RESPONSES_TOOLS="true") as base:
            yield base


def assert_ran(run):
    assert run.returncode == 0, f"codex exited {run.returncode}:\n{run.stderr}\n{run.stdout}"
    assert run.outside == []


def test_codex_runs_its_shell_tool_through_an_openai_server(world, tools_gateway, tmp_path):  # noqa: F811
    world.upstream.configure(tool_script=[{"name": TOOL_NAME, "arguments": TOOL_ARGUMENTS}])
    run = run_codex(f"{tools_gateway}/v1", world.key, "oa/echo-1", tmp_path)
    assert_ran(run)
    requests = list(world.upstream.requests)
    assert [(r.method, r.path) for r in requests] == [("POST", "/v1/chat/completions")] * 2
    first, second = (r.json for r in requests)
    names = [tool["function"]["name"] for tool in first["tools"]]
    assert names[0] == TOOL_NAME and "multi_agent_v1__spawn_agent" in names  # a namespace's, flattened
    assert [m["role"] for m in first["messages"]][-1] == "user"
    call, result = second["messages"][-2:]
    assert call["role"] == "assistant" and call["content"] is None
    assert [(c["type"], c["function"]) for c in call["tool_calls"]] == \
        [("function", {"name": TOOL_NAME, "arguments": ARGUMENTS})]
    assert (result["role"], result["tool_call_id"]) == ("tool", call["tool_calls"][0]["id"])
    assert "Process exited with code 0\n" in result["content"] and result["content"].endswith("Output:\nhi\n")
    assert run.stdout == f"Tool said: {result['content']}\n"


def test_codex_runs_its_shell_tool_through_an_anthropic_server(world, tools_gateway, tmp_path):  # noqa: F811
    world.upstream.configure(tool_name=TOOL_NAME, tool_arguments=TOOL_ARGUMENTS)
    run = run_codex(f"{tools_gateway}/v1", world.key, "an/claude-echo", tmp_path)
    assert_ran(run)
    requests = list(world.upstream.requests)
    assert [(r.method, r.path) for r in requests] == [("POST", "/v1/messages")] * 2
    call, result = requests[1].json["messages"][-2:]
    assert [(b["type"], b["name"], b["input"]) for b in call["content"]] == [("tool_use", TOOL_NAME, TOOL_ARGUMENTS)]
    assert [(b["type"], b["tool_use_id"]) for b in result["content"]] == [("tool_result", call["content"][0]["id"])]
    output = result["content"][0]["content"]
    assert output.endswith("Output:\nhi\n")
    assert run.stdout == f"Tool said: {output}\n"


def test_codex_runs_a_namespaced_tool(world, tools_gateway, tmp_path):  # noqa: F811
    """The call comes back to Codex split into namespace and name, so its own handler answers it."""
    world.upstream.configure(tool_script=[{"name": "multi_agent_v1__close_agent", "arguments": {"target": "nope"}}])
    run = run_codex(f"{tools_gateway}/v1", world.key, "oa/echo-1", tmp_path)
    assert_ran(run)
    result = world.upstream.requests[1].json["messages"][-1]
    assert result["role"] == "tool" and result["content"].startswith("invalid agent id nope")


def test_codex_offering_web_search_is_told_what_to_turn_off(world, tools_gateway, tmp_path):  # noqa: F811
    run = run_codex(f"{tools_gateway}/v1", world.key, "oa/echo-1", tmp_path, web_search_off=False)
    assert run.returncode == 1 and run.outside == []
    assert "tools of type 'web_search' are not carried by this gateway" in run.stderr
    assert 'Codex CLI: web_search = \\"disabled\\" in config.toml' in run.stderr
    assert world.upstream.requests == []
