"""Gemini CLI through the gateway's Gemini surface, with the gateway key, against each kind of model server that
can answer it: a Gemini server (the fake Gemini API, a same-format pass-through), an OpenAI-compatible one and an
Anthropic one (the reference upstream, the call translated both ways).

Each server is scripted to make Gemini CLI call its write_file tool once and to answer the tool's result with
"Tool said: ...", which Gemini CLI prints; it writes the file for real. Gemini CLI speaks only Gemini's API
(tests/clients/gemini_cli_support.py): POST /v1beta/models/{model}:streamGenerateContent?alt=sse, the key in
x-goog-api-key, the model id in the path as given, a gateway id's slash included (`models/oa/echo-1:...`)."""

import json
from types import SimpleNamespace

import pytest

from tests.clients.claude_code_support import differences
from tests.clients.gemini_cli_support import (
    FILE_NAME,
    FILE_TEXT,
    MODEL,
    TOOL_ARGUMENTS,
    TOOL_NAME,
    comparable,
    run_gemini,
    tool_turns,
)
from tests.clients.gemini_fake import fake_gemini
from tests.compat.conftest import world  # noqa: F401 — the fixture: the live gateway, an account, servers oa and an
from tests.factories import ModelFactory, ModelServerFactory
from tests.servers import wait_for_usage
from tests.upstream.anthropic_wire import blocks_text
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture `world` uses

pytestmark = pytest.mark.serial

SERVER_KEY = "AIza-the-gateway-s-own-key-for-gemini"
STRAIGHT_KEY = "AIza-straight-at-the-fake"
GEMINI_PATH = f"/v1beta/models/{MODEL}:streamGenerateContent"
# (the model id Gemini CLI is given, the kind of server behind it, the id the gateway meters the call under).
# The Gemini server's model is called by its bare name, as Gemini CLI calls Gemini: it picks its request by the
# name (a thinking budget for gemini-2.5-flash; none for a name it does not know, such as gem/gemini-2.5-flash).
CASES = [(MODEL, "gemini", f"gem/{MODEL}"), ("oa/echo-1", "openai", "oa/echo-1"),
         ("an/claude-echo", "anthropic", "an/claude-echo")]


@pytest.fixture
def scripted(world):  # noqa: F811
    """The `world` with a Gemini server `gem` (the fake Gemini API, its key the gateway's own) beside `oa` and
    `an`; every server scripted to call write_file on the first round of a conversation."""
    with fake_gemini() as gemini:
        gem = ModelServerFactory(name="gem", kind="gemini", base_url=gemini.url, api_key=SERVER_KEY, is_remote=True,
                                 read_timeout=30.0)
        ModelFactory(server=gem, name=MODEL)
        gemini.configure(key=SERVER_KEY, tool_name=TOOL_NAME, tool_arguments=TOOL_ARGUMENTS)
        world.upstream.configure(tool_name=TOOL_NAME, tool_arguments=TOOL_ARGUMENTS)
        yield SimpleNamespace(**vars(world), gemini=gemini)


def assert_ran(run):
    assert run.returncode == 0, f"gemini exited {run.returncode}:\n{run.stderr}\n{run.stdout}"
    assert run.outside == []
    assert (run.work / FILE_NAME).read_text() == FILE_TEXT
    assert run.stdout.startswith("Tool said: ") and run.written() in run.stdout, run.stdout


def assert_gemini_round_trip(run, requests):
    """What the fake Gemini received: two streamed calls, the second carrying the call and its result."""
    assert [(r.method, r.path, r.query) for r in requests] == [("POST", GEMINI_PATH, "alt=sse")] * 2
    assert tool_turns(requests[0].json) == ([], [])
    calls, results = tool_turns(requests[1].json)
    assert [(c["name"], c["args"]) for c in calls] == [(TOOL_NAME, TOOL_ARGUMENTS)]
    assert [(r["id"], r["name"]) for r in results] == [(calls[0]["id"], TOOL_NAME)]
    assert results[0]["response"] == {"output": f"{run.written()}\n{FILE_TEXT}"}
    assert run.stdout == f"Tool said: {results[0]['response']['output']}"


def assert_openai_round_trip(run, requests):
    assert [(r.method, r.path) for r in requests] == [("POST", "/v1/chat/completions")] * 2
    first, second = (r.json for r in requests)
    assert first["model"] == "echo-1" and TOOL_NAME in [tool["function"]["name"] for tool in first["tools"]]
    call, result = second["messages"][-2:]
    assert call["role"] == "assistant" and [c["function"]["name"] for c in call["tool_calls"]] == [TOOL_NAME]
    assert json.loads(call["tool_calls"][0]["function"]["arguments"]) == TOOL_ARGUMENTS
    assert (result["role"], result["tool_call_id"]) == ("tool", call["tool_calls"][0]["id"])
    assert run.written() in result["content"]


def assert_anthropic_round_trip(run, requests):
    assert [(r.method, r.path) for r in requests] == [("POST", "/v1/messages")] * 2
    first, second = (r.json for r in requests)
    assert first["model"] == "claude-echo" and TOOL_NAME in [tool["name"] for tool in first["tools"]]
    call, result = second["messages"][-2:]
    uses = [b for b in call["content"] if b["type"] == "tool_use"]
    assert call["role"] == "assistant" and [(b["name"], b["input"]) for b in uses] == [(TOOL_NAME, TOOL_ARGUMENTS)]
    results = [b for b in result["content"] if b["type"] == "tool_result"]
    assert [b["tool_use_id"] for b in results] == [uses[0]["id"]]
    assert run.written() in blocks_text(results[0]["content"])


@pytest.mark.parametrize(("model", "kind", "metered"), CASES, ids=[kind for _model, kind, _metered in CASES])
def test_gemini_cli_runs_its_tool_through_the_gateway(scripted, model, kind, metered, tmp_path):
    run = run_gemini(scripted.base, scripted.key, model, tmp_path)
    assert_ran(run)
    if kind == "gemini":
        requests = scripted.gemini.requests
        assert {r.headers.get("x-goog-api-key") for r in requests} == {SERVER_KEY}  # never the gateway key
        assert_gemini_round_trip(run, requests)
        assert scripted.upstream.requests == []
    else:
        assert scripted.gemini.requests == []
        requests = list(scripted.upstream.requests)
        {"openai": assert_openai_round_trip, "anthropic": assert_anthropic_round_trip}[kind](run, requests)
    records = wait_for_usage(scripted.account, 2)
    assert [(record.model, record.surface) for record in records] == [(metered, "gemini")] * 2


def test_a_gemini_server_receives_what_gemini_cli_sends(scripted, tmp_path):
    """The same run straight at the fake (as at Gemini's API) and through the gateway, in the same folders: each
    call arrives as Gemini CLI sent it, field by field."""
    scripted.gemini.configure(key=STRAIGHT_KEY)
    straight = run_gemini(scripted.gemini.url, STRAIGHT_KEY, MODEL, tmp_path)
    assert_ran(straight)
    sent = scripted.gemini.requests
    assert_gemini_round_trip(straight, sent)

    scripted.gemini.reset().configure(key=SERVER_KEY, tool_name=TOOL_NAME, tool_arguments=TOOL_ARGUMENTS)
    through = run_gemini(scripted.base, scripted.key, MODEL, tmp_path)
    assert_ran(through)
    arrived = scripted.gemini.requests
    assert_gemini_round_trip(through, arrived)
    found = differences(comparable(sent), comparable(arrived))
    assert found == [], "what arrived differs from what Gemini CLI sent:\n" + "\n".join(found)
    assert through.stdout == straight.stdout


def test_gemini_cli_refused_by_the_gateway_shows_googles_error(scripted, tmp_path):
    """A key the gateway does not know: refused at once in Google's error shape, which Gemini CLI reports as it
    came (`{"error": {"code", "message", "status"}}`); no model server is called."""
    run = run_gemini(scripted.base, "AIza-not-a-gateway-key", "oa/echo-1", tmp_path)
    assert run.returncode != 0 and run.outside == []
    assert '{"error":{"code":401,' in run.stderr and '"status":"UNAUTHENTICATED"}}' in run.stderr, run.stderr
    assert scripted.upstream.requests == [] and scripted.gemini.requests == []
    assert not (run.work / FILE_NAME).exists()


def test_two_runs_listing_the_built_in_skills_in_either_order_compare_equal():
    """Gemini CLI lists its built-in skills in the order it happens to read them (two runs on a busy machine
    differed in it): the comparison puts them in name order, in the system prompt and in activate_skill, and
    still sees any other difference."""
    def run(first: str, second: str, note: str = "") -> SimpleNamespace:
        skills = "".join(f"  <skill>\n    <name>{name}</name>\n  </skill>\n" for name in (first, second))
        declaration = {"name": "activate_skill",
                       "description": f"Activates a skill (Available: '{first}', '{second}').",
                       "parametersJsonSchema": {"properties": {"name": {"enum": [first, second]}}}}
        prompt = f"<available_skills>\n{skills.rstrip()}\n</available_skills>{note}"
        return SimpleNamespace(method="POST", path="/v1beta/models/m:streamGenerateContent", query="alt=sse", json={
            "systemInstruction": {"parts": [{"text": prompt}]}, "tools": [{"functionDeclarations": [declaration]}]})

    assert differences(comparable([run("skill-creator", "antigravity-support")]),
                       comparable([run("antigravity-support", "skill-creator")])) == []
    assert differences(comparable([run("skill-creator", "antigravity-support")]),
                       comparable([run("antigravity-support", "skill-creator", " more")])) != []
