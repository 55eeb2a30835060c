"""A Bedrock server from the operator's side: model discovery (foundation models and inference profiles of
Bedrock's control plane, every page, signed as the calls are), "Test connection", and the calls through the
egress proxy with their signature intact."""

from __future__ import annotations

import json

import pytest

from gateway.console import server_check
from gateway.models import Model
from gateway.registry.discovery import bedrock_control_plane, discover_models
from tests.asgi import call
from tests.factories import AccountFactory, AccountGroupFactory, ModelFactory, ModelServerFactory, api_key_for
from tests.gateway.upstream.bedrock.fake import ACCESS_KEY, CLAUDE, PROFILE, REGION, SECRET_KEY
from tests.gateway.upstream.bedrock.support import fake_bedrock  # noqa: F401 — the fixture
from tests.gateway.upstream.egress_support import proxy, proxy_env  # noqa: F401 — fixtures

LISTED = {
    CLAUDE: (True, False), "amazon.titan-embed-text-v2:0": (False, True), "cohere.embed-english-v3": (False, True),
    "meta.llama3-8b-instruct-v1:0": (True, False), PROFILE: (True, False),
    "us.anthropic.claude-opus-4-1-20250805-v1:0": (True, False),
    "global.anthropic.claude-haiku-4-5-20251001-v1:0": (True, False),
}


def bedrock_server(fake, **fields):
    return ModelServerFactory(name="aws", kind="bedrock", base_url=fake.url, region=REGION, is_remote=True,
                              **({"aws_access_key_id": ACCESS_KEY, "aws_secret_access_key": SECRET_KEY} | fields))


@pytest.mark.django_db
def test_discovery_lists_the_foundation_models_and_the_inference_profiles(fake_bedrock):  # noqa: F811
    server = bedrock_server(fake_bedrock)
    [report] = discover_models(servers=[server])
    assert report.error is None, report.error
    assert report.models == len(LISTED)
    found = {m.name: (m.supports_chat, m.supports_embeddings) for m in Model.objects.filter(server=server)}
    assert found == LISTED  # provisioned-only and image models left out; embedding models embed only
    listings = [(r.method, r.path, r.query) for r in fake_bedrock.requests]
    assert listings == [("GET", "/foundation-models", ""),
                        ("GET", "/foundation-models", "maxResults=1000&nextToken=2"),
                        ("GET", "/foundation-models", "maxResults=1000&nextToken=4"),
                        ("GET", "/inference-profiles", ""),
                        ("GET", "/inference-profiles", "maxResults=1000&nextToken=2")]
    assert all(r.auth == "sigv4" and r.problem is None for r in fake_bedrock.requests)


@pytest.mark.django_db
def test_discovery_with_a_bedrock_api_key_and_its_failure(fake_bedrock):  # noqa: F811
    fake_bedrock.configure(api_key="ABSKlisting-key-0001")
    server = bedrock_server(fake_bedrock, api_key="ABSKlisting-key-0001", aws_access_key_id="",
                            aws_secret_access_key="")
    [report] = discover_models(servers=[server])
    assert report.error is None and report.models == len(LISTED)
    assert {r.auth for r in fake_bedrock.requests} == {"bearer"}

    fake_bedrock.reset()
    server.api_key, server.aws_access_key_id, server.aws_secret_access_key = "", ACCESS_KEY, "a-wrong-secret"
    server.save()
    [report] = discover_models(servers=[server])
    assert report.error == "GET /foundation-models answered 403."
    assert fake_bedrock.requests[-1].problem == "the signature does not match"


def test_the_control_plane_is_the_runtime_s_address_with_bedrock_for_bedrock_runtime():
    assert bedrock_control_plane("https://bedrock-runtime.eu-west-3.amazonaws.com") == (
        "https://bedrock.eu-west-3.amazonaws.com")
    assert bedrock_control_plane("http://127.0.0.1:9000/") == "http://127.0.0.1:9000"


@pytest.mark.django_db
def test_test_connection_calls_the_first_chat_model(fake_bedrock):  # noqa: F811
    server = bedrock_server(fake_bedrock)
    ModelFactory(server=server, name=CLAUDE)
    outcome = server_check.connection_test(row=server)
    assert outcome.ok, outcome.message
    assert outcome.message.startswith(f"Chat call to aws/{CLAUDE} answered: “Echo: This is a connection test")
    fake_bedrock.configure(fail_error="AccessDeniedException", fail_status=403,
                           fail_message="You don't have access to the model with the specified model ID.")
    outcome = server_check.connection_test(row=server)
    assert (outcome.ok, outcome.message) == (False, f"Chat call to aws/{CLAUDE} failed: 403 AccessDeniedException: "
                                                    "You don't have access to the model with the specified model ID.")


@pytest.mark.django_db(transaction=True)
def test_calls_go_through_the_egress_proxy_signed(fake_bedrock, proxy, proxy_env):  # noqa: F811
    proxy_env(HTTP_PROXY=proxy.url)
    account = AccountFactory(group=AccountGroupFactory(api_access=True))
    ModelFactory(server=bedrock_server(fake_bedrock), name=CLAUDE, is_default=True)
    headers = [(b"x-api-key", api_key_for(account).encode()), (b"content-type", b"application/json")]
    body = {"model": f"aws/{CLAUDE}", "max_tokens": 20, "messages": [{"role": "user", "content": "via the proxy"}]}
    status, _, content = call("POST", "/v1/messages", headers=headers, body=json.dumps(body).encode())
    assert status == 200, content
    assert json.loads(content)["content"][0]["text"] == "Echo: via the proxy"
    port = fake_bedrock.url.rsplit(":", 1)[1]
    proxy.wait_for(f"POST http://127.0.0.1:{port}/model/{CLAUDE.replace(':', '%3A')}/invoke-with-response-stream "
                   "HTTP/1.1")
    assert fake_bedrock.calls()[-1].problem is None  # the proxy changed nothing that was signed
