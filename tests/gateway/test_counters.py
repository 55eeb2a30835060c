"""The counter module on both of its backends: Redis (Lua) and the Django cache."""

import time

import pytest
import time_machine
from django.conf import settings as django_settings

from gateway.counters import window_hit
from tests.conftest import clear_counters


@pytest.fixture(params=["redis", "cache"])
def backend(request, settings, db):
    if request.param == "redis":
        settings.REDIS_URL = django_settings.REDIS_URL or "redis://127.0.0.1:6379/14"
    else:
        settings.REDIS_URL = ""
    clear_counters()
    yield request.param
    clear_counters()


def test_it_counts_up_to_the_ceiling_and_no_further(backend):
    with time_machine.travel(1_800_000_000, tick=False):
        results = [window_hit([("t:a", 3)], 60) for _ in range(5)]
    assert [r.allowed for r in results] == [True, True, True, False, False]
    assert [r.windows[0].count for r in results] == [1, 2, 3, 3, 3]
    assert results[0].windows[0].reset_at == 1_800_000_060


def test_a_refusal_by_one_counter_adds_to_none(backend):
    with time_machine.travel(1_800_000_000, tick=False):
        window_hit([("t:small", 1)], 60)
        refused = window_hit([("t:big", 10), ("t:small", 1)], 60)
        assert not refused.allowed
        assert refused.refused_by.key == "t:small"
        after = window_hit([("t:big", 10)], 60)
    assert after.windows[0].count == 1  # the refused hit did not reach t:big


def test_the_window_starts_at_the_first_hit_and_is_fixed(backend):
    with time_machine.travel(1_800_000_000, tick=False) as traveller:
        window_hit([("t:w", 2)], 60)
        traveller.shift(59)
        assert window_hit([("t:w", 2)], 60).windows[0].reset_at == 1_800_000_060
        assert not window_hit([("t:w", 2)], 60).allowed
        traveller.shift(1)
        fresh = window_hit([("t:w", 2)], 60)
        assert fresh.allowed and fresh.windows[0].count == 1
        assert fresh.windows[0].reset_at == 1_800_000_120


def test_counters_are_independent(backend):
    with time_machine.travel(time.time(), tick=False):
        assert window_hit([("t:x", 1)], 60).allowed
        assert window_hit([("t:y", 1)], 60).allowed
        assert not window_hit([("t:x", 1)], 60).allowed


def test_the_embedded_cache_keeps_live_windows_when_it_fills_up(settings, db):
    """Without Redis the windows live in the database cache, next to anything else cached there;
    Django culls a third of that table when it passes MAX_ENTRIES (300 by default)."""
    from django.core.cache import cache

    from django.core.management import call_command

    settings.CACHES = {"default": django_settings.EMBEDDED_CACHE}
    settings.REDIS_URL = ""
    call_command("createcachetable", verbosity=0)  # absent when the suite runs on Redis
    cache.clear()
    with time_machine.travel(1_800_000_000, tick=False):
        window_hit([("t:full", 2)], 60)
        cache.set_many({f"zz:{n}": n for n in range(400)})
        cache.set("zz:one-more", 1)
        results = [window_hit([("t:full", 2)], 60) for _ in range(2)]
    cache.clear()
    assert [r.allowed for r in results] == [True, False]
