"""Single sign-on off unless configured: with no OIDC_* variable nothing changes (no
route, no backend, no button, no middleware); a half configuration stops the start with a message naming
the variables; and the provider's backend never answers a password form, even one whose URL carries a
code and a state."""

import pytest
from django.conf import settings
from django.test import RequestFactory

from accounts import sso
from gateway.settings import sign_in
from tests.factories import AccountFactory

pytestmark = pytest.mark.django_db


def test_with_no_oidc_variable_the_console_is_as_it_was(client):
    assert not settings.OIDC_ENABLED
    assert settings.AUTHENTICATION_BACKENDS == ["django.contrib.auth.backends.ModelBackend"]
    assert not [m for m in [*settings.MIDDLEWARE, *settings.CONSOLE_MIDDLEWARE] if "oidc" in m.lower()]
    page = client.get("/admin/login/?next=/admin/")
    assert page.status_code == 200
    assert "sso-login" not in page.content.decode() and "Sign in with" not in page.content.decode()
    client.force_login(AccountFactory(is_staff=True))  # the admin sends an anonymous visitor of any path to login
    for path in ("/admin/oidc/authenticate/", "/admin/oidc/callback/?code=x&state=y"):
        assert client.get(path).status_code == 404


@pytest.mark.parametrize(("variables", "message"), [
    ({"OIDC_RP_CLIENT_ID": "gateway"}, "OIDC_RP_CLIENT_ID is set but OIDC_RP_CLIENT_SECRET is not"),
    ({"OIDC_RP_CLIENT_ID": "gateway", "OIDC_RP_CLIENT_SECRET": "s"}, "needs the provider's OIDC_OP_DISCOVERY_URL"),
    ({"OIDC_RP_CLIENT_ID": "gateway", "OIDC_RP_CLIENT_SECRET": "s", "OIDC_OP_AUTHORIZATION_ENDPOINT": "https://i/a",
      "OIDC_OP_TOKEN_ENDPOINT": "https://i/t", "OIDC_OP_USER_ENDPOINT": "https://i/u"},
     "OIDC_RP_SIGN_ALGO RS256 needs the provider's keys"),
    ({"OIDC_RP_CLIENT_ID": "gateway", "OIDC_RP_CLIENT_SECRET": "s", "OIDC_OP_DISCOVERY_URL": "https://i/d",
      "OIDC_RP_SIGN_ALGO": "none"}, "is not a JWS algorithm"),
])
def test_a_half_configuration_stops_the_start_naming_what_is_missing(variables, message):
    from django.core.exceptions import ImproperlyConfigured

    with pytest.raises(ImproperlyConfigured, match=message):
        sign_in.from_env(variables)


def test_a_full_configuration_turns_it_on_with_the_providers_backend_beside_the_password():
    on = sign_in.from_env({"OIDC_RP_CLIENT_ID": "gateway", "OIDC_RP_CLIENT_SECRET": "s",
                           "OIDC_OP_DISCOVERY_URL": "https://idp.example/.well-known/openid-configuration"})
    assert on["OIDC_ENABLED"] and on["OIDC_RP_SIGN_ALGO"] == "RS256" and on["OIDC_CREATE_USER"] is False
    assert on["AUTHENTICATION_BACKENDS"] == ["django.contrib.auth.backends.ModelBackend",
                                             "accounts.sso.OperatorSignOn"]
    assert (on["OIDC_USE_NONCE"], on["OIDC_USE_PKCE"]) == (True, True)
    assert not sign_in.from_env({})["OIDC_ENABLED"]  # nothing set: off


def test_the_providers_backend_never_answers_a_password_form(settings):
    """Django asks every backend about a login form; the provider's answers only its own callback
    (which passes the nonce it kept), so a code and state in a form's URL reach no provider."""
    settings.OIDC_RP_CLIENT_ID, settings.OIDC_RP_CLIENT_SECRET = "gateway", "s"
    settings.OIDC_OP_DISCOVERY_URL = "https://127.0.0.1:9/.well-known/openid-configuration"  # nothing listens
    request = RequestFactory().post("/admin/login/?code=stolen&state=s", {"username": "a@b.test", "password": "p"})
    assert sso.OperatorSignOn().authenticate(request, username="a@b.test", password="p") is None
    assert sso.OperatorSignOn().authenticate(None, nonce="n") is None
