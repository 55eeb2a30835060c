"""The administration API's tests: a staff account signed in with a session token (as the login
endpoint makes one), and the helpers that call it with that token."""

import pytest

from tests.factories import AccountFactory, AccountGroupFactory, bearer, session_for

ADMIN = "/api/v1/admin"


@pytest.fixture
def staff(db):
    """A staff operator (a superuser: every permission of the console) whose own group has no API access:
    the administration API does not need it."""
    return AccountFactory(email="operator@example.test", is_staff=True, is_superuser=True,
                          group=AccountGroupFactory(name="operators", api_access=False))


@pytest.fixture
def staff_headers(staff):
    return bearer(session_for(staff))


class Api:
    """The test client with the staff session, JSON in and out."""

    def __init__(self, client, headers):
        self.client, self.headers = client, headers

    def get(self, path, **query):
        return self.client.get(ADMIN + path, query, headers=self.headers)

    def post(self, path, body=None):
        return self.client.post(ADMIN + path, body if body is not None else {}, content_type="application/json",
                                headers=self.headers)

    def patch(self, path, body):
        return self.client.patch(ADMIN + path, body, content_type="application/json", headers=self.headers)

    def delete(self, path):
        return self.client.delete(ADMIN + path, headers=self.headers)


@pytest.fixture
def api(client, staff_headers):
    return Api(client, staff_headers)
