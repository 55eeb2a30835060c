"""The console's middleware applies to the console only; the API answers without it. Checked on
a running ASGI server, where the middleware runs in async mode."""

import httpx
import pytest

from tests.factories import AccountFactory, AccountGroupFactory, api_key_for
from tests.servers import wait_for_quiet_database

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _quiet_teardown():
    yield
    wait_for_quiet_database()


def test_the_admin_works_under_asgi_with_sessions_csrf_and_static_files(live_gateway):
    AccountFactory(email="op@example.test", is_staff=True, is_superuser=True)
    with httpx.Client(base_url=live_gateway) as client:
        page = client.get("/admin/login/")
        assert page.status_code == 200
        assert "csrftoken" in client.cookies
        assert page.headers["X-Frame-Options"] == "DENY"
        token = client.cookies["csrftoken"]
        logged_in = client.post("/admin/login/?next=/admin/", data={
            "csrfmiddlewaretoken": token, "username": "op@example.test",
            "password": "correct horse battery staple", "next": "/admin/"})
        assert logged_in.status_code == 302 and logged_in.headers["location"] == "/admin/"
        assert client.get("/admin/").status_code == 200
        assert client.get("/static/admin/css/base.css").status_code == 200


def test_the_api_answers_without_the_consoles_middleware(live_gateway):
    key = api_key_for(AccountFactory(group=AccountGroupFactory(api_access=True)))
    r = httpx.get(f"{live_gateway}/api/v1/version", headers={"Authorization": f"Bearer {key}"})
    assert r.status_code == 200
    assert "set-cookie" not in r.headers
    assert "vary" not in r.headers  # no session or CSRF vary
    assert r.headers["x-content-type-options"] == "nosniff"  # the security middleware, inline
    assert r.headers["x-request-id"]
