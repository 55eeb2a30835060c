"""Redis through Sentinel, the settings: REDIS_SENTINELS read as host:port pairs or refused at start
with ImproperlyConfigured; with them, the counters, the Django caches, the Celery broker and the health probe all
follow the primary the Sentinels name. Without them nothing changes. What the settings make of an environment
is `gateway.settings.from_env` of it, in this process. The failover itself is
tests/faults/test_sentinel_failover.py's."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from gateway.settings import from_env
from gateway.settings.redis import sentinel_addresses
from gateway.state.backend import sentinels_of
from gateway.state.redis.sentinel import Sentinels


@pytest.mark.parametrize(("text", "pairs"), [
    ("", []),
    ("  ", []),
    ("s1:26379", [("s1", 26379)]),
    ("10.0.0.1:26380, 10.0.0.2:26381 ,s3", [("10.0.0.1", 26380), ("10.0.0.2", 26381), ("s3", 26379)]),
    ("[::1]:26379", [("::1", 26379)]),
])
def test_sentinel_addresses_are_read(text, pairs):
    assert sentinel_addresses(text) == pairs


@pytest.mark.parametrize("text", ["s1:26379,,s2:26379", "s1:notaport", "s1:70000", "user:pw@s1:26379",
                                  "s1:26379/0", ":26379", "s1 s2:26379", "s1:26379,"])
def test_a_malformed_list_is_refused_naming_the_item(text):
    with pytest.raises(ImproperlyConfigured, match="REDIS_SENTINELS must be a comma-separated list of host:port"):
        sentinel_addresses(text)


def settings_of(tmp_path, **env: str) -> dict:
    """The settings of the environment `env` alone (no REDIS_URL, broker or database of the test run's)."""
    s = from_env({"GATEWAY_VAR_DIR": str(tmp_path), **env})
    return {"url": s["REDIS_URL"], "broker": s["CELERY_BROKER_URL"], "options": s["CELERY_BROKER_TRANSPORT_OPTIONS"],
            "cache": s["CACHES"]["default"], "ratelimit": s["CACHES"]["ratelimit"]}


def test_with_sentinels_the_caches_and_the_broker_follow_the_primary(tmp_path):
    got = settings_of(tmp_path, REDIS_SENTINELS="s1:26379,s2:26380", REDIS_SENTINEL_SERVICE="gw",
                      REDIS_SENTINEL_PASSWORD="sentinel-secret", REDIS_URL="redis://:p%40ss@gw/3")
    assert got["broker"] == "sentinel://:p%40ss@s1:26379/3;sentinel://:p%40ss@s2:26380/3"
    assert got["options"] == {"master_name": "gw", "sentinel_kwargs": {"password": "sentinel-secret"}}
    for alias in ("cache", "ratelimit"):
        assert got[alias]["LOCATION"] == "redis://:p%40ss@gw/3"
        assert got[alias]["OPTIONS"] == {"pool_class": "gateway.state.redis.sentinel.SentinelPool",
                                         "sentinels": [("s1", 26379), ("s2", 26380)], "service": "gw",
                                         "sentinel_password": "sentinel-secret"}


def test_without_redis_url_the_sentinels_default_to_database_zero(tmp_path):
    got = settings_of(tmp_path, REDIS_SENTINELS="s1:26379")
    assert (got["url"], got["broker"], got["options"]) == ("redis://mymaster/0", "sentinel://s1:26379/0",
                                                           {"master_name": "mymaster"})


@pytest.mark.parametrize(("env", "message"), [
    ({"REDIS_SENTINELS": "s1:26379;s2:26379"}, "REDIS_SENTINELS must be a comma-separated list"),
    ({"REDIS_SENTINELS": "s1:26379", "REDIS_URL": "rediss://gw/0"}, "must be a redis:// URL"),
    ({"REDIS_SENTINELS": "s1:26379", "REDIS_SENTINEL_SERVICE": "my master"}, "REDIS_SENTINEL_SERVICE must name"),
])
def test_bad_sentinel_settings_stop_the_start(tmp_path, env, message):
    with pytest.raises(ImproperlyConfigured) as refused:
        settings_of(tmp_path, **env)
    assert message in str(refused.value)


def test_without_sentinels_nothing_changes(settings):
    settings.REDIS_SENTINELS = []
    assert sentinels_of(settings) is None
    settings.REDIS_SENTINELS = [("s1", 26379)]
    settings.REDIS_SENTINEL_SERVICE, settings.REDIS_SENTINEL_PASSWORD = "gw", "secret"
    found = sentinels_of(settings)
    assert found == Sentinels((("s1", 26379),), "gw", "secret")
    assert "secret" not in repr(found)


def test_the_amounts_dropped_after_a_switch_are_the_quota_and_budget_counters():
    from gateway.limits.quotas import quota_window_keys
    from gateway.state.redis.client import AMOUNT_PREFIXES

    keys = [counted.key for counted in quota_window_keys(account_id=7)]
    assert keys and all(key.startswith(AMOUNT_PREFIXES) for key in keys)
    assert {key.split(":")[0] + ":" for key in keys} == set(AMOUNT_PREFIXES)
