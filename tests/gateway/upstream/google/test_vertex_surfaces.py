"""Claude on Vertex AI behind the surfaces that always go through the chat form: `/v1/responses` (whole and
streamed, read by the official SDK) and native chat (`/api/v1/chat`), metered once each; and the model call's
trace span naming its provider `gcp.vertex_ai` (OpenTelemetry's GenAI name for it; the Gemini API's `gcp.gemini`)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import httpx
import openai
import pytest

from tests.asgi import call
from tests.factories import AccountFactory, AccountGroupFactory, ModelFactory, ModelServerFactory, api_key_for
from tests.gateway.telemetry.test_traces import by_kind, exported  # noqa: F401 — a fixture among them
from tests.gateway.upstream.google.fake import API_KEY, CLAUDE, GEMINI, PROJECT, REGION
from tests.gateway.upstream.google.support import fake_google, key_file  # noqa: F401 — the fixtures
from tests.native.conftest import sse_events
from tests.servers import wait_for_quiet_database, wait_for_usage

PUBLIC = f"gcp/{CLAUDE}"


def vertex_server(fake, key_file):
    gcp = ModelServerFactory(name="gcp", kind="vertex", base_url=fake.url, region=REGION, gcp_project=PROJECT,
                             gcp_credentials_file=key_file, is_remote=True, read_timeout=5.0)
    ModelFactory(server=gcp, name=CLAUDE, is_default=True)
    return gcp


@pytest.fixture
def world(transactional_db, live_gateway, fake_google, key_file):  # noqa: F811
    account = AccountFactory(group=AccountGroupFactory(name="team", api_access=True), email="dev@example.test")
    key = api_key_for(account)
    vertex_server(fake_google, key_file)
    yield SimpleNamespace(account=account, google=fake_google,
                          openai=openai.OpenAI(base_url=f"{live_gateway}/v1", api_key=key, max_retries=0),
                          api=httpx.Client(base_url=live_gateway, headers={"Authorization": f"Bearer {key}"},
                                           timeout=30))
    wait_for_quiet_database()


def test_responses_whole_and_streamed_and_native_chat_reach_claude_on_vertex(world):
    whole = world.openai.responses.create(model=PUBLIC, input="hello vertex")
    assert (whole.model, whole.output_text, whole.status) == (PUBLIC, "Echo: hello vertex", "completed")
    with world.openai.responses.create(model=PUBLIC, input="hello vertex", stream=True) as stream:
        events = list(stream)
    assert events[-1].type == "response.completed"
    assert events[-1].response.output_text == "Echo: hello vertex"
    events = sse_events(world.api.post("/api/v1/chat", json={"message": "hello vertex", "model": PUBLIC}))
    assert [name for name, _ in events][0] == "meta" and events[0][1]["model"] == PUBLIC
    assert "".join(p["text"] for name, p in events if name == "delta") == "Echo: hello vertex"
    calls = world.google.calls()
    assert [c.path.rsplit("/", 1)[-1] for c in calls] == [f"{CLAUDE}:streamRawPredict"] * 3
    assert all(c.problem is None for c in calls)
    records = wait_for_usage(world.account, 3)
    assert [(r.surface, r.model) for r in records] == [("responses", PUBLIC)] * 2 + [("native_chat", PUBLIC)]


def test_a_vertex_call_s_span_names_the_provider_gcp_vertex_ai(transactional_db, settings, fake_google,  # noqa: F811
                                                               key_file, exported):  # noqa: F811
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "v1": 1000}
    key = api_key_for(AccountFactory(group=AccountGroupFactory(api_access=True)))
    vertex_server(fake_google, key_file)
    status, _, body = call("POST", "/v1/chat/completions", headers=[
        (b"authorization", f"Bearer {key}".encode()), (b"content-type", b"application/json")],
        body=json.dumps({"model": PUBLIC, "messages": [{"role": "user", "content": "hi"}]}).encode())
    assert status == 200, body
    (attempt,) = by_kind(exported, "CLIENT")
    assert attempt.attributes["gen_ai.provider.name"] == "gcp.vertex_ai"
    assert attempt.attributes["gen_ai.request.model"] == CLAUDE


def test_a_gemini_api_call_s_span_names_the_provider_gcp_gemini(transactional_db, settings, fake_google,  # noqa: F811
                                                                exported):  # noqa: F811
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "v1": 1000}
    key = api_key_for(AccountFactory(group=AccountGroupFactory(api_access=True)))
    gem = ModelServerFactory(name="gem", kind="gemini", base_url=fake_google.url, api_key=API_KEY, is_remote=True)
    ModelFactory(server=gem, name=GEMINI, is_default=True)
    status, _, body = call("POST", "/v1/chat/completions", headers=[
        (b"authorization", f"Bearer {key}".encode()), (b"content-type", b"application/json")],
        body=json.dumps({"model": f"gem/{GEMINI}", "messages": [{"role": "user", "content": "hi"}]}).encode())
    assert status == 200, body
    (attempt,) = by_kind(exported, "CLIENT")
    assert attempt.attributes["gen_ai.provider.name"] == "gcp.gemini"
    assert attempt.attributes["gen_ai.request.model"] == GEMINI
