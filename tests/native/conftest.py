"""A test world for the native surface: a running gateway (uvicorn on loopback, the test
database) in front of the reference upstream, two accounts in two groups, and HTTP helpers."""

from __future__ import annotations

import json
from types import SimpleNamespace

import httpx
import pytest

from tests.factories import AccountFactory, AccountGroupFactory, ModelFactory, ModelServerFactory, api_key_for
from tests.servers import wait_for_quiet_database
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture


class Api:
    """An httpx client on the gateway with one account's key."""

    def __init__(self, base: str, key: str) -> None:
        self.base, self.key = base, key
        self.client = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30)

    def get(self, path: str, **kwargs) -> httpx.Response:
        return self.client.get(path, **kwargs)

    def post(self, path: str, body=None, **kwargs) -> httpx.Response:
        return self.client.post(path, json=body, **kwargs)

    def delete(self, path: str, **kwargs) -> httpx.Response:
        return self.client.delete(path, **kwargs)

    def close(self) -> None:
        self.client.close()


@pytest.fixture
def world(transactional_db, live_gateway, upstream):  # noqa: F811
    """`account` (group `team`) and `outsider` (group `others`), each with a key and an `Api`;
    an OpenAI-kind server `oa` on the reference upstream with its model `echo-1`, the default."""
    group = AccountGroupFactory(name="team", api_access=True)
    account = AccountFactory(group=group, email="dev@example.test")
    others = AccountGroupFactory(name="others", api_access=True)
    outsider = AccountFactory(group=others, email="outsider@example.test")
    oa = ModelServerFactory(name="oa", kind="openai", base_url=f"{upstream.url}/v1", read_timeout=2.0)
    default = ModelFactory(server=oa, name="echo-1", is_default=True)
    key, outsider_key = api_key_for(account), api_key_for(outsider)
    world = SimpleNamespace(
        base=live_gateway, upstream=upstream, group=group, account=account, key=key, others=others,
        outsider=outsider, outsider_key=outsider_key, oa=oa, default=default,
        api=Api(live_gateway, key), outsider_api=Api(live_gateway, outsider_key),
    )
    yield world
    world.api.close()
    world.outsider_api.close()
    wait_for_quiet_database()


def sse_events(response: httpx.Response) -> list[tuple[str, dict]]:
    """The events of a native chat stream, parsed strictly: every frame is exactly one
    `event:` line and one `data:` line holding a JSON object, frames end with a blank line."""
    text = response.text
    assert text.endswith("\n\n"), text[-200:]
    events = []
    for frame in text[:-2].split("\n\n"):
        lines = frame.split("\n")
        assert len(lines) == 2, frame
        assert lines[0].startswith("event: ") and lines[1].startswith("data: "), frame
        payload = json.loads(lines[1][len("data: "):])
        assert isinstance(payload, dict)
        events.append((lines[0][len("event: "):], payload))
    return events
