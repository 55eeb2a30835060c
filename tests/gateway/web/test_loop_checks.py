"""With Redis, a warm proxied call makes its checks in the event loop: no
hand-off to a worker thread for the credential, the ceilings, the quota or the chain. What needs
the database still hops: a credential not yet cached, a quota window to rebuild, a registry that
moved."""

import asyncio

import pytest
from django.test import AsyncClient

from accounts import endpoints
from gateway.registry.snapshot import registry_changed
from tests.factories import AccountFactory, AccountGroupFactory, ModelFactory, ModelServerFactory, api_key_for
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture

BODY = {"model": "oa/echo-1", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def hops(monkeypatch):
    """The names of the functions the endpoint wrapper sent to a worker thread."""
    sent: list[str] = []
    real = endpoints.in_worker

    def recording(function):
        sent.append(getattr(function, "__name__", None) or function.func.__name__)
        return real(function)

    monkeypatch.setattr(endpoints, "in_worker", recording)
    return sent


@pytest.fixture
def caller(transactional_db, redis_url, upstream):  # noqa: F811
    group = AccountGroupFactory(api_access=True, daily_tokens=1_000_000)
    key = api_key_for(AccountFactory(group=group))
    server = ModelServerFactory(name="oa", kind="openai", base_url=f"{upstream.url}/v1")
    ModelFactory(server=server, name="echo-1", is_default=True)
    return key


def _calls(key: str, count: int) -> list:
    async def run():
        client = AsyncClient()
        answers = []
        for _ in range(count):
            answers.append(await client.post("/v1/chat/completions", BODY, content_type="application/json",
                                             headers={"Authorization": f"Bearer {key}"}))
        return answers

    return asyncio.run(run())


def test_a_warm_call_makes_no_hop_to_a_worker_thread(caller, hops):
    first, second, third = _calls(caller, 3)
    assert [r.status_code for r in (first, second, third)] == [200, 200, 200]
    assert "identify" in hops  # the first call read the credential from the database
    hops.clear()
    assert _calls(caller, 1)[0].status_code == 200
    assert hops == []
    assert third["X-RateLimit-Remaining"] == str(int(first["X-RateLimit-Remaining"]) - 2)  # each counted once


def test_a_moved_registry_sends_the_chain_to_a_worker_thread(caller, hops):
    _calls(caller, 2)
    hops.clear()
    (answer,) = _calls_after_registry_change(caller)
    assert answer.status_code == 200
    assert hops == ["_prepare"]


def _calls_after_registry_change(key):
    from django.db import transaction

    with transaction.atomic():
        registry_changed()  # the stamp moves when the (empty) change commits
    return _calls(key, 1)


def test_without_redis_the_checks_stay_in_one_hop(caller, hops, settings):
    settings.REDIS_URL = ""
    assert [r.status_code for r in _calls(caller, 2)] == [200, 200]
    assert hops == []  # the synchronous checks ran in the wrapper's own single hop, not in_worker


def test_the_loop_counter_step_survives_a_redis_restart(settings, tmp_path):
    """A pooled asyncio connection that a restarted Redis closed is replaced at once: the next
    counter step succeeds (without a retry it failed once, and its request got a 503)."""
    from gateway.state.redis import loop as loop_redis
    from tests.faults.stack import PrivateRedis

    redis = PrivateRedis(tmp_path, tmp_path).start()
    try:
        settings.REDIS_URL = redis.url

        async def steps():
            first = await loop_redis.window_hit([("t:restart", 10)], 60)
            redis.stop_now()
            redis.start()
            second = await loop_redis.window_hit([("t:restart", 10)], 60)
            return first, second

        first, second = asyncio.run(steps())
        assert first.allowed and second.allowed
        assert second.windows[0].count == 1  # a new Redis: the window starts again
    finally:
        redis.stop()
