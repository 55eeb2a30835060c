"""Slots (gateway/state/slots.py): at most `cap` holders at once, on Redis across processes and in the process
without it; a holder renews its slot, gives it back, or lets it lapse after its ttl."""

import subprocess
import sys
import time

import pytest

from gateway.state import slots


@pytest.fixture(params=["process", "redis"])
def where(request, settings):
    if request.param == "redis":
        request.getfixturevalue("redis_url")
    else:
        settings.REDIS_URL = ""
    return request.param


def test_the_cap_is_held_and_a_slot_given_back_is_free_again(where):
    assert slots.take("s", "a", cap=2, ttl=30) and slots.take("s", "b", cap=2, ttl=30)
    assert not slots.take("s", "c", cap=2, ttl=30)
    assert slots.take("s", "a", cap=2, ttl=30)  # a holder taking again renews its own
    assert slots.take("other", "c", cap=2, ttl=30)  # another set has its own cap
    slots.give_back("s", "b")
    assert slots.take("s", "c", cap=2, ttl=30)
    assert not slots.take("s", "d", cap=2, ttl=30)


def test_a_slot_not_renewed_lapses_and_a_renewed_one_stays(where):
    assert slots.take("s", "kept", cap=2, ttl=0.3) and slots.take("s", "left", cap=2, ttl=0.3)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # renewed while the other lapses
        slots.keep("s", ["kept"], ttl=0.3)
        if slots.take("s", "new", cap=2, ttl=30):
            break
        time.sleep(0.05)
    else:
        pytest.fail("the slot left unrenewed never lapsed")
    assert not slots.take("s", "third", cap=2, ttl=30)  # "kept" still holds its slot


def test_two_processes_share_the_cap_on_redis(redis_url):
    assert slots.take("shared", "here", cap=1, ttl=30)
    code = ("import django, os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'gateway.settings'); django.setup(); "
            "from gateway.state import slots; print(slots.take('shared', 'there', cap=1, ttl=30))")
    env = {"REDIS_URL": redis_url, "PATH": "/usr/bin:/bin"}
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert other.stdout.strip().splitlines()[-1] == "False", other.stderr
    slots.give_back("shared", "here")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert other.stdout.strip().splitlines()[-1] == "True", other.stderr
