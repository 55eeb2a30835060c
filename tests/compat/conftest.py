"""A running gateway (uvicorn on loopback, the test database) and a reference upstream behind it,
for driving the /v1 surfaces with the official SDKs."""

from types import SimpleNamespace

import anthropic
import openai
import pytest

from tests.factories import AccountFactory, AccountGroupFactory, ModelFactory, ModelServerFactory, api_key_for
from tests.servers import wait_for_quiet_database
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture


@pytest.fixture
def world(transactional_db, live_gateway, upstream):  # noqa: F811
    """An account with a key; an OpenAI-kind server (`oa`, its `echo-1` the default model) and an
    Anthropic-kind server (`an`) on the same reference upstream."""
    group = AccountGroupFactory(name="team", api_access=True)
    account = AccountFactory(group=group, email="dev@example.test")
    key = api_key_for(account)
    oa = ModelServerFactory(name="oa", kind="openai", base_url=f"{upstream.url}/v1", read_timeout=2.0)
    an = ModelServerFactory(name="an", kind="anthropic", base_url=upstream.url, read_timeout=2.0)
    default = ModelFactory(server=oa, name="echo-1", is_default=True)
    claude = ModelFactory(server=an, name="claude-echo")
    yield SimpleNamespace(
        base=live_gateway, upstream=upstream, group=group, account=account, key=key, oa=oa, an=an,
        default=default, claude=claude,
        openai=openai.OpenAI(base_url=f"{live_gateway}/v1", api_key=key, max_retries=0),
        anthropic=anthropic.Anthropic(base_url=live_gateway, api_key=key, max_retries=0),
    )
    wait_for_quiet_database()
