"""The response cache when its Redis restarts: a gateway of its own on a private Redis
(tests/faults/services.py, on a free port; the test run's Redis is never touched). A restart without
persistence empties the cache: the next call reaches the model server, nothing fails, and the cache
fills again."""

import openai
import pytest

from tests.compat.cache_support import TEXT, caching, chat, model_calls
from tests.faults.services import PrivateRedis
from tests.servers import web_process


@pytest.fixture
def private_redis(tmp_path):
    redis = PrivateRedis(tmp_path, tmp_path)
    redis.start()
    yield redis
    redis.stop()


@pytest.fixture
def gateway_on_private_redis(world, private_redis):
    with web_process(REGISTRY_TTL_SECONDS="0", REDIS_URL=private_redis.url) as base:
        yield openai.OpenAI(base_url=f"{base}/v1", api_key=world.key, max_retries=0)


def test_a_redis_restart_empties_the_cache_and_nothing_fails(world, private_redis, gateway_on_private_redis):
    caching(world.group)
    client = gateway_on_private_redis
    assert [chat(world, client=client).cache for _ in range(2)] == ["miss", "hit"]
    assert any(key.startswith(b"gw:rc:") for key in private_redis.client().keys("gw:*"))
    private_redis.stop_now()
    private_redis.start()
    assert private_redis.client().keys("gw:rc:*") == []
    answers = [chat(world, client=client), chat(world, client=client, stream=True), chat(world, client=client)]
    assert [a.cache for a in answers] == ["miss", "hit", "hit"]
    assert {a.text for a in answers} == {TEXT}
    assert model_calls(world) == 2
