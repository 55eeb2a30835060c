"""Operators' single sign-on with OpenID Connect, against a real provider started on
loopback (tests/accounts/oidc_provider.py, pyop): the whole authorization code flow over HTTP, from the
login page's button to /admin/, as a browser makes it (httpx keeping the cookies of both).

A staff account signs in by its verified e-mail; an unknown e-mail, a non-staff account, an unverified
e-mail, a wrong state and a wrong nonce are each refused on the login page, signed in as nobody. The
password login stays, and the API surfaces do not take the console's session."""

import contextlib
import html
import re
import sys
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import httpx
import pytest

from accounts.models import Account
from tests.accounts.oidc_provider import CLIENT_ID, CLIENT_SECRET, running_provider
from tests.factories import PASSWORD, AccountFactory, AccountGroupFactory, api_key_for, bearer
from tests.servers import answers_on, child_env, free_port, server_process, wait_for_quiet_database

pytestmark = pytest.mark.django_db(transaction=True)

PROVIDER_NAME = "Loopback IdP"
USERS = {
    "olive": {"email": "Olive.Operator@Example.test", "email_verified": True, "name": "Olive Operator"},
    "nina": {"email": "nina@example.test", "email_verified": True, "name": "Nina Nonstaff"},
    "ursula": {"email": "ursula@example.test", "email_verified": False, "name": "Ursula Unverified"},
    "stranger": {"email": "stranger@example.test", "email_verified": True, "name": "Sam Stranger"},
    "ivan": {"email": "ivan@example.test", "email_verified": True, "name": "Ivan Inactive"},
}


@contextlib.contextmanager
def gateway_with_sso(folder, **extra_env):
    """The gateway under uvicorn with single sign-on pointed at a provider on loopback: (base, provider)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with running_provider(folder, port=free_port(), redirect_uri=f"{base}/admin/oidc/callback/",
                          users=USERS) as provider:
        env = child_env(OIDC_RP_CLIENT_ID=CLIENT_ID, OIDC_RP_CLIENT_SECRET=CLIENT_SECRET,
                        OIDC_OP_DISCOVERY_URL=provider.discovery_url, OIDC_PROVIDER_NAME=PROVIDER_NAME,
                        REQUESTS_CA_BUNDLE=str(provider.ca_file), REGISTRY_TTL_SECONDS="0", **extra_env)
        args = [sys.executable, "-m", "uvicorn", "gateway.asgi:application", "--host", "127.0.0.1",
                "--port", str(port), "--log-level", "warning"]
        with server_process(args, name=f"web-sso-{port}", ready=answers_on(port), env=env):
            yield base, provider


@pytest.fixture(scope="module")
def sso(django_db_setup, django_db_blocker, tmp_path_factory):
    with django_db_blocker.unblock(), gateway_with_sso(tmp_path_factory.mktemp("idp")) as world:
        yield world


@pytest.fixture(autouse=True)
def _quiet_teardown():
    yield
    wait_for_quiet_database()


@pytest.fixture
def people():
    group = AccountGroupFactory(name="operators")
    return {
        "olive": AccountFactory(email="olive.operator@example.test", is_staff=True, group=group),
        "nina": AccountFactory(email="nina@example.test", is_staff=False, group=group),
        "ursula": AccountFactory(email="ursula@example.test", is_staff=True, group=group),
        "ivan": AccountFactory(email="ivan@example.test", is_staff=True, is_active=False, group=group),
    }


def browser(provider) -> httpx.Client:
    """A cookie jar for the gateway and the provider; the provider's certificate is trusted."""
    return httpx.Client(verify=provider.trust(), follow_redirects=True, timeout=30)


def sso_button(client, base) -> str:
    page = client.get(f"{base}/admin/login/?next=/admin/")
    assert page.status_code == 200
    found = re.search(r'<div id="sso-login".*?href="([^"]+)"[^>]*>\s*Sign in with ([^<]+?)\s*<', page.text, re.S)
    assert found, page.text[-3000:]
    assert found.group(2) == PROVIDER_NAME
    return base + html.unescape(found.group(1))


def provider_form(client, url) -> str:
    """The provider's sign-in form reached from `url`; the action it posts to."""
    page = client.get(url)
    assert page.status_code == 200 and "<h1>Sign in</h1>" in page.text, page.text[:500]
    return html.unescape(re.search(r"action='([^']+)'", page.text).group(1))


def sign_in(client, base, provider, username) -> httpx.Response:
    """The whole flow: the button, the provider's form, back to the gateway wherever it sends the browser."""
    action = provider_form(client, sso_button(client, base))
    return client.post(provider.issuer + action, data={"username": username})


def refusal(page: httpx.Response) -> str:
    assert urlsplit(str(page.url)).path == "/admin/login/", page.url
    assert page.status_code == 200
    assert 'id="sso-login"' in page.text  # the login page again, the button with it
    return html.unescape(page.text)


def signed_in(client, base) -> bool:
    answer = client.get(f"{base}/admin/", follow_redirects=False)
    assert answer.status_code in (200, 302), answer.status_code
    return answer.status_code == 200


def with_query(url: str, **changes) -> str:
    parts = urlsplit(url)
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    return urlunsplit(parts._replace(query=urlencode({**query, **changes})))


def test_it_signs_a_staff_account_in_by_its_verified_email_and_reaches_the_console(sso, people):
    base, provider = sso
    with browser(provider) as client:
        page = sign_in(client, base, provider, "olive")
        assert urlsplit(str(page.url)).path == "/admin/"
        assert page.status_code == 200
        assert "olive.operator@example.test" in page.text.lower()  # the console names who is signed in
        assert signed_in(client, base)
        # the console's session is no credential of the API surfaces
        assert client.get(f"{base}/api/auth/me").status_code == 401
        assert client.get(f"{base}/v1/models").status_code == 401
    assert Account.objects.count() == 4  # nobody created


@pytest.mark.parametrize(("username", "reason"), [
    ("stranger", "No operator account has this e-mail address."),
    ("nina", "nina@example.test may not use the console."),
    ("ursula", "The provider has not verified the e-mail address ursula@example.test."),
    ("ivan", "ivan@example.test may not use the console."),
])
def test_it_refuses_an_identity_that_is_no_active_staff_account_with_a_verified_email(sso, people, username, reason):
    base, provider = sso
    with browser(provider) as client:
        text = refusal(sign_in(client, base, provider, username))
        assert reason in text
        assert not signed_in(client, base)
    assert not Account.objects.filter(email="stranger@example.test").exists()  # OIDC_CREATE_USER is off


def test_a_callback_with_a_state_this_browser_never_sent_is_refused(sso, people):
    base, provider = sso
    with browser(provider) as client:
        action = provider_form(client, sso_button(client, base))
        answer = client.post(provider.issuer + action, data={"username": "olive"}, follow_redirects=False)
        assert answer.status_code == 303
        callback = answer.headers["Location"]
        assert callback.startswith(f"{base}/admin/oidc/callback/?")
        text = refusal(client.get(with_query(callback, state="a-state-of-another-sign-in")))
        assert "Single sign-on failed" in text
        assert not signed_in(client, base)


def test_an_id_token_with_another_nonce_than_the_sign_in_asked_for_is_refused(sso, people):
    """The authorization request reaches the provider with its nonce changed on the way: the provider
    signs an ID token for that nonce, which is not the one the gateway keeps for this sign-in."""
    base, provider = sso
    with browser(provider) as client:
        start = client.get(sso_button(client, base), follow_redirects=False)
        assert start.status_code == 302
        authorize = start.headers["Location"]
        assert authorize.startswith(f"{provider.issuer}/authorize?")
        sent = parse_qs(urlsplit(authorize).query)
        assert sent["nonce"][0] and sent["state"][0] and sent["code_challenge_method"] == ["S256"]
        action = provider_form(client, with_query(authorize, nonce="a-nonce-the-gateway-never-made"))
        text = refusal(client.post(provider.issuer + action, data={"username": "olive"}))
        assert "Single sign-on failed" in text
        assert not signed_in(client, base)


def test_the_password_login_stays_beside_the_button(sso, people):
    base, provider = sso
    with browser(provider) as client:
        page = client.get(f"{base}/admin/login/?next=/admin/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        answer = client.post(f"{base}/admin/login/?next=/admin/", data={
            "csrfmiddlewaretoken": token, "username": "olive.operator@example.test", "password": PASSWORD,
            "next": "/admin/"}, headers={"Referer": f"{base}/admin/login/"})
        assert urlsplit(str(answer.url)).path == "/admin/" and answer.status_code == 200
        assert signed_in(client, base)


def test_the_api_answers_as_before_with_single_sign_on_on(sso, people):
    base, _provider = sso
    key = api_key_for(people["olive"])
    assert httpx.get(f"{base}/api/v1/auth/verify", headers=bearer(key)).status_code == 200
    assert httpx.get(f"{base}/v1/models", headers=bearer("svc_usr_0_wrong")).status_code == 401


def test_with_oidc_create_user_an_unknown_identity_gets_an_account_that_still_cannot_sign_in(
        tmp_path_factory, people):
    with gateway_with_sso(tmp_path_factory.mktemp("idp"), OIDC_CREATE_USER="true") as (base, provider):
        with browser(provider) as client:
            text = refusal(sign_in(client, base, provider, "stranger"))
            assert "stranger@example.test may not use the console." in text
            assert not signed_in(client, base)
    created = Account.objects.get(email="stranger@example.test")
    assert (created.is_staff, created.is_superuser, created.is_active, created.full_name) == (
        False, False, True, "Sam Stranger")
    assert not created.has_usable_password()
