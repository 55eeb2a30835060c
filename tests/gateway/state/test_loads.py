"""The deployments' loads (gateway/state/loads.py): this process's book, traded with every
other process through Redis in one step, or kept to itself without Redis; and the dispatcher's
bookkeeping of a call in flight, whichever way its reply ends."""

import asyncio
import gc
import logging
import time
from types import SimpleNamespace

import pytest

from gateway.calls.dispatch import open_reply
from gateway.registry.snapshot import registry
from gateway.state import backend, loads
from tests.conftest import clear_counters
from tests.factories import ModelFactory, ModelServerFactory
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture


def another_process(name, model_id, *, in_flight=-1, samples=(0.0, 0), calls=0, at=None, tried=0.0):
    """What another process sends in its own trade (LOADS_SCRIPT's arguments, as loads.trade makes them)."""
    now = time.time() if at is None else at
    quarter = int(now // loads.QUARTER_SECONDS)
    tag = loads.TAG
    keys = [f"loads:{tag}:seen", f"loads:{tag}:calls:{quarter}", f"loads:{tag}:calls:{quarter - 1}",
            f"loads:{tag}:flights:{model_id}", f"loads:{tag}:latency:{model_id}"]
    args = [name, int(now * 1000), int(loads.STALE_SECONDS * 1000), loads.ALPHA, int(loads.DECAY_SECONDS * 1000),
            60_000, 86_400_000, 1_800_000, 1,
            model_id, in_flight, calls, int(samples[0] * 1_000_000), samples[1], int(tried * 1000)]
    return backend.current.loads_trade(keys, args)


def test_calls_in_flight_are_counted_across_processes(redis_url):
    another_process("other-host:1", 7, in_flight=3, calls=3)
    loads.started(7)
    assert loads.in_flight(7) == 1  # before the trade: this process's own
    loads.watch([7])
    assert loads.trade() is True
    assert loads.in_flight(7) == 4
    another_process("other-host:1", 7, in_flight=0)  # its calls ended
    loads.trade()
    assert loads.in_flight(7) == 1
    loads.ended(7)
    assert loads.in_flight(7) == 0


def test_a_process_not_heard_from_for_a_while_no_longer_counts(redis_url):
    another_process("gone:1", 7, in_flight=5, at=time.time() - loads.STALE_SECONDS - 1)
    loads.watch([7])
    loads.trade()
    assert loads.in_flight(7) == 0
    assert another_process("gone:2", 7)[:2] == [0, -1]  # gone:1's calls were dropped


def test_the_moving_latency_merges_every_processs_times_and_the_calls_are_shared(redis_url):
    another_process("other:1", 7, samples=(0.300, 1), calls=4)  # the first time: the average
    loads.watch([7])
    loads.trade()
    assert loads.latency(7) == pytest.approx(0.300)
    loads.started(7)
    loads.first_byte(7, 0.100)
    assert loads.latency(7) == pytest.approx(0.300 + (0.100 - 0.300) * loads.ALPHA)  # this process's news at once
    loads.ended(7)
    loads.trade()
    assert loads.latency(7) == pytest.approx(0.260, abs=0.001)
    assert loads.board([7]) == {7: loads.Load(in_flight=0, latency_ms=pytest.approx(260, abs=1), recent_calls=5)}


def test_without_redis_each_process_counts_its_own(db, settings):
    settings.REDIS_URL = ""
    clear_counters()
    loads.watch([7])
    for _ in range(2):
        loads.started(7)
    loads.first_byte(7, 0.050)
    assert loads.trade() is False
    assert loads.board([7]) == {7: loads.Load(in_flight=2, latency_ms=pytest.approx(50), recent_calls=2)}


def test_a_trade_that_fails_keeps_its_news_for_the_next(redis_url, settings, closed_port, caplog):
    loads.watch([7])
    loads.started(7)
    loads.first_byte(7, 0.020)
    settings.REDIS_URL = f"redis://127.0.0.1:{closed_port}/0"
    with caplog.at_level(logging.WARNING):
        loads.trade_quietly()
    assert "deployment loads kept in this process for now" in caplog.text
    settings.REDIS_URL = redis_url
    loads.trade()
    assert another_process("reader:1", 7)[1:] == [20_000, pytest.approx(int(loads.last_tried(7) * 1000)), 1]


def test_the_dispatcher_ends_a_call_in_flight_when_its_reply_ends_or_is_dropped_unread(transactional_db, upstream):
    target_id = ModelFactory(server=ModelServerFactory(name="s", base_url=f"{upstream.url}/v1"), name="m").pk
    target = registry().by_id[target_id]
    loop = asyncio.new_event_loop()
    body = {"model": "s/m", "messages": [{"role": "user", "content": "hi"}]}
    try:
        async def read_all():
            opened = await open_reply([target], body, refusals_fall_through=True)
            assert loads.in_flight(target_id) == 1
            async for _ in opened.chunks:
                pass

        loop.run_until_complete(read_all())
        assert loads.in_flight(target_id) == 0
        assert loads.latency(target_id) is not None

        async def drop_unread():
            await open_reply([target], body, refusals_fall_through=True)

        loop.run_until_complete(drop_unread())
        gc.collect()
        assert loads.in_flight(target_id) == 0
    finally:
        loop.close()


def test_a_wall_clock_that_steps_back_does_not_break_the_moving_latency(monkeypatch):
    """The times are wall-clock (shared between hosts): after a step back (NTP, a test's time
    travel) the gap reads as none, and the new time weighs ALPHA, never an overflow on a call's way."""
    model_id = 987654
    clock = iter([1_000_000.0, 999_000.0])
    monkeypatch.setattr(loads, "time", SimpleNamespace(time=lambda: next(clock), monotonic=time.monotonic))
    loads.first_byte(model_id, 0.2)
    loads.first_byte(model_id, 1.2)
    assert loads.latency(model_id) == pytest.approx(0.2 + (1.2 - 0.2) * loads.ALPHA)
