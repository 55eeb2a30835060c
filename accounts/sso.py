"""Operators' single sign-on with OpenID Connect (mozilla-django-oidc), on only when configured
(gateway/settings/sign_in.py): the authorization code flow with a nonce and PKCE, from the admin login
page's button to /admin/.

An identity reaches the console only as an existing account that is active and staff, found by the
e-mail address the provider says it verified (`email_verified`). With OIDC_CREATE_USER an unknown
address gets a new account, never a staff one, so it still cannot sign in until an operator grants
console access. Every refusal sends the browser back to the login page with the reason, and is
logged; the local password login is untouched. The API surfaces never use any of this.

mozilla-django-oidc leaves two checks to its users, made here: the ID token's issuer (when the
provider was discovered) and audience, and that the userinfo is about the ID token's subject.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlencode

import requests
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import SuspiciousOperation
from django.http import HttpResponseRedirect
from django.urls import reverse
from django.views.generic import View
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

logger = logging.getLogger(__name__)

DISCOVERY_KEPT_SECONDS = 3600  # a provider's endpoints and issuer, read again after this
UNREACHABLE = "The sign-in provider could not be reached; try again, or log in with your password."
FAILED = "Single sign-on failed; try again, or log in with your password."


class ProviderUnavailable(Exception):
    pass


@dataclass(frozen=True)
class Provider:
    issuer: str  # empty when the endpoints were given one by one: the ID token's issuer is then not checked
    authorization: str
    token: str
    userinfo: str
    jwks: str


_discovered: tuple[float, Provider] | None = None
_discovery_lock = threading.Lock()


def provider() -> Provider:
    """The provider's endpoints: the ones set one by one, else its discovery document (kept an hour)."""
    global _discovered
    if not settings.OIDC_OP_DISCOVERY_URL:
        return Provider("", settings.OIDC_OP_AUTHORIZATION_ENDPOINT, settings.OIDC_OP_TOKEN_ENDPOINT,
                        settings.OIDC_OP_USER_ENDPOINT, settings.OIDC_OP_JWKS_ENDPOINT)
    with _discovery_lock:
        if _discovered is None or time.monotonic() - _discovered[0] > DISCOVERY_KEPT_SECONDS:
            _discovered = (time.monotonic(), _discover(settings.OIDC_OP_DISCOVERY_URL))
        return _discovered[1]


def forget_provider() -> None:
    global _discovered
    with _discovery_lock:
        _discovered = None


def _discover(url: str) -> Provider:
    """The discovery document's endpoints; one also set on its own wins over the document's."""
    try:
        response = requests.get(url, timeout=settings.OIDC_TIMEOUT, verify=settings.OIDC_VERIFY_SSL)
        response.raise_for_status()
        document = response.json()
        return Provider(
            str(document["issuer"]),
            settings.OIDC_OP_AUTHORIZATION_ENDPOINT or str(document["authorization_endpoint"]),
            settings.OIDC_OP_TOKEN_ENDPOINT or str(document["token_endpoint"]),
            settings.OIDC_OP_USER_ENDPOINT or str(document["userinfo_endpoint"]),
            settings.OIDC_OP_JWKS_ENDPOINT or str(document.get("jwks_uri") or ""),
        )
    except (requests.RequestException, ValueError, KeyError, TypeError) as exc:
        logger.warning("single sign-on: the provider's discovery document %s could not be read: %s", url, exc)
        raise ProviderUnavailable(str(exc)) from None


def login_context(request) -> dict:
    """What the admin login page needs for its button (nothing when single sign-on is off)."""
    if not settings.OIDC_ENABLED:
        return {}
    target = request.GET.get("next") or reverse("admin:index")
    return {"sso_provider": settings.OIDC_PROVIDER_NAME,
            "sso_url": f"{reverse('oidc_authentication_init')}?{urlencode({'next': target})}"}


class OperatorSignOn(OIDCAuthenticationBackend):
    """mozilla-django-oidc's backend, for operators: existing, active, staff accounts by verified e-mail."""

    def __init__(self, *args, **kwargs):
        # Nothing read here: Django builds a backend for every request of a signed-in operator (get_user),
        # and the provider is only needed while signing in.
        self.UserModel = get_user_model()

    def authenticate(self, request, **kwargs):
        if request is None or "nonce" not in kwargs:
            return None  # only the callback view signs in with the provider, never a password form
        self.request = request
        endpoints = provider()
        self.provider = endpoints
        self.OIDC_OP_TOKEN_ENDPOINT = endpoints.token
        self.OIDC_OP_USER_ENDPOINT = endpoints.userinfo
        self.OIDC_OP_JWKS_ENDPOINT = endpoints.jwks or None
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
        self.OIDC_RP_CLIENT_SECRET = settings.OIDC_RP_CLIENT_SECRET
        self.OIDC_RP_SIGN_ALGO = settings.OIDC_RP_SIGN_ALGO
        self.OIDC_RP_IDP_SIGN_KEY = None
        return super().authenticate(request, **kwargs)

    def verify_token(self, token, **kwargs):
        payload = super().verify_token(token, **kwargs)  # signature, expiry and nonce
        if "nonce" in kwargs:  # the ID token (a signed userinfo answer has no audience of its own to check)
            audience = payload.get("aud")
            audiences = [audience] if isinstance(audience, str) else list(audience or [])
            if self.OIDC_RP_CLIENT_ID not in audiences:
                raise SuspiciousOperation("The ID token is not for this client (aud).")
            if self.provider.issuer and payload.get("iss") != self.provider.issuer:
                raise SuspiciousOperation("The ID token comes from another issuer (iss).")
        return payload

    def get_userinfo(self, access_token, id_token, payload):
        claims = super().get_userinfo(access_token, id_token, payload)
        if not isinstance(claims, dict) or claims.get("sub") != payload.get("sub"):
            raise SuspiciousOperation("The userinfo is about another subject than the ID token.")
        return claims

    def verify_claims(self, claims):
        if not claims.get("email"):
            return self._refused("The provider gave no e-mail address.", claims, False)
        if claims.get("email_verified") not in (True, "true"):
            return self._refused(f"The provider has not verified the e-mail address {claims['email']}.", claims, False)
        return True

    def filter_users_by_claims(self, claims):
        return self.UserModel.objects.filter(email__iexact=claims["email"].strip())

    def create_user(self, claims):
        """Only with OIDC_CREATE_USER: an account that may not use the console until an operator says so."""
        account = self.UserModel.objects.create_user(claims["email"].strip(), password=None,
                                                     full_name=str(claims.get("name") or "")[:200])
        logger.info("single sign-on: account %s created for the provider's identity (not staff)", account.email)
        return account

    def get_or_create_user(self, access_token, id_token, payload):
        account = super().get_or_create_user(access_token, id_token, payload)
        if account is None:
            return self._refused("No operator account has this e-mail address.", payload, None)
        if not account.is_active or not account.is_staff:
            return self._refused(f"{account.email} may not use the console.", payload, None)
        return account

    def get_user(self, user_id):
        return ModelBackend.get_user(self, user_id)  # an inactive account is no longer signed in

    def _refused(self, reason: str, claims: dict, answer):
        logger.warning("single sign-on refused (subject %s): %s", claims.get("sub"), reason)
        self.request.sso_refusal = reason
        return answer


def _to_login(request, message: str) -> HttpResponseRedirect:
    messages.error(request, message)
    next_url = request.session.get("oidc_login_next") if hasattr(request, "session") else None
    query = f"?{urlencode({'next': next_url})}" if next_url else ""
    return HttpResponseRedirect(reverse("admin:login") + query)


class SignOnStart(OIDCAuthenticationRequestView):
    """The login page's button: to the provider's authorization endpoint, with state, nonce and PKCE."""

    def __init__(self, *args, **kwargs):
        View.__init__(self, *args, **kwargs)  # the endpoint is read per request (the provider may be down)
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID

    def get(self, request):
        try:
            self.OIDC_OP_AUTH_ENDPOINT = provider().authorization
        except ProviderUnavailable:
            return _to_login(request, UNREACHABLE)
        return super().get(request)


class SignOnCallback(OIDCAuthenticationCallbackView):
    """The provider's answer: a wrong state or nonce, a bad token, a refused identity or an unreachable
    provider each end on the login page with the reason, never as an error page."""

    @property
    def success_url(self):
        return self.request.session.get("oidc_login_next") or reverse("admin:index")

    def login_failure(self):
        reason = getattr(self.request, "sso_refusal", None)
        if reason is None and self.request.GET.get("error"):
            reason = f"The provider refused the sign-in ({self.request.GET['error'][:100]})."
        return _to_login(self.request, reason or FAILED)

    def get(self, request):
        try:
            return super().get(request)
        except SuspiciousOperation as exc:  # state unknown, nonce or signature wrong, token not for us
            logger.warning("single sign-on refused: %s", exc)
            return _to_login(request, FAILED)
        except (requests.RequestException, ProviderUnavailable, ValueError) as exc:
            logger.warning("single sign-on: the provider could not be used: %s", exc)
            return _to_login(request, UNREACHABLE)
