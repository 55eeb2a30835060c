"""For the routine management tests: the routines path, the smallest valid create request, the fixture
`api` (the test client with the owner's API key), creating a routine, and the check of a 422."""

import re

import pytest

from tests.factories import api_key_for, bearer

ROUTINES = "/api/v1/routines"
HEX48 = re.compile(r"^[0-9a-f]{48}$")
HEX64 = re.compile(r"^[0-9a-f]{64}$")


def minimal(**extra):
    """The smallest valid request, with a schedule (a `schedule` routine may also go without one)."""
    return {"name": "Digest", "prompt": "Summarize the event.", "delivery_targets": ["inapp"],
            "schedule": "0 8 * * *", **extra}


@pytest.fixture(name="api")
def api_fixture(client, owner):
    key = api_key_for(owner)

    class Api:
        def post(self, path, data=None, **kw):
            return client.post(path, data or {}, content_type="application/json", headers=bearer(key), **kw)

        def put(self, path, data, **kw):
            return client.put(path, data, content_type="application/json", headers=bearer(key), **kw)

        def get(self, path, **kw):
            return client.get(path, headers=bearer(key), **kw)

        def delete(self, path, **kw):
            return client.delete(path, headers=bearer(key), **kw)

    return Api()


def create(api, **extra):
    r = api.post(ROUTINES, minimal(**extra))
    assert r.status_code == 201, r.content
    return r.json()


def assert_validation(response, field):
    assert response.status_code == 422, response.content
    body = response.json()
    assert set(body) == {"message", "errors"}
    assert isinstance(body["message"], str) and body["message"]
    assert field in body["errors"], body
    assert all(isinstance(m, str) for m in body["errors"][field])
    return body
