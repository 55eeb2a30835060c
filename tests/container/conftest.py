"""Fixtures of the image test: it uses no database or Redis of the test run (it starts its own, and the
gateway runs in containers), so the `_fresh_state` of tests/conftest.py, which clears counters in REDIS_URL,
is replaced by one that does nothing."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _fresh_state():
    """Nothing to clear: the stack is private."""
    yield
