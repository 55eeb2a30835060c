"""The cloud kinds' fakes as the reply-schema tests take them: the fake Bedrock and the fake Google with a
service account's key file (their own fixtures, tests/gateway/upstream/{bedrock,google}/support.py) and a
fake Azure OpenAI resource reached with an API key on the dated API, the way most deployments are set up.
The Azure fixture here leaves out the Entra ID tenant that tests/gateway/upstream/azure/conftest.py starts:
a reply's shape does not depend on how the gateway authenticated, and the tenant is a TLS server of its own
to start for nothing."""

from __future__ import annotations

import atexit
import contextlib
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from tests.gateway.upstream.azure.fake_azure import FakeAzure
from tests.gateway.upstream.bedrock.support import fake_bedrock  # noqa: F401 — the fixture
from tests.gateway.upstream.google.support import fake_google, key_file  # noqa: F401 — the fixtures
from tests.servers import serving
from tests.upstream import Upstream
from tests.upstream.core import State

_azure: SimpleNamespace | None = None


@pytest.fixture
def fake_azure() -> Iterator[SimpleNamespace]:
    """The fake resource (one per test process, as the fake Bedrock is): `url`, `fake` (its requests),
    `upstream` (the knobs of the reference upstream that makes its replies), emptied before and after
    each test."""
    global _azure
    if _azure is None:
        state = State()
        fake = FakeAzure(state)
        stack = contextlib.ExitStack()
        url = stack.enter_context(serving(fake, name="azure"))
        atexit.register(stack.close)
        _azure = SimpleNamespace(url=url, fake=fake, upstream=Upstream(state, url))
    for part in (_azure.fake, _azure.upstream):
        part.reset()
    yield _azure
    for part in (_azure.fake, _azure.upstream):
        part.reset()
