"""Fixtures of the multi-host tests: one stack of hosts in network namespaces for the whole folder
(tests/scale/cluster.py), every gateway host running again before each test, the logs shown when a
test fails. These tests use no database or Redis of the test run: the `_fresh_state` of
tests/conftest.py is replaced by one that does nothing."""

from __future__ import annotations

import pytest

from tests.scale.cluster import Cluster, running_cluster


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item._scale_failed = report.failed


@pytest.fixture(autouse=True)
def _fresh_state():
    """Nothing to clear: the stack is private."""
    yield


@pytest.fixture(scope="package")
def cluster():
    """Up for the tests of this folder, stopped once they are done (not at the end of the whole suite)."""
    with running_cluster() as c:
        print(f"\nthe multi-host stack came up in {c.timings}")
        yield c


@pytest.fixture
def hosts(cluster: Cluster, request):
    """The stack with every gateway host running and in the balancer's rotation."""
    cluster.ensure_running()
    yield cluster
    if getattr(request.node, "_scale_failed", False):
        print(f"\n===== logs of the stack in {cluster.base} =====\n{cluster.tail()}")
