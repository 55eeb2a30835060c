"""The operator who signs in to the console (`operator`); and every browser test that uses the
database waits, before its teardown empties it, until the server processes it drove have written what
they spool (tests/servers.py `wait_for_quiet_database`)."""

import pytest

from tests.factories import AccountFactory
from tests.servers import wait_for_quiet_database


@pytest.fixture(autouse=True)
def _quiet_teardown(request):
    yield
    if request.node.get_closest_marker("django_db"):
        wait_for_quiet_database()


@pytest.fixture
def operator():
    return AccountFactory(email="operator@example.test", is_staff=True, is_superuser=True)
