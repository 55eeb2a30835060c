"""A fake Azure OpenAI resource (fake_azure.py) and a fake Microsoft Entra ID tenant (fake_entra.py) on
loopback, each started once per module and emptied before every test; the servers the gateway holds for
them, one per way of reaching Azure (dated or v1 API, API key or Entra ID); the official SDK clients
pointed straight at the fake, the oracle of a correct request; and `cloud`, the running gateway in front
of the fake with the SDKs pointed at it."""

from __future__ import annotations

from types import SimpleNamespace

import anthropic
import httpx
import openai
import pytest
from azure.identity import ClientSecretCredential, get_bearer_token_provider

from gateway.registry.snapshot import Target, server_of
from tests.factories import AccountFactory, AccountGroupFactory, ModelFactory, ModelServerFactory, api_key_for
from tests.gateway.upstream.azure.fake_azure import API_KEY, FakeAzure
from tests.gateway.upstream.azure.fake_entra import CLIENT_ID, CLIENT_SECRET, SCOPE, TENANT, running_tenant
from tests.servers import serving, wait_for_quiet_database
from tests.upstream import Upstream
from tests.upstream.core import State
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture

DATED = "2024-10-21"
WAYS = [(DATED, "key"), (DATED, "entra"), ("v1", "key"), ("v1", "entra")]


@pytest.fixture(scope="module")
def _tenant(tmp_path_factory):
    with running_tenant(tmp_path_factory.mktemp("entra")) as tenant:
        yield tenant


@pytest.fixture(scope="module")
def _azure(_tenant):
    state = State()
    fake = FakeAzure(state, tokens=_tenant.issued)
    with serving(fake, name="azure") as url:
        yield SimpleNamespace(url=url, fake=fake, upstream=Upstream(state, url))


@pytest.fixture
def tenant(_tenant, monkeypatch):
    """The Entra ID tenant; its certificate is the one the gateway's token fetch trusts (SSL_CERT_FILE)."""
    monkeypatch.setenv("SSL_CERT_FILE", str(_tenant.cert))
    _tenant.reset()
    yield _tenant
    _tenant.reset()


@pytest.fixture
def azure(_azure, tenant):
    """The fake resource: `url`, `fake` (its requests as they came, `throttle`), `upstream` (the reference
    upstream's knobs behind it)."""
    _azure.fake.reset()
    _azure.upstream.reset()
    yield _azure
    _azure.fake.reset()
    _azure.upstream.reset()


def azure_server(azure, tenant, version: str, auth: str, **fields):
    """A ModelServer row for the fake resource, reached the given way."""
    credentials = {"api_key": API_KEY} if auth == "key" else {
        "azure_tenant_id": TENANT, "azure_client_id": CLIENT_ID, "azure_client_secret": CLIENT_SECRET,
        "azure_authority_host": tenant.url}
    return ModelServerFactory(**{"kind": "azure", "base_url": azure.url, "api_version": version, "is_remote": True,
                                 "read_timeout": 5.0, **credentials, **fields})


def target_of(row, deployment: str) -> Target:
    """The registry's target for `row`'s model `deployment` (made if missing)."""
    model = row.models.filter(name=deployment).first() or ModelFactory(server=row, name=deployment)
    server = server_of(row)
    return Target(model.pk, f"{server.name}/{model.name}", model.name, server, frozenset(), (), 0)


def oracle(azure, tenant, version: str, auth: str) -> openai.OpenAI:
    """The official SDK as Azure's documentation sets it up for this way of reaching the resource."""
    provider = None
    if auth == "entra":
        credential = ClientSecretCredential(TENANT, CLIENT_ID, CLIENT_SECRET, authority=tenant.url,
                                            disable_instance_discovery=True, connection_verify=str(tenant.cert))
        provider = get_bearer_token_provider(credential, SCOPE)
    if version == "v1":
        return openai.OpenAI(base_url=f"{azure.url}/openai/v1/", api_key=provider or API_KEY, max_retries=0)
    credentials = {"azure_ad_token_provider": provider} if provider else {"api_key": API_KEY}
    return openai.AzureOpenAI(azure_endpoint=azure.url, api_version=version, max_retries=0, **credentials)


@pytest.fixture
def cloud(transactional_db, live_gateway, azure, tenant, upstream):  # noqa: F811
    """The running gateway with an Azure server `az` (the dated API, an API key) whose chat deployment is
    the default model and whose embeddings deployment is the only one, and an OpenAI-kind server `oa` on the
    shared reference upstream (`echo-1`, `embed-1`), which a test makes a fallback when it wants one. An
    account with a key, and the official SDKs on the gateway."""
    group = AccountGroupFactory(name="team", api_access=True)
    account = AccountFactory(group=group, email="dev@example.test")
    key = api_key_for(account)
    az = azure_server(azure, tenant, DATED, "key", name="az")
    chat = ModelFactory(server=az, name="gpt-4o-deployment", is_default=True)
    embed = ModelFactory(server=az, name="embed-deployment", supports_chat=False, supports_embeddings=True)
    oa = ModelServerFactory(name="oa", kind="openai", base_url=f"{upstream.url}/v1", read_timeout=5.0)
    echo = ModelFactory(server=oa, name="echo-1")
    embed_1 = ModelFactory(server=oa, name="embed-1", supports_chat=False, supports_embeddings=True)
    yield SimpleNamespace(
        base=live_gateway, azure=azure, upstream=upstream, account=account, key=key, az=az, chat=chat, embed=embed,
        oa=oa, echo=echo, embed_1=embed_1,
        openai=openai.OpenAI(base_url=f"{live_gateway}/v1", api_key=key, max_retries=0),
        anthropic=anthropic.Anthropic(base_url=live_gateway, api_key=key, max_retries=0),
        api=httpx.Client(base_url=live_gateway, headers={"Authorization": f"Bearer {key}"}, timeout=30),
    )
    wait_for_quiet_database()
