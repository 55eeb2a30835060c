"""Fixtures of the fault tests: one private stack for the whole module (tests/faults/stack.py),
brought back to running before each test, and its logs shown when a test fails.

These tests use no database or Redis of the test run: the `_fresh_state` of tests/conftest.py,
which clears counters in REDIS_URL, is replaced here by one that does nothing."""

from __future__ import annotations

import pytest

from tests.faults.stack import Stack, running_stack


def pytest_configure(config):
    config.addinivalue_line("markers", "faults: starts a private stack and injects process, Redis and "
                                       "PostgreSQL faults (tests/faults; `bin/test tests/faults`)")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "tests/faults/" in item.nodeid.replace("\\", "/"):
            item.add_marker(pytest.mark.faults)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item._faults_failed = report.failed


@pytest.fixture(autouse=True)
def _fresh_state():
    """Nothing to clear: the stack is private."""
    yield


@pytest.fixture(scope="session")
def stack():
    from tests.contract import LIVE_BASES

    with running_stack() as s:
        LIVE_BASES.add(s.url)  # its answers are held to the OpenAPI document like any other
        try:
            yield s
        finally:
            LIVE_BASES.discard(s.url)


@pytest.fixture
def live(stack: Stack, request):
    """The stack with every process running; its logs are printed when the test fails."""
    stack.ensure_running()
    stack.upstream_control(latency_ms=60, fail_status=None, fail_times=-1)
    yield stack
    if getattr(request.node, "_faults_failed", False):
        print(f"\n===== logs of the stack in {stack.base} =====\n{stack.tail()}")
