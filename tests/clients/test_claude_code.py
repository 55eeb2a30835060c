"""Claude Code through the gateway's /v1/messages: what reaches the Anthropic model server is what Claude Code
sends when it calls that server straight.

Claude Code runs offline twice with the same prompt against the same scripted reference upstream: straight at
it, then through the live gateway. The upstream makes it call its Bash tool once and answers the tool's result
with "Tool said: ...", which Claude Code prints. Claude Code calls the model by the same id both times (it
writes that id into the system prompt, and picks its request shape by it), so the one thing the gateway may
change is `model`, to the server's own name when its id differs."""

import pytest

from tests.clients.claude_code_support import (
    FINAL_TEXT,
    TOOL_ARGUMENTS,
    TOOL_NAME,
    TOOL_OUTPUT,
    comparable,
    differences,
    run_claude,
    tool_turn,
)
from tests.compat.conftest import world  # noqa: F401 — the fixture: the live gateway, an account, servers oa and an
from tests.factories import ModelFactory
from tests.upstream.anthropic_wire import blocks_text
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture `world` uses

# (the model id Claude Code is given, the model's name on the `an` server)
# claude-opus-4-8, a bare id that is the server's name: Claude Code's newest request shape (mid-conversation
# system turns, the effort and mid-conversation-tool-changes betas, adaptive thinking, output_config);
# claude-sonnet-4-5: its older shape (a thinking budget, no system turns, fewer betas); an/house-coder: a
# gateway id Claude Code does not know (the newest shape again), on a server that names the model otherwise.
CASES = [("claude-opus-4-8", "claude-opus-4-8"), ("claude-sonnet-4-5", "claude-sonnet-4-5"),
         ("an/house-coder", "house-coder")]
STRAIGHT_KEY = "sk-ant-straight-at-the-upstream"


@pytest.fixture
def scripted(world):  # noqa: F811
    """The `world`, its upstream scripted to call Bash on the first round of a conversation."""
    world.upstream.configure(tool_name=TOOL_NAME, tool_arguments=TOOL_ARGUMENTS)
    return world


def straight(world, model, folder):
    """Claude Code run straight at the upstream (as at an Anthropic model server): the run and its requests."""
    world.upstream.reset().configure(tool_name=TOOL_NAME, tool_arguments=TOOL_ARGUMENTS)
    run = run_claude(world.upstream.url, STRAIGHT_KEY, model, folder)
    return run, list(world.upstream.requests)


def through(world, model, name, folder):
    """Claude Code run through the gateway, the model `name` on the `an` server: the run and what arrived."""
    ModelFactory(server=world.an, name=name)
    world.upstream.reset().configure(tool_name=TOOL_NAME, tool_arguments=TOOL_ARGUMENTS)
    run = run_claude(world.base, world.key, model, folder)
    return run, list(world.upstream.requests)


def assert_tool_round_trip(run, requests):
    """Claude Code ended well, after running the scripted tool for real and sending its output back."""
    assert run.returncode == 0, f"claude exited {run.returncode}:\n{run.stderr}\n{run.stdout}"
    assert run.stdout.splitlines()[0] == FINAL_TEXT, run.stdout
    assert tool_turn(requests[0]) == ([], [])
    uses, results = tool_turn(requests[-1])
    assert [(u["name"], u["input"]) for u in uses] == [(TOOL_NAME, TOOL_ARGUMENTS)]
    assert [r["tool_use_id"] for r in results] == [uses[0]["id"]]
    assert not results[0].get("is_error")
    assert blocks_text(results[0]["content"]).splitlines()[0] == TOOL_OUTPUT


@pytest.mark.parametrize("model", [model for model, _name in CASES])
def test_straight_at_the_upstream_claude_code_runs_the_tool(scripted, model, tmp_path):
    run, requests = straight(scripted, model, tmp_path)
    assert_tool_round_trip(run, requests)
    assert [(r.method, r.path, r.query) for r in requests] == [("POST", "/v1/messages", "beta=true")] * 2
    assert [(r.json["model"], r.headers["x-api-key"]) for r in requests] == [(model, STRAIGHT_KEY)] * 2


@pytest.mark.parametrize("model", [model for model, _name in CASES])
def test_two_straight_runs_differ_only_where_the_comparison_allows(scripted, model, tmp_path):
    """The comparison below finds no difference between two runs that cannot differ but for ids and dates,
    so a difference it finds through the gateway is the gateway's."""
    first, first_requests = straight(scripted, model, tmp_path)
    second, second_requests = straight(scripted, model, tmp_path)
    assert_tool_round_trip(first, first_requests)
    assert_tool_round_trip(second, second_requests)
    assert differences(comparable(first_requests, first.days), comparable(second_requests, second.days)) == []
    assert second.stdout == first.stdout


@pytest.mark.parametrize(("model", "name"), CASES)
def test_through_the_gateway_claude_code_runs_the_tool(scripted, model, name, tmp_path):
    run, arrived = through(scripted, model, name, tmp_path)
    assert_tool_round_trip(run, arrived)
    assert [r.json["model"] for r in arrived] == [name] * 2, [(r.method, r.path, r.query) for r in arrived]


@pytest.mark.parametrize(("model", "name"), CASES)
def test_the_model_server_receives_what_claude_code_sends(scripted, model, name, tmp_path):
    sent_run, sent = straight(scripted, model, tmp_path)
    assert_tool_round_trip(sent_run, sent)
    arrived_run, arrived = through(scripted, model, name, tmp_path)
    assert arrived_run.returncode == 0, f"claude exited {arrived_run.returncode} through the gateway:\n" + (
        arrived_run.stderr)
    # straight, the model is called by the id Claude Code was given; through the gateway it must arrive
    # under the server's name for it, and nothing else may change
    found = differences(comparable(sent, sent_run.days, model=name), comparable(arrived, arrived_run.days))
    assert found == [], "what arrived differs from what Claude Code sent:\n" + "\n".join(found)
    assert arrived_run.stdout == sent_run.stdout
