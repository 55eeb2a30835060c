"""The operator console's login (/admin/login/) is limited like the API login: 10 tries a minute
from one address, 5 for one account (django-ratelimit), refused before the password is checked;
on Redis and on the database cache of the embedded default."""

import pytest
import time_machine
from django.conf import settings as django_settings
from django.contrib.auth import forms as auth_forms
from django.core import checks
from django.core.management import call_command

from tests.conftest import TEST_REDIS_URL
from tests.factories import PASSWORD, AccountFactory

pytestmark = pytest.mark.django_db

LOGIN = "/admin/login/"
DATABASE_CACHE = {**django_settings.EMBEDDED_CACHE, "BACKEND": "accounts.admin_login.CounterCache", "KEY_PREFIX": "gw"}


@pytest.fixture(params=["redis", "database"])
def limiter_cache(request, settings):
    """Each test once with django-ratelimit counting in Redis, once in the database cache."""
    if request.param == "redis":
        url = settings.REDIS_URL or TEST_REDIS_URL
        settings.CACHES = {**settings.CACHES, "ratelimit": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url, "KEY_PREFIX": "gw"}}
        request.getfixturevalue("redis_url")  # skipped without a Redis; its "gw:" keys cleared before and after
    else:
        settings.CACHES = {**settings.CACHES, "ratelimit": DATABASE_CACHE}
        call_command("createcachetable", verbosity=0)  # not made by the test run's setup on Redis
    return request.param


@pytest.fixture
def operator():
    return AccountFactory(email="operator@example.test", is_staff=True, is_superuser=True)


@pytest.fixture
def password_checks(monkeypatch):
    """How many times the login form asked the auth backends about a password."""
    calls = []
    real = auth_forms.authenticate

    def counting(*args, **kwargs):
        calls.append(kwargs.get("username"))
        return real(*args, **kwargs)

    monkeypatch.setattr(auth_forms, "authenticate", counting)
    return calls


def try_login(client, username, password="wrong-password", address="198.51.100.9"):
    return client.post(LOGIN, {"username": username, "password": password}, REMOTE_ADDR=address)


def test_it_refuses_the_11th_try_from_one_address_without_checking_the_password(
        client, operator, password_checks, limiter_cache):
    with time_machine.travel(1_800_000_000, tick=False):
        for n in range(10):
            assert try_login(client, f"someone{n}@example.test").status_code == 200  # the form, with its error
        assert len(password_checks) == 10
        refused = try_login(client, operator.email, PASSWORD)
    assert refused.status_code == 429
    assert len(password_checks) == 10  # the right password was not even looked at
    assert "_auth_user_id" not in client.session
    assert b"Too many login attempts" in refused.content
    assert int(refused["Retry-After"]) >= 1
    assert "no-store" in refused["Cache-Control"]
    # another address is not held back
    with time_machine.travel(1_800_000_000, tick=False):
        assert try_login(client, operator.email, PASSWORD, address="198.51.100.10").status_code == 302


def test_it_refuses_the_6th_try_for_one_account_from_any_address(client, operator, password_checks, limiter_cache):
    with time_machine.travel(1_800_000_000, tick=False):
        for n in range(5):
            assert try_login(client, operator.email, address=f"203.0.113.{n}").status_code == 200
        refused = try_login(client, "  Operator@Example.test ", PASSWORD, address="203.0.113.99")
        assert refused.status_code == 429
        assert len(password_checks) == 5
        assert "_auth_user_id" not in client.session
        # another account from the same addresses is not held back
        assert try_login(client, "other@example.test", address="203.0.113.1").status_code == 200


def test_the_limits_end_with_their_minute(client, operator, limiter_cache):
    with time_machine.travel(1_800_000_000, tick=False):
        for _ in range(6):
            try_login(client, operator.email)
        assert try_login(client, operator.email, PASSWORD).status_code == 429
    with time_machine.travel(1_800_000_000 + 125, tick=False):
        assert try_login(client, operator.email, PASSWORD).status_code == 302
        assert client.session["_auth_user_id"] == str(operator.pk)


def test_the_limits_are_settings(client, operator, settings, limiter_cache):
    settings.ADMIN_LOGIN_LIMIT_PER_ACCOUNT = 2
    with time_machine.travel(1_800_000_000, tick=False):
        assert [try_login(client, operator.email).status_code for _ in range(3)] == [200, 200, 429]


def test_the_page_itself_is_not_counted(client, operator, limiter_cache):
    with time_machine.travel(1_800_000_000, tick=False):
        for _ in range(12):
            assert client.get(LOGIN, REMOTE_ADDR="198.51.100.9").status_code == 200
        assert try_login(client, operator.email, PASSWORD).status_code == 302


def test_the_address_is_the_client_behind_a_trusted_proxy(client, operator, settings, limiter_cache):
    settings.TRUSTED_PROXIES = ["10.0.0.0/8"]
    with time_machine.travel(1_800_000_000, tick=False):
        for n in range(10):
            client.post(LOGIN, {"username": f"u{n}@example.test", "password": "x"}, REMOTE_ADDR="10.0.0.2",
                        headers={"X-Forwarded-For": "203.0.113.5"})
        other_client = client.post(LOGIN, {"username": operator.email, "password": PASSWORD}, REMOTE_ADDR="10.0.0.2",
                                   headers={"X-Forwarded-For": "203.0.113.6"})
        assert other_client.status_code == 302
        spoofing = client.post(LOGIN, {"username": "v@example.test", "password": "x"}, REMOTE_ADDR="10.0.0.2",
                               headers={"X-Forwarded-For": "203.0.113.6, 203.0.113.5"})
        assert spoofing.status_code == 429  # the hop the proxy appended is 203.0.113.5


def test_django_ratelimit_checks_pass_on_both_caches(settings, limiter_cache):
    from django_ratelimit.checks import check_caches

    found = check_caches(None)
    assert not [message for message in found if message.level >= checks.ERROR]
    # W001 only says "not officially supported" (it knows django-redis's class alone): silenced
    assert {message.id for message in found} <= set(settings.SILENCED_SYSTEM_CHECKS)
