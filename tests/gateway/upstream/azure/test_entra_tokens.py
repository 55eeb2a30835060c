"""Microsoft Entra ID tokens for Azure OpenAI (gateway/upstream/providers/entra.py): asked of the tenant's
token endpoint with the client credentials, kept per server in the process, shared by the calls made
together, replaced before they expire; a tenant that gives none is the server's failure (401, its words,
never the secret), and neither the token nor the secret is ever logged."""

from __future__ import annotations

import asyncio
import logging

import pytest

from gateway.registry.snapshot import registry, server_of
from gateway.telemetry.redact import configured_secrets, redact
from gateway.upstream import providers
from gateway.upstream.providers import entra
from gateway.upstream.providers.base import UNAVAILABLE, UpstreamError
from tests.gateway.upstream.azure.conftest import DATED, azure_server, target_of
from tests.gateway.upstream.azure.fake_entra import CLIENT_ID, CLIENT_SECRET, SCOPE

pytestmark = pytest.mark.django_db

HELLO = {"messages": [{"role": "user", "content": "hello entra"}]}


async def ask(target) -> str:
    return "".join([c["choices"][0]["delta"].get("content") or ""
                    async for c in providers.chat_stream(target, HELLO) if c["choices"]])


def tokens_sent(azure) -> list[str]:
    return [r.headers["authorization"].removeprefix("Bearer ") for r in azure.fake.requests]


@pytest.fixture
def target(azure, tenant):
    return target_of(azure_server(azure, tenant, DATED, "entra"), "gpt-4o-deployment")


def test_two_calls_fetch_one_token_with_the_client_credentials(azure, tenant, target, monkeypatch):
    assert asyncio.run(ask(target)) == "Echo: hello entra"

    def asked_again(*_args, **_kwargs):
        raise AssertionError("a fresh token is the process's own: azure-identity is not asked again")

    monkeypatch.setattr("azure.identity.ClientSecretCredential.get_token_info", asked_again)
    assert asyncio.run(ask(target)) == "Echo: hello entra"  # another event loop, the same process
    assert tenant.fetches == [{"grant_type": "client_credentials", "client_id": CLIENT_ID,
                               "client_secret": CLIENT_SECRET, "scope": SCOPE,
                               "client_info": "1"}]  # msal asks for the client's info too
    assert tokens_sent(azure) == [tenant.issued[0]] * 2
    assert "api-key" not in azure.fake.requests[0].headers


def test_calls_made_together_share_one_fetch(azure, tenant, target):
    tenant.latency = 0.3  # the token is slow to come: every call wants it while it is being fetched

    async def together():
        return await asyncio.gather(*(ask(target) for _ in range(6)))

    assert asyncio.run(together()) == ["Echo: hello entra"] * 6
    assert len(tenant.fetches) == 1
    assert tokens_sent(azure) == [tenant.issued[0]] * 6


def test_a_token_near_its_expiry_is_replaced_before_it_is_used_again(azure, tenant, target):
    tenant.lifetimes = [200]  # expires within the five minutes' margin: not to be used for another call
    for _ in range(3):
        assert asyncio.run(ask(target)) == "Echo: hello entra"
    assert len(tenant.fetches) == 2
    assert tokens_sent(azure) == [tenant.issued[0], tenant.issued[1], tenant.issued[1]]


def test_new_client_credentials_make_a_new_token(azure, tenant, target):
    asyncio.run(ask(target))
    row = target.server
    other = azure_server(azure, tenant, DATED, "entra")  # another server: a token of its own
    asyncio.run(ask(target_of(other, "gpt-4o-deployment")))
    assert len(tenant.fetches) == 2 and row.id != other.pk
    assert tokens_sent(azure) == tenant.issued[:2]


def test_a_refused_client_secret_is_the_servers_401_and_the_next_call_asks_again(azure, tenant, target, caplog):
    tenant.secret = "the-secret-the-tenant-now-wants"
    caplog.set_level(logging.DEBUG)
    with pytest.raises(UpstreamError) as failed:
        asyncio.run(ask(target))
    failure = failed.value
    assert (failure.kind, failure.status, failure.retryable) == (UNAVAILABLE, 401, True)
    assert failure.message.startswith(f"Microsoft Entra ID gave no token for server '{target.server.name}' "
                                      f"(tenant {target.server.cloud.azure_tenant_id}): ")
    assert "AADSTS7000215: Invalid client secret provided." in failure.message
    assert CLIENT_SECRET not in failure.message and "Trace ID" not in failure.message
    assert azure.fake.requests == []  # Azure was never asked without a token

    tenant.secret = CLIENT_SECRET  # the operator fixed it at the tenant: the very next call works
    assert asyncio.run(ask(target)) == "Echo: hello entra"
    assert len(tenant.fetches) == 2
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert CLIENT_SECRET not in logged
    assert not any(token in logged for token in tenant.issued)


def test_a_server_with_neither_a_key_nor_a_client_is_refused_before_any_call(azure, tenant):
    row = azure_server(azure, tenant, DATED, "entra", azure_client_secret="")
    with pytest.raises(UpstreamError) as failed:
        asyncio.run(ask(target_of(row, "gpt-4o-deployment")))
    assert (failed.value.kind, failed.value.status) == (UNAVAILABLE, 401)
    assert failed.value.message == (f"No API key and no Microsoft Entra ID client are configured for server "
                                    f"'{row.name}'.")
    assert tenant.fetches == [] and azure.fake.requests == []


def test_the_client_secret_is_one_of_the_secrets_no_log_line_shows(target):
    registry()  # the process's registry, loaded: what the log filter knows of the servers' credentials
    assert CLIENT_SECRET in configured_secrets()
    assert redact(f"msal said: client_secret {CLIENT_SECRET} refused", configured_secrets(), loose=False) == \
        "msal said: client_secret [redacted] refused"


@pytest.mark.parametrize(("resource", "audience"), [
    ("https://myresource.openai.azure.com", "https://cognitiveservices.azure.com/.default"),
    ("https://myresource.cognitiveservices.azure.com", "https://cognitiveservices.azure.com/.default"),
    ("https://myresource.openai.azure.us", "https://cognitiveservices.azure.us/.default"),
    ("https://myresource.openai.azure.cn/", "https://cognitiveservices.azure.cn/.default"),
])
def test_the_token_is_asked_for_azure_openai_of_the_resources_own_cloud(azure, tenant, resource, audience):
    row = azure_server(azure, tenant, DATED, "entra", base_url=resource)
    assert entra.Client.of(server_of(row)).scope == audience
