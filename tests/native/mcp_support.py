"""For the `/api/v1/mcp` tests: the path and headers, JSON-RPC messages, and the test world of
the official client (`world_fixture`, imported as the fixture `world`): an account whose group may
use two of three models, and an outsider; `mcp_session` opens a session of that client."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import Any

import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.factories import AccountFactory, AccountGroupFactory, ModelFactory, ModelServerFactory, api_key_for
from tests.servers import wait_for_quiet_database

PATH = "/api/v1/mcp"
ACCEPT = "application/json, text/event-stream"


def run(coroutine):
    return asyncio.run(coroutine)


@asynccontextmanager
async def mcp_session(base: str, key: str, *, seen: list | None = None):
    """An initialized ClientSession of the official client, authenticated by `key` as a Bearer
    token. `seen` collects (status, content type) of every HTTP response."""

    async def record(response: httpx2.Response) -> None:
        if seen is not None:
            seen.append((response.request.method, response.status_code, response.headers.get("content-type")))

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=httpx2.Timeout(30.0),
                              event_hooks={"response": [record]})
    async with http, streamable_http_client(base + PATH, http_client=http) as (read, write):
        async with ClientSession(read, write) as session:
            yield session


@pytest.fixture(name="world")
def world_fixture(transactional_db, live_gateway, upstream):
    """An account whose group may use two of three models (`oa/echo-1` the default, and an
    embedding model), with a key; an outsider with a key of their own."""
    group = AccountGroupFactory(name="team", api_access=True, all_models=False)
    account = AccountFactory(group=group, email="dev@example.test")
    outsider = AccountFactory(group=AccountGroupFactory(name="others", api_access=True), email="out@example.test")
    oa = ModelServerFactory(name="oa", kind="openai", base_url=f"{upstream.url}/v1", read_timeout=2.0)
    default = ModelFactory(server=oa, name="echo-1", is_default=True)
    embedder = ModelFactory(server=oa, name="embed-1", supports_chat=False, supports_embeddings=True)
    ModelFactory(server=oa, name="secret-1")  # not granted to the group
    default.groups.add(group)
    embedder.groups.add(group)
    yield SimpleNamespace(base=live_gateway, upstream=upstream, group=group, account=account, key=api_key_for(account),
                          outsider=outsider, outsider_key=api_key_for(outsider))
    wait_for_quiet_database()


def rpc(method: str, params: dict | None = None, id: Any = 1) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    if id is not None:
        message["id"] = id
    return message
