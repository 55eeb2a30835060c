"""Claude Code on Google's Vertex AI, straight and through the gateway: what reaches Vertex AI is what Claude
Code sends when it is set up for Vertex AI itself.

Claude Code runs offline twice with the same prompt against the same fake Google
(tests/gateway/upstream/google/fake.py, scripted to make it call its Bash tool once): straight at it in its
Vertex mode (CLAUDE_CODE_USE_VERTEX, its Google auth skipped), then as at an Anthropic server, through the
gateway's /v1/messages, the gateway pointing at the fake with a service account's key (its tokens from the
fake's token endpoint). Each streamRawPredict body must be the same, field by field, on the same model's path,
and so must the `anthropic-beta` header's values, compared as one set: the gateway hears Claude Code's
first-party list and keeps those Vertex AI takes (gateway/upstream/providers/google/betas.py).

What Claude Code itself words differently in its Vertex mode is put back as it words it for Anthropic's API
before comparing (`VERTEX_WORDING`): no gateway could, nor should, rewrite a client's system prompt. And Claude
Code on Vertex AI sends the web search beta on every call, for the web search it may ask for later, where the
gateway sends it with the call that holds a web search tool (tests/gateway/upstream/google/test_vertex_betas.py):
it is left out of the straight run's set when the body holds none."""

import re
from types import SimpleNamespace

import pytest

from tests.clients.claude_code_support import FINAL_TEXT, TOOL_ARGUMENTS, TOOL_NAME, comparable, differences, run_claude
from tests.factories import AccountFactory, AccountGroupFactory, ModelFactory, ModelServerFactory, api_key_for
from tests.gateway.upstream.google.fake import CLAUDE, PROJECT, REGION
from tests.gateway.upstream.google.support import fake_google, key_file  # noqa: F401 — the fixtures
from tests.servers import wait_for_quiet_database

pytestmark = pytest.mark.serial

PATH = f"/v1/projects/{PROJECT}/locations/{REGION}/publishers/anthropic/models/{CLAUDE}:streamRawPredict"
# Claude Code 2.1.332's system prompt in its Vertex mode -> the same place in its prompt to Anthropic's API (found
# by diffing the two runs): its billing line's checksum slot, its identity line (print mode names the Agent SDK,
# but not on Vertex AI), and where fast mode moves a session
VERTEX_WORDING = (
    ("cc_entrypoint=sdk-cli; cch=00000;", "cc_entrypoint=sdk-cli;"),
    ("You are Claude Code, Anthropic's official CLI for Claude.",
     "You are a Claude agent, built on Anthropic's Claude Agent SDK."),
    ("switches the session to a model that does.", "switches the session to Claude Opus."),
)
# the tokens left that Claude Code tells the model, from the usage the fake counted (a word a token) for each
# run's prompt, worded differently as above
TOKENS_LEFT = re.compile(r"<total_tokens>\d+ tokens left</total_tokens>")
WEB_SEARCH = "web-search-2025-03-05"


@pytest.fixture
def world(transactional_db, live_gateway, fake_google, key_file):  # noqa: F811
    account = AccountFactory(group=AccountGroupFactory(name="team", api_access=True), email="dev@example.test")
    gcp = ModelServerFactory(name="gcp", kind="vertex", base_url=fake_google.url, region=REGION,
                             gcp_project=PROJECT, gcp_credentials_file=key_file, is_remote=True, read_timeout=30.0)
    ModelFactory(server=gcp, name=CLAUDE, is_default=True)
    yield SimpleNamespace(base=live_gateway, google=fake_google, key=api_key_for(account))
    wait_for_quiet_database()


def predictions(calls, *, straight: bool = False) -> list:
    """The model calls, the `anthropic-beta` header's values a sorted list in the body, the tokens left blanked;
    a `straight` call's prompt worded as to Anthropic's API, and without the web search beta when it holds no
    web search tool."""
    found = []
    for request in calls:
        body = dict(request.json)
        betas = {b.strip() for b in request.headers.get("anthropic-beta", "").split(",") if b.strip()}
        if straight:
            body["system"] = [_first_party(block) for block in body["system"]]
            if not any(str(tool.get("type", "")).startswith("web_search_") for tool in body.get("tools", ())):
                betas.discard(WEB_SEARCH)
        body["messages"] = [{**m, "content": _tokens_left(m["content"])} for m in body["messages"]]
        found.append(SimpleNamespace(method=request.method, path=request.path, query=request.query, headers={},
                                     json={**body, "betas": sorted(betas)}))
    return found


def _first_party(block: dict) -> dict:
    text = block["text"]
    for vertex, first_party in VERTEX_WORDING:
        text = text.replace(vertex, first_party)
    return {**block, "text": text}


def _tokens_left(content):
    if isinstance(content, str):
        return TOKENS_LEFT.sub("<total_tokens>N tokens left</total_tokens>", content)
    if isinstance(content, list):
        return [_tokens_left(part) for part in content]
    if isinstance(content, dict):
        return {key: _tokens_left(value) for key, value in content.items()}
    return content


def test_vertex_receives_from_the_gateway_what_claude_code_sends_it(world, tmp_path):
    world.google.configure(require_auth=False, tool_name=TOOL_NAME, tool_arguments=TOOL_ARGUMENTS)
    straight = run_claude(world.google.url, "", CLAUDE, tmp_path, cloud="vertex")
    assert straight.returncode == 0, straight.stderr
    assert straight.stdout.splitlines()[0] == FINAL_TEXT
    calls = world.google.calls()
    assert len(calls) == 2 and {r.path for r in calls} == {PATH}
    assert all(WEB_SEARCH in r.headers["anthropic-beta"].split(",") for r in calls)
    sent = predictions(calls, straight=True)

    through = run_claude(world.base, world.key, CLAUDE, tmp_path)
    assert through.returncode == 0, through.stderr
    assert through.stdout.splitlines()[0] == FINAL_TEXT
    calls = world.google.calls()[len(calls):]
    assert len(calls) == 2 and {r.path for r in calls} == {PATH}
    assert all(r.problem is None and r.headers["authorization"].startswith("Bearer ya29.fake-") for r in calls)
    found = differences(comparable(sent, straight.days), comparable(predictions(calls), through.days))
    assert found == [], "what arrived differs from what Claude Code sends Vertex AI:\n" + "\n".join(found)
