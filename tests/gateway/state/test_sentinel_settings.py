"""Redis through Sentinel (issue 28), the settings: REDIS_SENTINELS read as host:port pairs or refused at start
with ImproperlyConfigured; with them, the counters, the Django caches, the Celery broker and the health probe all
follow the primary the Sentinels name. Without them nothing changes. The failover itself is
tests/faults/test_sentinel_failover.py's."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from gateway.settings.redis import sentinel_addresses
from gateway.state.backend import sentinels_of
from gateway.state.redis.sentinel import Sentinels

ROOT = Path(__file__).resolve().parents[3]


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


def settings_in_a_process(tmp_path, **env: str) -> subprocess.CompletedProcess:
    code = ("import json, django; django.setup(); from django.conf import settings as s; "
            "print(json.dumps({'url': s.REDIS_URL, 'broker': s.CELERY_BROKER_URL, "
            "'options': s.CELERY_BROKER_TRANSPORT_OPTIONS, 'cache': s.CACHES['default'], "
            "'ratelimit': s.CACHES['ratelimit']}))")
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("REDIS", "CELERY", "DATABASE_URL", "PYTEST"))}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**keep, "DJANGO_SETTINGS_MODULE": "gateway.settings", "GATEWAY_VAR_DIR": str(tmp_path),
                               **env})


def test_with_sentinels_the_caches_and_the_broker_follow_the_primary(tmp_path):
    done = settings_in_a_process(tmp_path, REDIS_SENTINELS="s1:26379,s2:26380", REDIS_SENTINEL_SERVICE="gw",
                                 REDIS_SENTINEL_PASSWORD="sentinel-secret", REDIS_URL="redis://:p%40ss@gw/3")
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.splitlines()[-1])
    assert got["broker"] == "sentinel://:p%40ss@s1:26379/3;sentinel://:p%40ss@s2:26380/3"
    assert got["options"] == {"master_name": "gw", "sentinel_kwargs": {"password": "sentinel-secret"}}
    for alias in ("cache", "ratelimit"):
        assert got[alias]["LOCATION"] == "redis://:p%40ss@gw/3"
        assert got[alias]["OPTIONS"] == {"pool_class": "gateway.state.redis.sentinel.SentinelPool",
                                         "sentinels": [["s1", 26379], ["s2", 26380]], "service": "gw",
                                         "sentinel_password": "sentinel-secret"}


def test_without_redis_url_the_sentinels_default_to_database_zero(tmp_path):
    done = settings_in_a_process(tmp_path, REDIS_SENTINELS="s1:26379")
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.splitlines()[-1])
    assert (got["url"], got["broker"], got["options"]) == ("redis://mymaster/0", "sentinel://s1:26379/0",
                                                           {"master_name": "mymaster"})


@pytest.mark.parametrize(("env", "message"), [
    ({"REDIS_SENTINELS": "s1:26379;s2:26379"}, "REDIS_SENTINELS must be a comma-separated list"),
    ({"REDIS_SENTINELS": "s1:26379", "REDIS_URL": "rediss://gw/0"}, "must be a redis:// URL"),
    ({"REDIS_SENTINELS": "s1:26379", "REDIS_SENTINEL_SERVICE": "my master"}, "REDIS_SENTINEL_SERVICE must name"),
])
def test_bad_sentinel_settings_stop_the_start(tmp_path, env, message):
    done = settings_in_a_process(tmp_path, **env)
    assert done.returncode != 0 and "ImproperlyConfigured" in done.stderr and message in done.stderr, done.stderr


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
