"""Deployment settings, with DEBUG off: the SECRET_KEY refusal, HSTS, secure
cookies, forwarded headers believed only from TRUSTED_PROXIES, `check --deploy` clean with
production settings, and `Cache-Control: no-store` on every answer that carries a secret.

What the settings make of an environment is `gateway.settings.from_env` of it, in this process (the
settings only read); a fresh process is started only where the process is the point: `manage.py check
--deploy` as a whole, and the embedded default's secret key made by the first process and read by the next."""

import hashlib
import os
import secrets
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpResponse
from django.test import Client, RequestFactory

from gateway.limits.ratelimit import client_address
from gateway.ops.process_start import kept_secret_key
from gateway.settings import from_env
from gateway.web.middleware import TrustedProxyMiddleware
from tests.factories import PASSWORD, AccountFactory, api_key_for, bearer, session_for

ROOT = Path(__file__).resolve().parents[3]
GOOD_KEY = secrets.token_urlsafe(50)
PRODUCTION = {
    "DEBUG": "false",
    "SECRET_KEY": GOOD_KEY,
    "ALLOWED_HOSTS": "gw.example.com",
    "SECURE_SSL_REDIRECT": "true",
    "SECURE_HSTS_SECONDS": "31536000",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS": "true",
    "SECURE_HSTS_PRELOAD": "true",
    "TRUSTED_PROXIES": "10.0.0.0/8",
}
# Every variable a test run may have set that the settings read (for the processes `check --deploy` runs in).
SETTINGS_VARS = {"SECRET_KEY", "DEBUG", "DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "GATEWAY_VAR_DIR",
                 "SECURE_SSL_REDIRECT", "SECURE_HSTS_SECONDS", "SECURE_HSTS_INCLUDE_SUBDOMAINS", "SECURE_HSTS_PRELOAD",
                 "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", "TRUSTED_PROXIES", "TRUSTED_PROXY_COUNT",
                 "ALLOWED_HOSTS", "DJANGO_SETTINGS_MODULE"}


def run_python(tmp_path, code: str, **env: str) -> subprocess.CompletedProcess:
    """`code` in a fresh interpreter with the settings' environment `env` (nothing inherited)."""
    base = {k: v for k, v in os.environ.items() if k not in SETTINGS_VARS}
    base.update({"DJANGO_SETTINGS_MODULE": "gateway.settings", "GATEWAY_VAR_DIR": str(tmp_path / "var")}, **env)
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=base, capture_output=True, text=True,
                          timeout=120)


def settings_in(tmp_path, *names: str, **env: str) -> dict:
    """The settings `names` of the environment `env` alone (nothing of the test run's)."""
    found = from_env({"GATEWAY_VAR_DIR": str(tmp_path / "var"), **env})
    return {name: found[name] for name in names}


def refusal(tmp_path, **env: str) -> str:
    with pytest.raises(ImproperlyConfigured) as refused:
        from_env({"GATEWAY_VAR_DIR": str(tmp_path / "var"), **env})
    return str(refused.value)


# --- SECRET_KEY ------------------------------------------------------------------------------
class TestSecretKey:
    def test_it_refuses_a_short_key_with_debug_off_and_says_how_to_set_one(self, tmp_path):
        message = refusal(tmp_path, DEBUG="false", SECRET_KEY="short")
        assert "SECRET_KEY is 5 characters long, fewer than 50, and DEBUG is off" in message
        assert "Set SECRET_KEY in the environment" in message and "secrets.token_urlsafe(50)" in message

    def test_it_refuses_the_development_default(self, tmp_path):
        message = refusal(tmp_path, DEBUG="false", SECRET_KEY="dev-only-insecure-secret-key-change-me")
        assert "SECRET_KEY is the development default" in message

    def test_it_refuses_a_long_key_check_deploy_calls_weak(self, tmp_path):
        assert "too weak" in refusal(tmp_path, DEBUG="false", SECRET_KEY="ab" * 40)
        assert "too weak" in refusal(tmp_path, DEBUG="false", SECRET_KEY="django-insecure-" + GOOD_KEY)

    def test_it_refuses_no_key_on_postgresql_where_hosts_must_share_one(self, tmp_path):
        message = refusal(tmp_path, DEBUG="false", DATABASE_URL="postgres://gw@127.0.0.1:5432/gw")
        assert "SECRET_KEY is not set" in message

    def test_it_starts_with_a_key_of_50_characters_or_more(self, tmp_path):
        assert settings_in(tmp_path, "SECRET_KEY", "DEBUG", DEBUG="false", SECRET_KEY=GOOD_KEY) == {
            "SECRET_KEY": GOOD_KEY, "DEBUG": False}

    def test_debug_on_takes_any_key(self, tmp_path):
        assert settings_in(tmp_path, "SECRET_KEY", DEBUG="true", SECRET_KEY="short")["SECRET_KEY"] == "short"

    def test_the_embedded_default_keeps_its_key_in_the_var_folder(self, tmp_path):
        """Without SECRET_KEY, on SQLite, the settings name the file (and write nothing); the first to
        take the key makes it, random and readable by its owner alone, and every later one reads it."""
        found = settings_in(tmp_path, "SECRET_KEY", "SECRET_KEY_FILE", DEBUG="false")
        kept = tmp_path / "var" / "secret-key"
        assert found == {"SECRET_KEY": "", "SECRET_KEY_FILE": kept} and not kept.exists()
        key = kept_secret_key(kept)
        assert len(key) >= 50 and len(set(key)) >= 5 and kept.read_text().strip() == key
        assert stat.S_IMODE(kept.stat().st_mode) == 0o600
        assert kept_secret_key(kept) == key
        assert [p.name for p in kept.parent.iterdir()] == ["secret-key"]  # no draft left behind
        # a key given wins, and PostgreSQL (several hosts) names no file
        assert settings_in(tmp_path, "SECRET_KEY_FILE", DEBUG="false", SECRET_KEY=GOOD_KEY)["SECRET_KEY_FILE"] is None
        assert settings_in(tmp_path, "SECRET_KEY_FILE", DEBUG="true",
                           DATABASE_URL="postgres://gw@127.0.0.1:5432/gw")["SECRET_KEY_FILE"] is None

    def test_the_first_process_of_the_install_makes_the_key_and_the_next_reads_it(self, tmp_path):
        """Each process takes it when Django is set up (gateway/apps.py, gateway/ops/process_start.py):
        manage.py, the worker and the web of one install sign with one key."""
        code = ("import hashlib, django; django.setup(); from django.conf import settings; "
                "print(hashlib.sha256(settings.SECRET_KEY.encode()).hexdigest())")
        first, second = (run_python(tmp_path, code, DEBUG="false") for _ in range(2))
        assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
        key = (tmp_path / "var" / "secret-key").read_text().strip()
        digest = hashlib.sha256(key.encode()).hexdigest()
        assert first.stdout.split()[-1] == second.stdout.split()[-1] == digest
        assert key not in first.stdout + first.stderr + second.stdout + second.stderr  # nothing secret printed


# --- TRUSTED_PROXIES: X-Forwarded-For / X-Forwarded-Proto ------------------------------------
def through_proxy_middleware(request):
    seen = {}

    def view(request):
        seen.update(secure=request.is_secure(), address=client_address(request),
                    forwarded=request.headers.get("X-Forwarded-For"))
        return HttpResponse()

    TrustedProxyMiddleware(view)(request)
    return seen


class TestTrustedProxies:
    def forwarded(self, peer, hops="203.0.113.7", proto="https"):
        return RequestFactory().get("/api/v1/version", REMOTE_ADDR=peer, HTTP_X_FORWARDED_FOR=hops,
                                    HTTP_X_FORWARDED_PROTO=proto)

    def test_headers_from_a_peer_not_in_the_list_are_removed(self, settings):
        settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
        seen = through_proxy_middleware(self.forwarded("198.51.100.9"))
        assert seen == {"secure": False, "address": "198.51.100.9", "forwarded": None}

    def test_by_default_no_peer_is_believed_not_even_loopback(self, settings):
        assert settings.TRUSTED_PROXIES == []
        seen = through_proxy_middleware(self.forwarded("127.0.0.1"))
        assert seen == {"secure": False, "address": "127.0.0.1", "forwarded": None}

    def test_headers_from_a_trusted_proxy_are_believed(self, settings):
        settings.TRUSTED_PROXIES = ["10.0.0.0/8", "192.0.2.1"]
        seen = through_proxy_middleware(self.forwarded("10.1.2.3"))
        assert seen == {"secure": True, "address": "203.0.113.7", "forwarded": "203.0.113.7"}
        assert through_proxy_middleware(self.forwarded("192.0.2.1", proto="http"))["secure"] is False

    def test_the_client_is_the_last_hop_that_is_not_a_trusted_proxy(self, settings):
        settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
        # what the client wrote itself (1.1.1.1) is to the left of what the proxies appended
        request = self.forwarded("10.0.0.2", hops="1.1.1.1, 203.0.113.7, 10.0.0.9")
        assert client_address(request) == "203.0.113.7"
        assert client_address(self.forwarded("10.0.0.2", hops="10.0.0.7, 10.0.0.9")) == "10.0.0.7"
        # some proxies add the port: the address is the same from every connection of the client
        assert client_address(self.forwarded("10.0.0.2", hops="203.0.113.7:5123, 10.0.0.9:443")) == "203.0.113.7"
        assert client_address(self.forwarded("10.0.0.2", hops="[2001:db8::7]:5123")) == "2001:db8::7"
        assert client_address(self.forwarded("10.0.0.2", hops="2001:db8::7")) == "2001:db8::7"

    def test_client_address_checks_the_peer_itself_too(self, settings):
        settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
        assert client_address(self.forwarded("198.51.100.9")) == "198.51.100.9"  # no middleware in between

    def test_ipv4_mapped_peers_and_unix_sockets(self, settings):
        settings.TRUSTED_PROXIES = ["10.0.0.0/8", "unix"]
        assert through_proxy_middleware(self.forwarded("::ffff:10.0.0.1"))["address"] == "203.0.113.7"
        assert through_proxy_middleware(self.forwarded(""))["address"] == "203.0.113.7"
        settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
        assert through_proxy_middleware(self.forwarded(""))["forwarded"] is None

    def test_settings_refuse_a_malformed_entry_and_the_old_proxy_count(self, tmp_path):
        assert "'not-an-ip' is not an address" in refusal(tmp_path, TRUSTED_PROXIES="10.0.0.0/8,not-an-ip")
        assert "TRUSTED_PROXY_COUNT is replaced by TRUSTED_PROXIES" in refusal(tmp_path, TRUSTED_PROXY_COUNT="1")
        assert settings_in(tmp_path, "TRUSTED_PROXIES", TRUSTED_PROXIES="10.0.0.0/8, 2001:db8::/32,unix") == {
            "TRUSTED_PROXIES": ["10.0.0.0/8", "2001:db8::/32", "unix"]}


def test_comma_lists_take_a_space_after_each_comma(tmp_path):
    """"a, b" is `a` and `b`: django-environ alone keeps " b", a host or origin that never matches."""
    assert settings_in(tmp_path, "ALLOWED_HOSTS", "CSRF_TRUSTED_ORIGINS", "MCP_ALLOWED_ORIGINS",
                       ALLOWED_HOSTS="a.example, b.example,",
                       CSRF_TRUSTED_ORIGINS="https://a.example, https://b.example",
                       MCP_ALLOWED_ORIGINS=" https://a.example , https://b.example") == {
        "ALLOWED_HOSTS": ["a.example", "b.example"],
        "CSRF_TRUSTED_ORIGINS": ["https://a.example", "https://b.example"],
        "MCP_ALLOWED_ORIGINS": ["https://a.example", "https://b.example"]}


@pytest.mark.django_db
class TestForwardedHeadersEndToEnd:
    """Through the whole middleware stack: the login's per-address ceiling and the SSL redirect."""

    def login(self, client, peer, hops, proto="https"):
        return client.post("/api/v1/auth/login", {"email": "nobody@example.test", "password": "wrong-password"},
                           content_type="application/json", REMOTE_ADDR=peer,
                           headers={"X-Forwarded-For": hops, "X-Forwarded-Proto": proto})

    def test_a_client_cannot_escape_the_login_ceiling_by_writing_x_forwarded_for(self, client, settings):
        settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
        settings.RATE_LIMITS = {**settings.RATE_LIMITS, "login": 3}
        statuses = [self.login(client, "198.51.100.9", f"203.0.113.{n}").status_code for n in range(4)]
        assert statuses == [401, 401, 401, 429]

    def test_behind_a_trusted_proxy_each_client_has_its_own_ceiling(self, client, settings):
        settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
        settings.RATE_LIMITS = {**settings.RATE_LIMITS, "login": 3}
        statuses = [self.login(client, "10.0.0.2", f"203.0.113.{n}").status_code for n in range(4)]
        assert statuses == [401, 401, 401, 401]
        assert [self.login(client, "10.0.0.2", "203.0.113.0").status_code for _ in range(3)] == [401, 401, 429]

    def test_the_ssl_redirect_believes_x_forwarded_proto_only_from_a_trusted_proxy(self, settings):
        settings.SECURE_SSL_REDIRECT = True
        settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
        for path in ("/api/v1/version", "/admin/login/"):
            from_proxy = Client().get(path, REMOTE_ADDR="10.0.0.2", headers={"X-Forwarded-Proto": "https"})
            assert from_proxy.status_code != 301, path
            spoofed = Client().get(path, REMOTE_ADDR="198.51.100.9", headers={"X-Forwarded-Proto": "https"})
            assert spoofed.status_code == 301 and spoofed["Location"].startswith("https://"), path


# --- HSTS and secure cookies ----------------------------------------------------------------
@pytest.mark.django_db
class TestHstsAndCookies:
    def test_hsts_is_sent_on_https_answers_of_both_surfaces_when_set(self, settings):
        settings.SECURE_HSTS_SECONDS = 31536000
        settings.SECURE_HSTS_INCLUDE_SUBDOMAINS = True
        settings.SECURE_HSTS_PRELOAD = True
        for path in ("/api/v1/version", "/v1/models", "/admin/login/"):
            response = Client().get(path, secure=True)
            assert response["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains; preload", path
            assert "Strict-Transport-Security" not in Client().get(path), path  # not over http

    def test_hsts_over_a_trusted_proxy_and_not_when_off(self, settings):
        settings.SECURE_HSTS_SECONDS = 600
        settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
        response = Client().get("/api/v1/version", REMOTE_ADDR="10.9.9.9", headers={"X-Forwarded-Proto": "https"})
        assert response["Strict-Transport-Security"] == "max-age=600"
        spoofed = Client().get("/api/v1/version", REMOTE_ADDR="198.51.100.9",
                                     headers={"X-Forwarded-Proto": "https"})
        assert "Strict-Transport-Security" not in spoofed
        settings.SECURE_HSTS_SECONDS = 0
        assert "Strict-Transport-Security" not in Client().get("/api/v1/version", secure=True)

    def test_session_and_csrf_cookies_are_secure_when_set(self, settings, client):
        settings.SESSION_COOKIE_SECURE = True
        settings.CSRF_COOKIE_SECURE = True
        AccountFactory(email="operator@example.test", is_staff=True, is_superuser=True)
        page = client.get("/admin/login/", secure=True)
        assert page.cookies["csrftoken"]["secure"] is True
        signed_in = client.post("/admin/login/", {"username": "operator@example.test", "password": PASSWORD},
                                secure=True)
        assert signed_in.status_code == 302
        assert signed_in.cookies["sessionid"]["secure"] is True
        assert signed_in.cookies["sessionid"]["httponly"] is True

    def test_cookies_are_not_secure_by_default_on_a_laptop(self, settings, client):
        AccountFactory(email="operator@example.test", is_staff=True, is_superuser=True)
        assert client.get("/admin/login/").cookies["csrftoken"]["secure"] == ""
        signed_in = client.post("/admin/login/", {"username": "operator@example.test", "password": PASSWORD})
        assert signed_in.cookies["sessionid"]["secure"] == ""

    def test_the_environment_sets_each_of_them(self, tmp_path):
        names = ("SECURE_SSL_REDIRECT", "SECURE_HSTS_SECONDS", "SECURE_HSTS_INCLUDE_SUBDOMAINS", "SECURE_HSTS_PRELOAD",
                 "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", "TRUSTED_PROXIES", "SECURE_PROXY_SSL_HEADER")
        assert settings_in(tmp_path, *names, **PRODUCTION) == {
            "SECURE_SSL_REDIRECT": True, "SECURE_HSTS_SECONDS": 31536000, "SECURE_HSTS_INCLUDE_SUBDOMAINS": True,
            "SECURE_HSTS_PRELOAD": True, "SESSION_COOKIE_SECURE": True, "CSRF_COOKIE_SECURE": True,
            "TRUSTED_PROXIES": ["10.0.0.0/8"], "SECURE_PROXY_SSL_HEADER": ("HTTP_X_FORWARDED_PROTO", "https")}
        # the cookies follow the redirect unless set on their own
        assert settings_in(tmp_path, "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", **PRODUCTION,
                           CSRF_COOKIE_SECURE="false") == {"SESSION_COOKIE_SECURE": True, "CSRF_COOKIE_SECURE": False}
        # as .env.example has them: empty is unset, not false
        empty = {**PRODUCTION, "SESSION_COOKIE_SECURE": "", "CSRF_COOKIE_SECURE": "", "TRUSTED_PROXIES": ""}
        assert settings_in(tmp_path, "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", "TRUSTED_PROXIES", **empty) == {
            "SESSION_COOKIE_SECURE": True, "CSRF_COOKIE_SECURE": True, "TRUSTED_PROXIES": []}
        assert settings_in(tmp_path, "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", "SECURE_HSTS_SECONDS",
                           DEBUG="false", SECRET_KEY=GOOD_KEY) == {
            "SESSION_COOKIE_SECURE": False, "CSRF_COOKIE_SECURE": False, "SECURE_HSTS_SECONDS": 0}


# --- manage.py check --deploy ----------------------------------------------------------------
def check_deploy(tmp_path, **env):
    code = ("import sys; from django.core.management import execute_from_command_line; "
            "execute_from_command_line(['manage.py', 'check', '--deploy', '--fail-level', 'WARNING'])")
    return run_python(tmp_path, code, **env)


@pytest.mark.parametrize("redis_url", ["", "redis://127.0.0.1:6379/6"], ids=["database-cache", "redis"])
def test_check_deploy_is_clean_with_production_settings(tmp_path, redis_url):
    done = check_deploy(tmp_path, **PRODUCTION, REDIS_URL=redis_url)
    assert done.returncode == 0, done.stderr
    assert "System check identified no issues" in done.stdout
    assert "WARNING" not in done.stdout + done.stderr


def test_check_deploy_sees_the_console_middleware_and_names_what_is_off(tmp_path):
    """The security and CSRF middleware sit in CONSOLE_MIDDLEWARE, where Django's deploy checks
    do not look; the settings they check are checked anyway (gateway/apps.py)."""
    done = check_deploy(tmp_path, DEBUG="false", SECRET_KEY=GOOD_KEY)
    assert done.returncode != 0
    for check_id in ("security.W004", "security.W008", "security.W010", "security.W016"):
        assert check_id in done.stderr, check_id
    hsts_only = check_deploy(tmp_path, **{**PRODUCTION, "SECURE_HSTS_PRELOAD": "false"})
    assert "security.W021" in hsts_only.stderr and "security.W004" not in hsts_only.stderr


# --- Cache-Control: no-store --------------------------------------------------------------------
def assert_no_store(response):
    assert "no-store" in response.get("Cache-Control", ""), (response.status_code, dict(response.headers))


@pytest.mark.django_db
class TestNoStore:
    def post(self, client, path, token, body=None):
        return client.post(path, body or {}, content_type="application/json", headers=bearer(token))

    def test_the_login_answer(self, client, owner):
        response = client.post("/api/v1/auth/login", {"email": owner.email, "password": PASSWORD},
                               content_type="application/json")
        assert response.status_code == 200 and response.json()["data"]["access_token"]
        assert_no_store(response)
        refused = client.post("/api/v1/auth/login", {"email": owner.email, "password": "wrong-password"},
                              content_type="application/json")
        assert refused.status_code == 401
        assert_no_store(refused)

    def test_key_generate(self, client, owner):
        response = self.post(client, "/api/v1/auth/api-key/generate", session_for(owner), {"password": PASSWORD})
        assert response.status_code == 201 and response.json()["data"]["api_key"]
        assert_no_store(response)

    def test_routine_create_and_the_rotations(self, client, owner):
        key = api_key_for(owner)
        created = self.post(client, "/api/v1/routines", key, {
            "name": "Digest", "prompt": "Summarize the event.", "trigger": "webhook", "delivery_targets": ["inapp"],
            "webhook_secret": "caller-chosen-secret-0123456789"})
        assert created.status_code == 201, created.content
        assert_no_store(created)
        routine_id = created.json()["routine"]["id"]
        rotated_secret = self.post(client, f"/api/v1/routines/{routine_id}/rotate-secret", key)
        assert rotated_secret.status_code == 200 and rotated_secret.json()["webhook_secret"]
        assert_no_store(rotated_secret)
        rotated_token = self.post(client, f"/api/v1/routines/{routine_id}/rotate-token", key)
        assert rotated_token.status_code == 200 and rotated_token.json()["routine"]["webhook_token"]
        assert_no_store(rotated_token)
        changed = client.put(f"/api/v1/routines/{routine_id}", {"name": "Renamed"}, content_type="application/json",
                             headers=bearer(key))
        assert changed.status_code == 200 and changed.json()["routine"]["webhook_token"]
        assert_no_store(changed)

    def test_the_telegram_linking_code(self, client, owner, settings):
        settings.TELEGRAM_BOT_TOKEN = "123:bot-token"
        settings.TELEGRAM_BOT_USERNAME = "gw_test_bot"
        response = self.post(client, "/api/v1/channels/telegram/link", api_key_for(owner))
        assert response.status_code == 201 and "start=" in response.json()["link"]
        assert_no_store(response)

    def test_every_api_answer_and_a_view_of_its_own_keeps_its_cache_control(self, client, owner):
        assert_no_store(client.get("/api/auth/me", headers=bearer(session_for(owner))))
        assert_no_store(client.get("/v1/models", headers=bearer(api_key_for(owner))))
        assert_no_store(client.get("/api/v1/version"))  # a refusal too

    def test_the_admin_pages(self, client):
        operator = AccountFactory(email="operator@example.test", is_staff=True, is_superuser=True)
        assert_no_store(client.get("/admin/login/"))
        signed_in = client.post("/admin/login/", {"username": operator.email, "password": PASSWORD})
        assert signed_in.status_code == 302
        assert_no_store(signed_in)
        assert_no_store(client.get("/admin/"))
        assert_no_store(client.get("/admin/accounts/account/"))
        assert_no_store(client.get(f"/admin/accounts/account/{operator.pk}/change/"))
