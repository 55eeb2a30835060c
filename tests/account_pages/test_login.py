"""The account pages' session login (/account/login/): the API login's password check, lockout and
per-address ceiling, a session that opens only the account's own pages (never /admin/), logout, CSRF."""

import re

import pytest
from django.test import Client

from accounts.models import Account
from tests.factories import PASSWORD, AccountFactory

LOGIN = "/account/login/"
pytestmark = pytest.mark.django_db


def log_in(client, email, password=PASSWORD, remote="127.0.0.1", **extra):
    return client.post(LOGIN, {"email": email, "password": password, **extra}, REMOTE_ADDR=remote)


def refusal(response) -> int | None:
    """The status the API's login gives the same try, as the page's error carries it (the page itself
    answers 200, a form shown again); None when the page shows no refusal."""
    assert response.status_code == 200
    found = re.search(r'id="login-error" role="alert" data-refusal="(\d+)"', response.content.decode())
    return int(found.group(1)) if found else None


def test_a_page_without_a_session_leads_to_the_login_and_back(client, owner):
    r = client.get("/account/calls/")
    assert r.status_code == 302
    assert r["Location"] == "/account/login/?next=/account/calls/"
    r = client.get(r["Location"])
    assert r.status_code == 200
    assert 'id="account-login-form"' in r.content.decode()
    r = log_in(client, owner.email, next="/account/calls/")
    assert r.status_code == 302 and r["Location"] == "/account/calls/"
    assert client.get("/account/calls/").status_code == 200


def test_a_next_outside_the_account_pages_is_not_followed(client, owner):
    r = log_in(client, owner.email, next="https://elsewhere.example/")
    assert r["Location"] == "/account/"
    client.logout()
    assert log_in(client, owner.email, next="/admin/")["Location"] == "/account/"


def test_a_wrong_password_and_an_unknown_email_get_the_api_login_words(client, owner):
    wrong = log_in(client, owner.email, "not the password")
    unknown = log_in(client, "nobody@example.test")
    for r in (wrong, unknown):
        assert refusal(r) == 401
        assert "These credentials do not match our records." in r.content.decode()
    assert client.get("/account/").status_code == 302  # no session


def test_five_failures_lock_the_account_as_the_api_login_does(client, owner):
    for _ in range(4):
        assert refusal(log_in(client, owner.email, "wrong")) == 401
    r = log_in(client, owner.email, "wrong")
    assert refusal(r) == 423
    assert "The account is locked; try again in 30 minute(s)." in r.content.decode()
    assert 1700 < int(r["Retry-After"]) <= 1800
    owner.refresh_from_db()
    assert owner.is_locked()
    # the right password is refused while locked, here and on the API
    assert refusal(log_in(client, owner.email)) == 423
    api = client.post("/api/v1/auth/login", {"email": owner.email, "password": PASSWORD},
                      content_type="application/json", REMOTE_ADDR="127.0.0.2")
    assert api.status_code == 423


def test_failures_on_the_api_and_on_the_page_count_together(client, owner):
    for _ in range(3):
        client.post("/api/v1/auth/login", {"email": owner.email, "password": "wrong"},
                    content_type="application/json", REMOTE_ADDR="127.0.0.3")
    assert refusal(log_in(client, owner.email, "wrong")) == 401
    assert refusal(log_in(client, owner.email, "wrong")) == 423


def test_a_deactivated_account_is_refused(client):
    gone = AccountFactory(is_active=False)
    r = log_in(client, gone.email)
    assert refusal(r) == 403
    assert "This account is deactivated." in r.content.decode()


def test_the_login_shares_the_api_logins_ceiling_per_address(client, owner, settings):
    ceiling = settings.RATE_LIMITS["login"]
    for _ in range(ceiling):
        assert refusal(log_in(client, "nobody@example.test", remote="10.0.0.9")) == 401
    r = log_in(client, owner.email, remote="10.0.0.9")
    assert r.status_code == 429
    assert int(r["Retry-After"]) >= 1
    assert "Too many login attempts from this address." in r.content.decode()
    assert log_in(client, owner.email, remote="10.0.0.10").status_code == 302  # another address


def test_a_form_with_no_email_is_refused_with_the_fields_error(client):
    r = client.post(LOGIN, {"email": "", "password": "x"})
    assert refusal(r) is None
    assert 'id="email-errors"' in r.content.decode()


def test_logout_is_a_post_and_ends_the_session(client, owner):
    client.force_login(owner)
    assert client.get("/account/logout/").status_code == 405
    r = client.post("/account/logout/")
    assert r.status_code == 302 and r["Location"] == "/account/login/"
    assert client.get("/account/").status_code == 302


def test_forms_need_the_csrf_token(owner):
    browser = Client(enforce_csrf_checks=True)
    assert log_in(browser, owner.email).status_code == 403
    page = browser.get(LOGIN).content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    assert log_in(browser, owner.email, csrfmiddlewaretoken=token).status_code == 302
    assert browser.post("/account/logout/").status_code == 403
    assert browser.post("/account/key/revoke/").status_code == 403


@pytest.mark.parametrize("path", ["/admin/", "/admin/accounts/account/", "/admin/gateway/callrecord/",
                                  "/admin/routines/routine/"])
def test_a_non_staff_session_never_reaches_the_console(client, owner, path):
    assert log_in(client, owner.email).status_code == 302
    r = client.get(path)
    assert r.status_code == 302
    assert r["Location"].startswith("/admin/login/")
    assert client.get(r["Location"]).status_code == 200  # the console's login, not the page asked
    assert not Account.objects.get(pk=owner.pk).is_staff


def test_the_page_answers_without_the_trailing_slash(client):
    r = client.get("/account")
    assert r.status_code == 302 and r["Location"] == "/account/"
