"""Settings of a deployment (docs/deploying.md): debug, the hosts and origins served, the proxies believed
(docs/decisions/0081-trusted-proxies.md), https (redirect, HSTS, secure cookies:
docs/decisions/0082-hsts-and-secure-cookies.md) and the secret key
(docs/decisions/0083-no-development-secret-key.md).

Part of gateway/settings/__init__.py, which puts what `from_env` and `secret_key` return beside its own.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from gateway.settings.environment import Environment, reader, trimmed

DEVELOPMENT_SECRET_KEY = "dev-only-insecure-secret-key-change-me"
SQLITE = "django.db.backends.sqlite3"


def from_env(env: Environment = None) -> dict:
    env = reader(env)
    found = {
        "DEBUG": env.bool("DEBUG", default=False),
        "ALLOWED_HOSTS": trimmed(env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]", "testserver"])),
        "CSRF_TRUSTED_ORIGINS": trimmed(env.list("CSRF_TRUSTED_ORIGINS", default=[])),
        # Proxies (addresses or CIDRs, comma list; "unix" for one on a Unix socket) whose X-Forwarded-For
        # and X-Forwarded-Proto are believed. From any other peer those headers are removed before
        # anything reads them (gateway.web.middleware.TrustedProxyMiddleware, first in MIDDLEWARE); the client
        # is the last X-Forwarded-For hop that is not one of these proxies (gateway/limits/ratelimit.py).
        "TRUSTED_PROXIES": trusted_proxies(trimmed(env.list("TRUSTED_PROXIES", default=[]))),
        # Believed only when the peer is one of TRUSTED_PROXIES (the header is removed otherwise).
        "SECURE_PROXY_SSL_HEADER": ("HTTP_X_FORWARDED_PROTO", "https"),
        # Spec 5.1.4: plain http is redirected to https in production.
        "SECURE_SSL_REDIRECT": env.bool("SECURE_SSL_REDIRECT", default=False),
        # Prometheus scrapes the pods over plain http: /metrics is never redirected (docs/operations.md).
        "SECURE_REDIRECT_EXEMPT": [r"^metrics$"],
        # Strict-Transport-Security on https answers: seconds (0: not sent), subdomains, preload list.
        "SECURE_HSTS_SECONDS": env.int("SECURE_HSTS_SECONDS", default=0),
        "SECURE_HSTS_INCLUDE_SUBDOMAINS": env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False),
        "SECURE_HSTS_PRELOAD": env.bool("SECURE_HSTS_PRELOAD", default=False),
    }
    if env.str("TRUSTED_PROXY_COUNT", default="") not in ("", "0"):  # retired: said so rather than ignored
        raise ImproperlyConfigured("TRUSTED_PROXY_COUNT is replaced by TRUSTED_PROXIES: list the addresses (or "
                                   "CIDRs) of the proxies in front, e.g. TRUSTED_PROXIES=10.0.0.0/8, and unset "
                                   "TRUSTED_PROXY_COUNT.")
    # The console's session and CSRF cookies only over https; both follow SECURE_SSL_REDIRECT unless set.
    # (An empty value, as in .env.example, counts as unset.)
    found["SESSION_COOKIE_SECURE"] = (env.bool("SESSION_COOKIE_SECURE") if env.str("SESSION_COOKIE_SECURE", "")
                                      else found["SECURE_SSL_REDIRECT"])
    found["CSRF_COOKIE_SECURE"] = (env.bool("CSRF_COOKIE_SECURE") if env.str("CSRF_COOKIE_SECURE", "")
                                   else found["SECURE_SSL_REDIRECT"])
    return found


def trusted_proxies(entries: list[str]) -> list[str]:
    for entry in entries:
        try:
            entry == "unix" or ipaddress.ip_network(entry, strict=False)
        except ValueError:
            raise ImproperlyConfigured(f"TRUSTED_PROXIES: {entry!r} is not an address, a CIDR or 'unix'.") from None
    return entries


def secret_key(env: Environment = None, *, debug: bool, var_dir: Path, databases: dict) -> dict:
    """SECRET_KEY from the environment, or from the file SECRET_KEY_FILE names (FileAwareEnv, as every
    setting's NAME_FILE). Without either, the embedded default (SQLite: one host) makes a random key once and
    keeps it in GATEWAY_VAR_DIR/secret-key (mode 0600), which every process of the install reads. The setting
    SECRET_KEY_FILE is the file the processes make or read the key in when a process starts
    (gateway/ops/process_start.py): that default one, or the operator's SECRET_KEY_FILE when it names a file not
    there yet on SQLite (made there, so a container's volume or a mounted folder keeps it); None when the key
    is in hand. On PostgreSQL every host must share one key, so it must be set, and a SECRET_KEY_FILE naming no
    file is refused rather than made per host. With DEBUG off the service refuses to start with no key, the
    development key, a key shorter than 50 characters, or one `check --deploy` calls weak (fewer than 5
    distinct characters)."""
    env = reader(env)
    sqlite = databases["default"]["ENGINE"] == SQLITE
    named = env.str("SECRET_KEY_FILE", default="")
    if named and not Path(named).exists():
        if not sqlite:
            raise ImproperlyConfigured(
                f"SECRET_KEY_FILE names {named}, which does not exist. On PostgreSQL every host must sign with one "
                "key, so none is made here: write the key (50 or more random characters) to that file on every "
                "host, or set SECRET_KEY.")
        return {"SECRET_KEY": "", "SECRET_KEY_FILE": Path(named), "DEVELOPMENT_SECRET_KEY": DEVELOPMENT_SECRET_KEY}
    key = env.str("SECRET_KEY", default="")  # SECRET_KEY_FILE's content when it names a file
    if named and not key.strip():
        raise ImproperlyConfigured(f"SECRET_KEY_FILE names {named}, which is empty: write the key in it, or "
                                   "remove the file and the embedded default (SQLite) makes one there.")
    kept = None
    if not key and sqlite:
        kept = var_dir / "secret-key"
    elif not key and debug:
        key = DEVELOPMENT_SECRET_KEY
    if not debug and not kept:
        problem = (
            "is not set" if not key
            else "is the development default" if key == DEVELOPMENT_SECRET_KEY
            else f"is {len(key)} characters long, fewer than 50" if len(key) < 50
            else "is too weak (fewer than 5 distinct characters, or Django's insecure prefix)"
            if len(set(key)) < 5 or key.startswith("django-insecure-")
            else ""
        )
        if problem:
            raise ImproperlyConfigured(
                f"SECRET_KEY {problem}, and DEBUG is off: refusing to start. Set SECRET_KEY in the "
                "environment (or .env) to a random value of 50 or more characters, the same on every host, "
                "for example the output of: python -c 'import secrets; print(secrets.token_urlsafe(50))'"
            )
    return {"SECRET_KEY": key, "SECRET_KEY_FILE": kept, "DEVELOPMENT_SECRET_KEY": DEVELOPMENT_SECRET_KEY}
