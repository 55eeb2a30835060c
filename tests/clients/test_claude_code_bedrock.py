"""Claude Code on AWS Bedrock, straight and through the gateway: what reaches Bedrock is what Claude Code sends
when it is set up for Bedrock itself.

Claude Code runs offline twice with the same prompt against the same fake Bedrock
(tests/gateway/upstream/bedrock/fake.py, scripted to make it call its Bash tool once): straight at it in its
Bedrock mode (CLAUDE_CODE_USE_BEDROCK, unauthenticated), then as at an Anthropic server, through the gateway's
/v1/messages, the gateway pointing at the fake with signed requests. Each InvokeModel body must be the same, field
by field; the betas are compared as one set, since in its Bedrock mode Claude Code keeps one beta in the header
and puts the rest in the body, where the gateway puts every beta Bedrock carries."""

from types import SimpleNamespace

import pytest

from tests.clients.claude_code_support import FINAL_TEXT, TOOL_ARGUMENTS, TOOL_NAME, comparable, differences, run_claude
from tests.factories import AccountFactory, AccountGroupFactory, ModelFactory, ModelServerFactory, api_key_for
from tests.gateway.upstream.bedrock.fake import ACCESS_KEY, PROFILE, REGION, SECRET_KEY
from tests.gateway.upstream.bedrock.support import fake_bedrock  # noqa: F401 — the fixture
from tests.servers import wait_for_quiet_database

# Claude Code offers its WebSearch tool only on Anthropic's own API: left out of both runs, the prompt it
# writes is the same in either mode
SAME_TOOLS = ("--disallowedTools", "WebSearch")


@pytest.fixture
def world(transactional_db, live_gateway, fake_bedrock):  # noqa: F811
    account = AccountFactory(group=AccountGroupFactory(name="team", api_access=True), email="dev@example.test")
    aws = ModelServerFactory(name="aws", kind="bedrock", base_url=fake_bedrock.url, region=REGION, is_remote=True,
                             aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY, read_timeout=30.0)
    ModelFactory(server=aws, name=PROFILE, is_default=True)
    yield SimpleNamespace(base=live_gateway, bedrock=fake_bedrock, key=api_key_for(account))
    wait_for_quiet_database()


def scripted(fake):
    fake.reset().configure(require_auth=False, tool_name=TOOL_NAME, tool_arguments=TOOL_ARGUMENTS)


def invocations(fake) -> list:
    """The model calls, as a request whose path is decoded (Claude Code leaves the id's ':' as it is) and whose
    betas, header and body together, are one sorted list in the body."""
    found = []
    for request in fake.calls():
        header = [b.strip() for b in request.headers.get("anthropic-beta", "").split(",") if b.strip()]
        body = dict(request.json)
        betas = sorted({*body.pop("anthropic_beta", []), *header})
        found.append(SimpleNamespace(method=request.method, path=request.path, query=request.query, headers={},
                                     json={**body, "betas": betas}))
    return found


def test_bedrock_receives_from_the_gateway_what_claude_code_sends_it(world, tmp_path):
    scripted(world.bedrock)
    straight = run_claude(world.bedrock.url, "", PROFILE, tmp_path, cloud="bedrock", args=SAME_TOOLS)
    assert straight.returncode == 0, straight.stderr
    assert straight.stdout.splitlines()[0] == FINAL_TEXT
    sent = invocations(world.bedrock)
    assert len(sent) == 2 and {r.path for r in sent} == {f"/model/{PROFILE}/invoke-with-response-stream"}

    scripted(world.bedrock)
    through = run_claude(world.base, world.key, PROFILE, tmp_path, args=SAME_TOOLS)
    assert through.returncode == 0, through.stderr
    assert through.stdout.splitlines()[0] == FINAL_TEXT
    arrived = invocations(world.bedrock)
    assert all(r.problem is None and r.auth == "sigv4" for r in world.bedrock.calls())
    found = differences(comparable(sent, straight.days), comparable(arrived, through.days))
    assert found == [], "what arrived differs from what Claude Code sends Bedrock:\n" + "\n".join(found)
