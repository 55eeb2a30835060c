"""For the Bedrock tests: the fake Bedrock (one per test process, reset for each test), the snapshot targets the
provider is called with directly, and a run of the provider's stream in an event loop of its own."""

from __future__ import annotations

import asyncio
import atexit
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from gateway.registry.snapshot import Cloud, Server, Target
from gateway.upstream.providers.base import http_client
from tests.gateway.upstream.bedrock.fake import ACCESS_KEY, CLAUDE, REGION, SECRET_KEY, FakeBedrock

_shared: FakeBedrock | None = None


@pytest.fixture
def fake_bedrock() -> Iterator[FakeBedrock]:
    global _shared
    if _shared is None or not _shared.alive:
        _shared = FakeBedrock().start()
        atexit.register(_shared.stop)
    yield _shared.reset()
    _shared.reset()


def target(fake: FakeBedrock, model: str = CLAUDE, *, api_key: str = "", **cloud: Any) -> Target:
    """A Bedrock target on the fake: signed with the fake's access key unless `cloud` or `api_key` say otherwise."""
    settings = {"region": REGION, "aws_access_key_id": ACCESS_KEY, "aws_secret_access_key": SECRET_KEY, **cloud}
    server = Server(1, "aws", "bedrock", fake.url, api_key, True, 5.0, 5.0, cloud=Cloud(**settings))
    return Target(1, f"aws/{model}", model, server, frozenset({"chat"}), (), 0)


def collect(stream_factory) -> tuple[list[dict[str, Any]], Exception | None]:
    """What a provider stream yields, and the exception that ended it (None when it ended well)."""
    async def run() -> tuple[list[dict[str, Any]], Exception | None]:
        items: list[dict[str, Any]] = []
        stream: AsyncIterator[dict[str, Any]] = stream_factory()
        try:
            async for item in stream:
                items.append(item)
        except Exception as exc:  # the test looks at which
            return items, exc
        finally:
            await http_client().aclose()
        return items, None

    return asyncio.run(run())
