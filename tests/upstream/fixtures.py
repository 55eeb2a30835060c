"""pytest fixture `upstream`: import it into a test module (`from tests.upstream.fixtures import upstream`).

One server is started lazily per test process and shared; every test gets it freshly reset (default knobs,
empty request log), which keeps the per-test cost near zero. Use `running_upstream()` for a private one."""

from __future__ import annotations

import atexit
from typing import Iterator

import pytest

from . import Upstream, UpstreamServer

_shared: UpstreamServer | None = None


def shared_upstream() -> Upstream:
    global _shared
    if _shared is None or not _shared.alive:
        _shared = UpstreamServer()
        _shared.start()
        atexit.register(_shared.stop)
    assert _shared.controller is not None
    return _shared.controller


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    controller = shared_upstream().reset()
    yield controller
    controller.reset()
