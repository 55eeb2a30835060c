"""The event loop's own Redis client (gateway/state/redis/loop.py): the counter steps' results, the
commands of one loop turn in one write with each reply matched to its command, and redis-py's
exceptions for every failure (an outage is a 503: gateway/web/errors.py)."""

import asyncio
import socket
import threading
import time

import pytest
import redis as redis_py
from redis.exceptions import ConnectionError, ResponseError, TimeoutError

from gateway.state import counters
from gateway.state.redis import loop as loop_redis
from tests.conftest import clear_counters
from tests.faults.stack import PrivateRedis


@pytest.fixture
def private(tmp_path):
    redis = PrivateRedis(tmp_path, tmp_path).start()
    yield redis
    redis.stop()


def test_the_loop_steps_count_as_the_synchronous_ones(settings, redis_url):
    clear_counters()

    async def steps():
        first = await loop_redis.window_hit([("t:loop", 2)], 60)
        await loop_redis.amounts_add([("t:amount", 5)])  # missing: stays missing
        counters.amounts_rebuilding(pending, ["t:amount"], 30)
        await loop_redis.amounts_add([("t:amount", 3)], pending=pending, record="r1")  # waits for the rebuild
        counters.amounts_settle(pending, [("t:amount", time.time() + 60, 10)], set())
        await loop_redis.amounts_add([("t:amount", 5)], pending=pending, record="r2")
        return first

    pending = counters.Pending("t:rebuilding", "t:pending")

    first = asyncio.run(steps())
    second = counters.window_hit([("t:loop", 2)], 60)
    third = counters.window_hit([("t:loop", 2)], 60)
    assert (first.windows[0].count, second.windows[0].count, third.allowed) == (1, 2, False)
    assert counters.amounts_get(["t:amount"]) == [18]
    clear_counters()


def test_concurrent_steps_share_one_connection_and_get_their_own_replies(settings, private):
    settings.REDIS_URL = private.url.replace("/0", "/3")  # the database is selected

    async def steps():
        results = await asyncio.gather(*(loop_redis.window_hit([(f"t:c{i % 5}", 1000)], 60) for i in range(200)))
        return results

    stats = private.client()
    connections = stats.info("stats")["total_connections_received"]
    results = asyncio.run(steps())
    by_key: dict[str, list[int]] = {}
    for result in results:
        by_key.setdefault(result.windows[0].key, []).append(result.windows[0].count)
    assert all(sorted(counts) == list(range(1, 41)) for counts in by_key.values()) and len(by_key) == 5
    assert stats.info("stats")["total_connections_received"] == connections + 1  # one for the 200 steps
    assert len(redis_py.Redis(port=private.port, db=3).keys("gw:t:c*")) == 5
    assert stats.keys("gw:*") == []  # nothing in database 0


def test_a_password_and_a_database_from_the_url(settings, private):
    private.client().config_set("requirepass", "s3cret")
    settings.REDIS_URL = f"redis://:s3cret@127.0.0.1:{private.port}/2"
    assert asyncio.run(loop_redis.window_hit([("t:auth", 5)], 60)).allowed
    assert redis_py.Redis(port=private.port, password="s3cret", db=2).exists("gw:t:auth") == 1
    settings.REDIS_URL = f"redis://:wrong@127.0.0.1:{private.port}/2"
    with pytest.raises(redis_py.exceptions.AuthenticationError):
        asyncio.run(loop_redis.window_hit([("t:auth", 5)], 60))


def test_an_error_reply_is_redis_pys_exception_and_the_connection_goes_on(settings, private):
    settings.REDIS_URL = private.url
    private.client().set("gw:t:text", "not a counter")

    async def steps():
        with pytest.raises(ResponseError, match="WRONGTYPE"):
            await loop_redis.window_hit([("t:text", 5)], 60)
        return await loop_redis.window_hit([("t:fine", 5)], 60)

    assert asyncio.run(steps()).allowed


def test_redis_not_there_is_a_connection_error(settings):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens once it is closed
    settings.REDIS_URL = f"redis://127.0.0.1:{port}/0"
    with pytest.raises(ConnectionError):
        asyncio.run(loop_redis.window_hit([("t:gone", 5)], 60))


def test_a_redis_that_does_not_answer_is_a_timeout_then_a_new_connection(settings, monkeypatch):
    monkeypatch.setattr(loop_redis, "TIMEOUT_SECONDS", 0.3)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    accepted: list[socket.socket] = []
    accepting = threading.Thread(target=lambda: [accepted.append(server.accept()[0]) for _ in range(2)], daemon=True)
    accepting.start()
    settings.REDIS_URL = f"redis://127.0.0.1:{server.getsockname()[1]}/0"

    async def steps():
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            await loop_redis.window_hit([("t:silent", 5)], 60)
        waited = time.monotonic() - started
        with pytest.raises(TimeoutError):
            await loop_redis.window_hit([("t:silent", 5)], 60)
        return waited

    try:
        assert 0.25 < asyncio.run(steps()) < 2
        accepting.join(timeout=5)  # it ends at its second connection
        assert len(accepted) == 2  # the silent connection was dropped, the next step opened another
    finally:
        for sock in accepted:
            sock.close()
        server.close()
