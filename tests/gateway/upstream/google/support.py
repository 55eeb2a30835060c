"""For the Google tests: the fake Google (one per test process, reset for each test), a service account's key
file whose tokens the fake gives, the snapshot targets the providers are called with directly, and a run of a
provider's stream in an event loop of its own (the Bedrock tests' `collect`)."""

from __future__ import annotations

import atexit
from collections.abc import Iterator
from typing import Any

import pytest

from gateway.registry.snapshot import Cloud, Server, Target
from tests.gateway.upstream.bedrock.support import collect  # noqa: F401 — shared with the Google tests
from tests.gateway.upstream.google import keys
from tests.gateway.upstream.google.fake import API_KEY, CLAUDE, GEMINI, PROJECT, REGION
from tests.gateway.upstream.google.server import FakeGoogle

_shared: FakeGoogle | None = None


@pytest.fixture
def fake_google() -> Iterator[FakeGoogle]:
    global _shared
    if _shared is None or not _shared.alive:
        _shared = FakeGoogle().start()
        atexit.register(_shared.stop)
    yield _shared.reset()
    _shared.reset()


@pytest.fixture
def key_file(fake_google, tmp_path) -> str:
    """The service account's key file, its tokens asked of the fake, which knows its public key."""
    who = keys.account()
    fake_google.configure(accounts={who.email: who.public_pem})
    return keys.key_file(tmp_path, who, f"{fake_google.url}/token")


def vertex_target(fake: FakeGoogle, key_file: str, model: str = CLAUDE, *, publisher: str = "",
                  server_id: int = 1, **cloud: Any) -> Target:
    settings = {"region": REGION, "gcp_project": PROJECT, "gcp_credentials_file": key_file, **cloud}
    server = Server(server_id, "gcp", "vertex", fake.url, "", True, 5.0, 5.0, cloud=Cloud(**settings))
    return Target(1, f"gcp/{model}", model, server, frozenset({"chat"}), (), 0, publisher=publisher)


def gemini_target(fake: FakeGoogle, model: str = GEMINI, *, api_key: str = API_KEY) -> Target:
    server = Server(2, "gem", "gemini", fake.url, api_key, True, 5.0, 5.0, cloud=Cloud())
    return Target(2, f"gem/{model}", model, server, frozenset({"chat"}), (), 0)
