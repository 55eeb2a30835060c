"""Azure OpenAI through the project's ASGI application in this process (where the Entra ID token is kept):
Microsoft Entra ID on the v1 API end to end, a tenant that gives no token as a failure that falls through,
the console's "Test connection", the egress proxy for the calls and for the token, and the traces naming
the provider `azure.ai.openai`."""

from __future__ import annotations

import json

import pytest

from gateway.console.server_check import connection_test
from tests.asgi import call
from tests.factories import AccountFactory, AccountGroupFactory, ModelFactory, ModelFallbackFactory, api_key_for
from tests.faults.services import wait_for
from tests.gateway.telemetry.test_traces import by_kind, exported  # noqa: F401 — a fixture among them
from tests.gateway.upstream.azure.conftest import DATED, azure_server
from tests.gateway.upstream.azure.fake_azure import API_KEY
from tests.gateway.upstream.azure.fake_entra import CLIENT_SECRET
from tests.gateway.upstream.egress_support import proxy, proxy_env  # noqa: F401 — the fixtures
from tests.gateway.upstream.test_egress_gateway import port_of

HELLO = [{"role": "user", "content": "hello in process"}]


@pytest.fixture
def world(transactional_db, settings, azure, tenant):
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "v1": 1000}
    account = AccountFactory(group=AccountGroupFactory(api_access=True))
    return type("World", (), {"key": api_key_for(account), "azure": azure, "tenant": tenant})


def with_deployment(row, name: str = "gpt-4o-deployment", **fields):
    ModelFactory(server=row, name=name, **fields)
    return row


def chat(key: str, model: str, stream: bool = False) -> tuple[int, dict, bytes]:
    headers = [(b"authorization", f"Bearer {key}".encode()), (b"content-type", b"application/json")]
    status, answered, body = call("POST", "/v1/chat/completions", headers=headers, body=json.dumps(
        {"model": model, "messages": HELLO, "stream": stream}).encode())
    return status, {name.decode().lower(): value.decode() for name, value in answered.items()}, body


def text_of(body: bytes, stream: bool) -> str:
    if not stream:
        return json.loads(body)["choices"][0]["message"]["content"]
    chunks = [json.loads(line[6:]) for line in body.decode().splitlines() if line.startswith("data: {")]
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])


def test_entra_id_on_the_v1_api_end_to_end(world):
    with_deployment(azure_server(world.azure, world.tenant, "v1", "entra", name="az"), is_default=True)
    for stream in (False, True):
        status, _, body = chat(world.key, "az/gpt-4o-deployment", stream)
        assert status == 200, body
        assert text_of(body, stream) == "Echo: hello in process"
    assert len(world.tenant.fetches) == 1
    sent = world.azure.fake.requests
    assert [(r.path, r.query, r.json["model"]) for r in sent] == [
        ("/openai/v1/chat/completions", "", "gpt-4o-deployment")] * 2
    assert {r.headers["authorization"] for r in sent} == {f"Bearer {world.tenant.issued[0]}"}


def test_a_tenant_that_gives_no_token_is_a_failure_that_falls_through(world):
    world.tenant.secret = "not-the-one-configured"
    row = with_deployment(azure_server(world.azure, world.tenant, DATED, "entra", name="az"))
    backup = with_deployment(azure_server(world.azure, world.tenant, DATED, "key", name="backup"))
    ModelFallbackFactory(model=row.models.get(), fallback=backup.models.get())
    for _ in range(2):  # the tenant is asked again on the next call: the operator may have fixed it meanwhile
        status, _, body = chat(world.key, "az/gpt-4o-deployment")
        assert status == 200 and json.loads(body)["model"] == "backup/gpt-4o-deployment", body
    assert len(world.tenant.fetches) == 2
    assert [r.headers["api-key"] for r in world.azure.fake.requests] == [API_KEY] * 2  # only the backup's calls


def test_alone_a_tenant_that_gives_no_token_is_a_503_in_the_surfaces_shape(world):
    world.tenant.secret = "not-the-one-configured"
    with_deployment(azure_server(world.azure, world.tenant, DATED, "entra", name="az"), is_default=True)
    status, headers, body = chat(world.key, "az/gpt-4o-deployment")
    assert status == 503, body
    assert json.loads(body)["error"]["code"] == "service_unavailable" and headers["retry-after"] == "10"
    assert CLIENT_SECRET not in body.decode() and world.azure.fake.requests == []


def test_the_consoles_test_connection(world):
    keyed = with_deployment(azure_server(world.azure, world.tenant, DATED, "key", name="az"))
    outcome = connection_test(row=keyed)
    assert outcome.ok, outcome.message
    assert outcome.message.startswith("Chat call to az/gpt-4o-deployment answered: “Echo: ")
    embedder = with_deployment(azure_server(world.azure, world.tenant, "v1", "entra", name="emb"),
                               "embed-deployment", supports_chat=False, supports_embeddings=True)
    outcome = connection_test(row=embedder)
    assert (outcome.ok, outcome.message) == (True, "Embeddings call to emb/embed-deployment answered: a vector of "
                                                   "64 numbers")
    world.tenant.secret = "not-the-one-configured"
    refused = with_deployment(azure_server(world.azure, world.tenant, DATED, "entra", name="refused"))
    outcome = connection_test(row=refused)
    assert not outcome.ok
    assert outcome.message.startswith("Chat call to refused/gpt-4o-deployment failed: 401 Microsoft Entra ID gave "
                                      "no token for server 'refused' (tenant ")
    assert "AADSTS7000215: Invalid client secret provided." in outcome.message
    assert CLIENT_SECRET not in outcome.message


def test_the_calls_and_the_token_go_through_the_egress_proxy(world, proxy, proxy_env):  # noqa: F811
    proxy_env(HTTP_PROXY=proxy.url, HTTPS_PROXY=proxy.url, SSL_CERT_FILE=str(world.tenant.cert))
    with_deployment(azure_server(world.azure, world.tenant, DATED, "entra", name="az"), is_default=True)
    status, _, body = chat(world.key, "az/gpt-4o-deployment")
    assert status == 200, body
    tunnel = f"CONNECT 127.0.0.1:{port_of(world.tenant.url)} HTTP/"  # the token, in a tunnel (urllib3 says 1.0)
    wait_for(lambda: any(line.startswith(tunnel) for line in proxy.requests()), 5, "the tunnel to the tenant")
    proxy.wait_for(f"POST http://127.0.0.1:{port_of(world.azure.url)}/openai/deployments/gpt-4o-deployment/"
                   f"chat/completions?api-version={DATED} HTTP/1.1")


def test_traces_name_the_provider_azure_ai_openai(world, exported):  # noqa: F811
    with_deployment(azure_server(world.azure, world.tenant, DATED, "key", name="az"), is_default=True)
    status, _, body = chat(world.key, "az/gpt-4o-deployment")
    assert status == 200, body
    (attempt,) = by_kind(exported, "CLIENT")
    assert attempt.name == "chat gpt-4o-deployment"
    assert attempt.attributes["gen_ai.provider.name"] == "azure.ai.openai"
    assert attempt.attributes["gen_ai.request.model"] == "gpt-4o-deployment"
    assert attempt.attributes["server.port"] == int(port_of(world.azure.url))
