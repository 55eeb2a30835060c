"""The counter module on both of its backends: Redis (Lua) and the Django cache."""

import time

import pytest
import time_machine
from django.conf import settings as django_settings

from gateway.state import backend as chosen
from gateway.state.cache_backend import CacheBackend
from gateway.state.counters import (
    Pending,
    amounts_add,
    amounts_forget,
    amounts_get,
    amounts_pending,
    amounts_rebuilding,
    amounts_settle,
    hits_many,
    mark_once,
    marks_many,
    version_bump,
    window_hit,
)
from gateway.state.redis.backend import RedisBackend
from gateway.state.redis.client import client_for
from tests.conftest import TEST_REDIS_URL, clear_counters

PENDING = Pending("t:rebuilding", "t:pending")


@pytest.fixture(params=["redis", "cache"])
def backend(request, settings, db):
    if request.param == "redis":
        settings.REDIS_URL = django_settings.REDIS_URL or TEST_REDIS_URL
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


def test_an_amount_is_missing_until_seeded_and_an_addition_does_not_create_it(backend):
    amounts_forget(["t:q"])
    with time_machine.travel(1_800_000_000, tick=False) as traveller:
        assert amounts_get(["t:q"]) == [None]
        amounts_add([("t:q", 5)])  # no total to add to: it stays missing, to be rebuilt
        assert amounts_get(["t:q"]) == [None]
        hit = window_hit([("t:r", 10)], 60, reads=["t:q"])
        assert hit.allowed and hit.amounts == (None,)
        assert amounts_settle(PENDING, [("t:q", 1_800_000_100, 40)], set()) == [40]
        assert amounts_settle(PENDING, [("t:q", 1_800_000_100, 99)], set()) == [40]  # set only where missing
        amounts_add([("t:q", 5)])
        assert amounts_get(["t:q"]) == [45]
        assert window_hit([("t:r", 10)], 60, reads=["t:q"]).amounts == (45,)
        traveller.move_to(1_800_000_100)  # its window is over
        assert amounts_get(["t:q"]) == [None] or backend == "redis"  # Redis expires it 60 s later
        amounts_forget(["t:q"])
        assert amounts_get(["t:q"]) == [None]


def test_additions_to_an_amount_being_rebuilt_wait_for_it_by_record(backend):
    """A rebuild marks its amounts first; an addition made meanwhile waits, and the rebuild's settle takes
    it in unless the total it computed already holds its record. An addition without a record, or to an
    amount nobody rebuilds, is still dropped."""
    with time_machine.travel(1_800_000_000, tick=False) as traveller:
        amounts_add([("t:q", 5)], pending=PENDING, record="r0")  # not being rebuilt: dropped
        amounts_rebuilding(PENDING, ["t:q", "t:s"], 30)
        amounts_add([("t:q", 5)], pending=PENDING, record="r1")
        amounts_add([("t:q", 7), ("t:s", 70)], pending=PENDING, record="r2")
        amounts_add([("t:q", 100)])  # no record: nothing to wait by
        assert amounts_get(["t:q", "t:s"]) == [None, None]
        assert amounts_pending(PENDING, ["t:q"]) == {"t:q": {"r1": 5, "r2": 7}}
        assert amounts_settle(PENDING, [("t:q", 1_800_000_100, 40), ("t:s", 1_800_000_100, 0)], {"r2"}) == [45, 0]
        assert amounts_pending(PENDING, ["t:q", "t:s"]) == {"t:q": {}, "t:s": {}}  # taken in, or dropped
        amounts_add([("t:q", 1)], pending=PENDING, record="r3")
        assert amounts_get(["t:q"]) == [46]  # settled: added to at once
        amounts_forget(["t:q"])
        amounts_rebuilding(PENDING, ["t:q"], 30)
        traveller.shift(31)  # a rebuild that never settled: its mark lapses
        amounts_add([("t:q", 9)], pending=PENDING, record="r4")
        assert amounts_pending(PENDING, ["t:q"]) == {"t:q": {}}


def test_marks_and_hits_in_one_step_answer_as_one_at_a_time(backend):
    with time_machine.travel(1_800_000_000, tick=False):
        assert marks_many([("t:m1", 30), ("t:m2", 30), ("t:m1", 30)]) == [True, True, False]
        assert marks_many([]) == [] and hits_many([]) == []
        results = hits_many([([("t:h", 2)], 60)] * 3 + [([("t:other", 1)], 60)])
    assert [r.allowed for r in results] == [True, True, False, True]
    assert [r.windows[0].count for r in results] == [1, 2, 2, 1]


def test_several_steps_are_one_round_trip_and_survive_a_redis_that_lost_its_scripts(settings, tmp_path):
    """EVALSHA in one pipeline, nothing else (redis-py's Script asked SCRIPT EXISTS first, on every
    call); a restarted Redis has no script: it is loaded again and the steps made."""
    import redis as redis_py

    from tests.faults.stack import PrivateRedis

    private = PrivateRedis(tmp_path, tmp_path).start()
    try:
        settings.REDIS_URL = private.url
        marks_many([("t:warm", 30)]), hits_many([([("t:warm-hit", 5)], 60)])  # the scripts loaded
        stats = redis_py.Redis.from_url(private.url)

        def calls() -> dict[str, int]:
            info = stats.info("commandstats")
            return {name: info.get(f"cmdstat_{name}", {}).get("calls", 0) for name in ("evalsha", "script", "eval")}

        before = calls()
        assert marks_many([("t:a", 30), ("t:b", 30)]) == [True, True]
        assert [r.allowed for r in hits_many([([("t:h", 5)], 60)] * 2)] == [True, True]
        after = calls()
        assert {name: after[name] - before[name] for name in after} == {"evalsha": 4, "script": 0, "eval": 0}
        private.stop_now()
        private.start()  # a new Redis: no script loaded
        assert marks_many([("t:a", 30)]) == [True]
        assert [r.windows[0].count for r in hits_many([([("t:h", 5)], 60)])] == [1]
    finally:
        private.stop()


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


# --- The backend: chosen by the setting, following a change, emptied by its reset ---------------


def test_the_backend_is_the_settings_choice_and_follows_a_change(settings):
    from django.test import override_settings

    url = TEST_REDIS_URL
    settings.REDIS_URL = ""
    assert isinstance(chosen.current, CacheBackend)
    with override_settings(REDIS_URL=url):
        assert isinstance(chosen.current, RedisBackend) and chosen.current.url == url
        assert chosen.current.client is client_for(url)  # one client per URL for the whole process
    assert isinstance(chosen.current, CacheBackend)
    assert (chosen.current.on_loop, RedisBackend(url).on_loop) == (False, True)


def test_the_reset_empties_every_window_amount_mark_and_stamp(backend):
    with time_machine.travel(1_800_000_000, tick=False):
        assert window_hit([("t:r", 1)], 60).allowed
        assert amounts_settle(PENDING, [("t:q", 1_800_000_100, 40)], set()) == [40]
        assert mark_once("t:m", 60)
        version_bump(["t:v"])
        chosen.current.write(put=[("t:cooling", 7, 60)], bump=["t:v"])
        assert chosen.current.read(["t:v", "t:cooling"]) == [2, 7]
        chosen.current.reset()
        assert window_hit([("t:r", 1)], 60).windows[0].count == 1
        assert amounts_get(["t:q"]) == [None]
        assert mark_once("t:m", 60)
        assert chosen.current.read(["t:v", "t:cooling"]) == [None, None]


@pytest.mark.parametrize("store", ["database", "redis"])
def test_the_cache_backends_reset_leaves_what_is_not_the_gateways(settings, db, store):
    """The embedded default's database cache, or a Redis cache (a test that runs the cache
    backend while the suite runs on Redis): only the keys under the gateway's prefix go."""
    from django.core.cache import cache
    from django.core.management import call_command

    redis_cache = {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                   "LOCATION": django_settings.REDIS_URL or TEST_REDIS_URL}
    settings.CACHES = {"default": django_settings.EMBEDDED_CACHE if store == "database" else redis_cache}
    settings.REDIS_URL = ""
    call_command("createcachetable", verbosity=0)  # absent when the suite runs on Redis
    window_hit([("t:reset", 1)], 60)
    cache.set("zz:theirs", 1)
    try:
        chosen.current.reset()
        assert window_hit([("t:reset", 1)], 60).allowed
        assert cache.get("zz:theirs") == 1
    finally:
        chosen.current.reset()
        cache.delete("zz:theirs")


def test_the_reset_names_a_cache_whose_keys_it_cannot_list(settings):
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    settings.REDIS_URL = ""
    with pytest.raises(TypeError, match="cannot be listed in a LocMemCache"):
        chosen.current.reset()


HAMMER = """
import os, sys, time
import django
django.setup()
from gateway.state.counters import window_hit
start = float(sys.argv[1])
while time.time() < start:
    time.sleep(0.001)
print(sum(window_hit([("t:shared", 50)], 60).allowed for _ in range(40)))
"""


def test_the_embedded_cache_counts_exactly_across_processes(tmp_path):
    """Without Redis, a web process and the Celery worker's processes share the database cache:
    80 hits from two processes at once on a ceiling of 50 let exactly 50 through."""
    import os
    import subprocess
    import sys

    from tests.servers import ROOT

    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'cache.sqlite3'}", "REDIS_URL": "",
           "GATEWAY_VAR_DIR": str(tmp_path), "DJANGO_SETTINGS_MODULE": "gateway.settings"}
    subprocess.run([sys.executable, "manage.py", "createcachetable"], cwd=ROOT, env=env, check=True)
    start = str(time.time() + 3)
    procs = [subprocess.Popen([sys.executable, "-c", HAMMER, start], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              text=True) for _ in range(2)]
    allowed = [int(p.communicate(timeout=120)[0]) for p in procs]
    assert sum(allowed) == 50, allowed
