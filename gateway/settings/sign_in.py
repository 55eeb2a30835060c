"""Settings of signing in: the console's password login (its limits, the password rules) and the operators'
single sign-on with OpenID Connect (accounts/sso.py, mozilla-django-oidc).

Single sign-on is off unless OIDC_RP_CLIENT_ID is set: then there is no route, no authentication backend and no button,
and the console's local password login is all there is. On, the admin login page gains a "Sign in with
<OIDC_PROVIDER_NAME>" button; an identity reaches the console only as an existing, active staff account
whose e-mail the provider says it verified. The API surfaces (/v1, /api) never look at any of this.

Part of gateway/settings/__init__.py, which puts what `from_env` returns beside its own.
"""

from django.core.exceptions import ImproperlyConfigured

from gateway.settings.environment import Environment, reader

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]


def from_env(env: Environment = None) -> dict:
    env = reader(env)
    found = {
        # Admin login tries per minute (POST /admin/login/): from one client address, and for one account.
        "ADMIN_LOGIN_LIMIT_PER_ADDRESS": env.int("ADMIN_LOGIN_LIMIT_PER_ADDRESS", default=10),
        "ADMIN_LOGIN_LIMIT_PER_ACCOUNT": env.int("ADMIN_LOGIN_LIMIT_PER_ACCOUNT", default=5),
        "AUTH_PASSWORD_VALIDATORS": AUTH_PASSWORD_VALIDATORS,
        # --- Single sign-on (OpenID Connect) ---
        # The client this gateway is at the provider (its "relying party" registration). Empty: single sign-on
        # off.
        "OIDC_RP_CLIENT_ID": env.str("OIDC_RP_CLIENT_ID", default="").strip(),
        "OIDC_RP_CLIENT_SECRET": env.str("OIDC_RP_CLIENT_SECRET", default=""),
        # The provider's discovery document (https://idp.example/.well-known/openid-configuration), read on the
        # first sign-in and kept for an hour; or, instead, its four endpoints.
        "OIDC_OP_DISCOVERY_URL": env.str("OIDC_OP_DISCOVERY_URL", default="").strip(),
        "OIDC_OP_AUTHORIZATION_ENDPOINT": env.str("OIDC_OP_AUTHORIZATION_ENDPOINT", default="").strip(),
        "OIDC_OP_TOKEN_ENDPOINT": env.str("OIDC_OP_TOKEN_ENDPOINT", default="").strip(),
        "OIDC_OP_USER_ENDPOINT": env.str("OIDC_OP_USER_ENDPOINT", default="").strip(),
        "OIDC_OP_JWKS_ENDPOINT": env.str("OIDC_OP_JWKS_ENDPOINT", default="").strip(),
        # How the provider signs its ID tokens: RS256 (its keys, from the JWKS endpoint) unless it says
        # otherwise; HS256 signs with the client secret.
        "OIDC_RP_SIGN_ALGO": env.str("OIDC_RP_SIGN_ALGO", default="RS256").strip(),
        # The name on the login page's button: "Sign in with <name>".
        "OIDC_PROVIDER_NAME": env.str("OIDC_PROVIDER_NAME", default="single sign-on").strip() or "single sign-on",
        # An identity whose verified e-mail matches no account: refused (false), or given a new account (true),
        # never a staff one: an operator grants console access in the admin.
        "OIDC_CREATE_USER": env.bool("OIDC_CREATE_USER", default=False),
        # Seconds to wait for the provider (discovery, token, userinfo and keys); false: do not verify its TLS
        # certificate.
        "OIDC_TIMEOUT": env.float("OIDC_TIMEOUT_SECONDS", default=10.0),
        "OIDC_VERIFY_SSL": env.bool("OIDC_VERIFY_SSL", default=True),
        # mozilla-django-oidc's own settings, fixed: a nonce and PKCE on every sign-in, scopes for the e-mail.
        "OIDC_RP_SCOPES": "openid email profile",
        "OIDC_USE_NONCE": True,
        "OIDC_USE_PKCE": True,
        "OIDC_STORE_ACCESS_TOKEN": False,
        "OIDC_STORE_ID_TOKEN": False,
    }
    found["OIDC_ENABLED"] = bool(found["OIDC_RP_CLIENT_ID"])
    if found["OIDC_ENABLED"]:
        refuse_half_configuration(found)
    # Password login always; the provider's sign-in only when configured (nothing else changes when it is not).
    found["AUTHENTICATION_BACKENDS"] = ["django.contrib.auth.backends.ModelBackend",
                                        *(["accounts.sso.OperatorSignOn"] if found["OIDC_ENABLED"] else [])]
    return found


def refuse_half_configuration(found: dict) -> None:
    discovery, algorithm = found["OIDC_OP_DISCOVERY_URL"], found["OIDC_RP_SIGN_ALGO"]
    endpoints = (found["OIDC_OP_AUTHORIZATION_ENDPOINT"], found["OIDC_OP_TOKEN_ENDPOINT"],
                 found["OIDC_OP_USER_ENDPOINT"])
    if not found["OIDC_RP_CLIENT_SECRET"]:
        raise ImproperlyConfigured("OIDC_RP_CLIENT_ID is set but OIDC_RP_CLIENT_SECRET is not: set both, or neither "
                                   "(single sign-on off).")
    if not discovery and not all(endpoints):
        raise ImproperlyConfigured("Single sign-on needs the provider's OIDC_OP_DISCOVERY_URL, or its "
                                   "OIDC_OP_AUTHORIZATION_ENDPOINT, OIDC_OP_TOKEN_ENDPOINT and OIDC_OP_USER_ENDPOINT "
                                   "(and OIDC_OP_JWKS_ENDPOINT for RS and ES signatures).")
    if algorithm[:2] not in ("RS", "ES", "PS", "HS"):
        raise ImproperlyConfigured(f"OIDC_RP_SIGN_ALGO: {algorithm!r} is not a JWS algorithm such as RS256.")
    if not discovery and not algorithm.startswith("HS") and not found["OIDC_OP_JWKS_ENDPOINT"]:
        raise ImproperlyConfigured(f"OIDC_RP_SIGN_ALGO {algorithm} needs the provider's keys: set "
                                   "OIDC_OP_JWKS_ENDPOINT or OIDC_OP_DISCOVERY_URL.")
