"""A model server that failed to connect or timed out is skipped by every process
for SERVER_COOLDOWN_SECONDS (shared through Redis), and one probe at a time lets it back in."""

import asyncio
import dataclasses
import logging
import socket
import threading
import time
from unittest import mock

import pytest
import redis
from django.test import override_settings

from gateway.calls.chain import ChainExhausted
from gateway.calls.dispatch import open_reply
from gateway.calls.embeddings import embed
from gateway.registry import cooldown
from gateway.registry.cooldown import Verdict
from gateway.registry.snapshot import registry
from gateway.state import backend
from gateway.upstream.http_client import Client, ConnectError
from gateway.upstream.providers.base import UpstreamError
from tests.conftest import clear_counters
from tests.factories import ModelFactory, ModelServerFactory
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture

BODY = {"messages": [{"role": "user", "content": "one two three"}]}


@pytest.fixture(autouse=True)
def _cooldowns(settings, redis_url, db):
    settings.SERVER_COOLDOWN_SECONDS = 30


class SilentServer:
    """Accepts connections and never answers; counts them."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.held = []
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            self.held.append(conn)

    def close(self):
        self.stopped.set()
        self.thread.join()
        for conn in self.held:
            conn.close()
        self.sock.close()


@pytest.fixture
def silent():
    server = SilentServer()
    yield server
    server.close()


def target_at(base_url, name="s", **server_fields):
    server = ModelServerFactory(name=name, base_url=base_url, **{"connect_timeout": 2.0, "read_timeout": 0.3,
                                                                  **server_fields})
    ModelFactory(server=server, name="m", supports_embeddings=True)
    return registry().by_public_id[f"{name}/m"]


def redis_client(url):
    return redis.Redis.from_url(url)


@pytest.fixture(autouse=True)
def loop():
    """One event loop for the test's calls, so they share the pooled client as a process does."""
    loop = asyncio.new_event_loop()
    _loops.append(loop)
    yield loop
    _loops.remove(loop)
    loop.close()


_loops = []


def call(chain):
    """The chain's reply, or its ChainExhausted; and the seconds it took."""
    async def timed():
        started = time.monotonic()
        try:
            return await open_reply(chain, BODY, refusals_fall_through=True), time.monotonic() - started
        except ChainExhausted as exc:
            return exc, time.monotonic() - started

    return _loops[-1].run_until_complete(timed())


def never_send(*args, **kwargs):
    raise AssertionError("a server in cooldown was called")


def test_a_refused_server_is_skipped_by_the_next_call_without_a_connection(closed_port, redis_url, caplog):
    target = target_at(f"http://127.0.0.1:{closed_port}/v1")
    with caplog.at_level(logging.WARNING):
        first, _ = call([target])
    assert isinstance(first, ChainExhausted) and first.status == 503
    assert redis_client(redis_url).exists("gw:" + cooldown.cooldown_key(target.server.id))
    fell = [r.getMessage() for r in caplog.records if r.name == "gateway.calls.attempt_observers"]
    assert fell and "model m on server s failed: connect failed" in fell[0]

    with mock.patch.object(Client, "send", never_send):
        second, elapsed = call([target])
    assert isinstance(second, ChainExhausted) and second.status == 503
    assert second.headers["Retry-After"]
    assert elapsed < 0.05


def test_a_server_that_never_answers_costs_one_timeout_then_is_skipped(silent):
    target = target_at(f"http://127.0.0.1:{silent.port}/v1", read_timeout=0.3)
    first, elapsed = call([target])
    assert isinstance(first, ChainExhausted) and elapsed >= 0.3
    assert silent.accepted == 1
    second, elapsed = call([target])
    assert isinstance(second, ChainExhausted)
    assert elapsed < 0.05
    assert silent.accepted == 1


def test_the_chain_falls_through_a_cooling_server_in_milliseconds(silent, upstream):  # noqa: F811
    dead = target_at(f"http://127.0.0.1:{silent.port}/v1", name="dead")
    alive = target_at(f"{upstream.url}/v1", name="alive")
    first, _ = call([dead, alive])
    assert first.target.public_id == "alive/m"
    second, elapsed = call([dead, alive])
    assert second.target.public_id == "alive/m"
    assert silent.accepted == 1
    assert elapsed < 0.5  # the upstream's own answer included


def test_another_processes_cooldown_is_seen_on_the_next_call(closed_port):
    target = target_at(f"http://127.0.0.1:{closed_port}/v1")
    cooldown.record_failure(target.server, "connect failed")  # as another process would
    cooldown.forget_all()  # ... so this one knows nothing of it
    assert cooldown.verdict(target.server) == Verdict.GO
    registry()  # every planned call reads the stamps
    assert cooldown.verdict(target.server) == Verdict.SKIP


def expire(server_id):
    """The cooldown ended (its end moved into the past), as another process's clock sees it."""
    backend.current.write(put=[(cooldown.cooldown_key(server_id), int(time.time() * 1000) - 1, 60)],
                          bump=[cooldown.STAMP_KEY])


@pytest.fixture(params=["redis", "cache"])
def shared_state(request, settings):
    """Both backends of the shared state: Redis, and the Django cache of the embedded default."""
    if request.param == "cache":
        settings.REDIS_URL = ""
    clear_counters()
    yield request.param
    clear_counters()


def test_one_probe_at_a_time_then_cleared_for_everyone(closed_port, shared_state):
    target = target_at(f"http://127.0.0.1:{closed_port}/v1")
    server = target.server
    cooldown.record_failure(server, "connect failed")
    expire(server.id)
    registry()
    assert cooldown.check(server) == Verdict.PROBE
    assert cooldown.check(server) == Verdict.SKIP  # this process, while the probe is out
    cooldown.forget_all()
    registry()
    assert cooldown.check(server) == Verdict.SKIP  # another process: the lock is held
    cooldown.record_success(server)
    assert cooldown.check(server) == Verdict.GO
    cooldown.forget_all()
    registry()
    assert cooldown.check(server) == Verdict.GO
    assert backend.current.read([cooldown.cooldown_key(server.id), cooldown.probe_key(server.id)]) == [None, None]


def test_a_failed_probe_renews_the_cooldown(closed_port, redis_url):
    target = target_at(f"http://127.0.0.1:{closed_port}/v1")
    cooldown.record_failure(target.server, "connect failed")
    expire(target.server.id)
    registry()
    with mock.patch.object(Client, "send", side_effect=ConnectError("refused")) as send:
        first, _ = call([target])  # the probe
        second, _ = call([target])
    assert send.call_count == 1
    assert isinstance(first, ChainExhausted) and isinstance(second, ChainExhausted)
    ends = int(redis_client(redis_url).get("gw:" + cooldown.cooldown_key(target.server.id))) / 1000
    assert ends > time.time() + 25


def test_a_probe_that_reaches_the_server_lets_it_back_in(upstream, redis_url):  # noqa: F811
    target = target_at(f"{upstream.url}/v1")
    cooldown.record_failure(target.server, "connect failed")
    assert isinstance(call([target])[0], ChainExhausted)  # skipped
    expire(target.server.id)
    registry()
    opened, _ = call([target])
    assert opened.target.public_id == "s/m"
    assert not redis_client(redis_url).exists("gw:" + cooldown.cooldown_key(target.server.id))
    assert len(upstream.requests) == 1


def test_the_cooldown_ends_after_its_time(closed_port, settings, upstream):  # noqa: F811
    settings.SERVER_COOLDOWN_SECONDS = 0.2
    target = target_at(f"http://127.0.0.1:{closed_port}/v1")
    assert isinstance(call([target])[0], ChainExhausted)
    assert cooldown.verdict(target.server) == Verdict.SKIP
    deadline = time.monotonic() + 5
    while cooldown.verdict(target.server) == Verdict.SKIP:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    back = dataclasses.replace(target, server=dataclasses.replace(target.server, base_url=f"{upstream.url}/v1"))
    opened, _ = call([back])  # the probe: the server answers again
    assert opened.target.public_id == "s/m"
    assert cooldown.verdict(target.server) == Verdict.GO


def test_embeddings_skip_a_cooling_server_too(closed_port, loop):
    target = target_at(f"http://127.0.0.1:{closed_port}/v1")
    with pytest.raises(ChainExhausted):
        loop.run_until_complete(embed([target], ["hello"]))
    with mock.patch.object(Client, "send", never_send), pytest.raises(ChainExhausted):
        loop.run_until_complete(embed([target], ["hello"]))


def test_an_answer_with_an_error_status_puts_no_server_in_cooldown(upstream):  # noqa: F811
    upstream.configure(fail_status=503)
    target = target_at(f"{upstream.url}/v1")
    assert isinstance(call([target])[0], ChainExhausted)
    assert cooldown.verdict(target.server) == Verdict.GO


def test_a_redis_error_in_the_probe_check_lets_the_call_go(closed_port):
    target = target_at(f"http://127.0.0.1:{closed_port}/v1")
    cooldown.record_failure(target.server, "connect failed")
    with mock.patch.object(backend.current, "probe", side_effect=redis.exceptions.ConnectionError("down")), \
            mock.patch("time.time", return_value=time.time() + 60):
        assert cooldown.check(target.server) == Verdict.GO


def test_without_redis_a_failure_is_still_known_in_this_process(closed_port):
    target = target_at(f"http://127.0.0.1:{closed_port}/v1")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        down = override_settings(REDIS_URL=f"redis://127.0.0.1:{sock.getsockname()[1]}/0")
        with down:
            assert isinstance(call([target])[0], ChainExhausted)  # no exception from the bookkeeping
            registry()  # the stamps cannot be read: the copy stays
    assert cooldown.verdict(target.server) == Verdict.SKIP


def test_an_operator_saving_the_server_clears_its_cooldown(closed_port, redis_url, django_capture_on_commit_callbacks):
    target = target_at(f"http://127.0.0.1:{closed_port}/v1")
    cooldown.record_failure(target.server, "connect failed")
    from gateway.models import ModelServer

    row = ModelServer.objects.get(pk=target.server.id)
    with django_capture_on_commit_callbacks(execute=True):
        row.base_url = "http://127.0.0.1:1/v1"
        row.save()
    assert not redis_client(redis_url).exists("gw:" + cooldown.cooldown_key(target.server.id))
    assert cooldown.verdict(target.server) == Verdict.GO


def test_a_skip_is_an_upstream_error_like_an_unreachable_server(closed_port):
    """The skipped model's failure, as the chain keeps it (a routine's run records each model tried)."""
    target = target_at(f"http://127.0.0.1:{closed_port}/v1")
    call([target])
    error, _seconds = call([target])
    assert isinstance(error, ChainExhausted)
    (model, failure), = error.tried
    assert model == "s/m" and isinstance(failure, UpstreamError)
    assert failure.status == 503 and "cooling down" in failure.message and failure.cooldown_cause is None
