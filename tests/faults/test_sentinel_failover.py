"""Redis primary failover through Sentinel: a private stack whose web, worker and beat find Redis through
three Sentinels (tests/faults/sentinel.py). Under webhook events and chat calls the primary is killed (SIGKILL):
calls answer 200, or 503 with Retry-After while no primary answers, never a 500 or a dropped connection; once the
Sentinels have promoted the replica, calls succeed again; every answered call has one usage record, every accepted
event one run, the quota counters equal the records, events posted after the switch are run and delivered, and a
per-account ceiling is exact on the new primary. Then a graceful switch (`SENTINEL FAILOVER`), where the old primary
lives on as a replica: the clients' connections to it get READONLY and move to the new primary.
About 85 s: `bin/test tests/faults/test_sentinel_failover.py`."""

from __future__ import annotations

import contextlib
import os
import time
from collections import Counter

import httpx
import pytest

from tests.faults import checks
from tests.faults.load import Load, chat_maker, event_maker
from tests.faults.sentinel import SentinelStack
from tests.faults.stack import wait_for

MODEL = "ref/echo-1"
GENERAL_CEILING = 20  # /api/v1 reads per account and minute (RATE_LIMIT_GENERAL): counted on the new primary
LIMITS = {f"{period}_{kind}": limit for period in ("daily", "weekly", "monthly")
          for kind, limit in (("tokens", 10**9), ("budget", 10**6))}
BACK_WITHIN = 20.0  # seconds from the kill until calls succeed again


@pytest.fixture(scope="module")
def sentinel_stack():
    # a run whose queue message the old primary took with it is enqueued again by the sweep after this grace
    stack = SentinelStack(RATE_LIMIT_GENERAL=str(GENERAL_CEILING), ROUTINE_QUEUED_GRACE_SECONDS="5")
    try:
        stack.start()
        yield stack
    except BaseException:
        print(f"\n===== logs of the stack in {stack.base} =====\n{stack.tail()}")
        raise
    finally:
        stack.close()


def check_runs(stack: SentinelStack, account: dict, answers) -> dict:
    """Every event answered `200 queued` has one run, answered by the model once, with one usage record. (Its
    deliveries are not waited for: a delivery task the worker had taken from the killed primary waits for its
    lease, about 75 s, before the sweep runs it again, as after a Redis restart: test_faults.py covers that.)"""
    account_id = account["account_id"]
    accepted = {a.ident for a in answers if a.queued}
    assert accepted, f"no event was accepted ({checks.summary(answers)})"

    def answered_runs():
        return stack.pg.query("SELECT run.id, run.event_id, run.status FROM routines_run run JOIN routines_routine r "
                              "ON r.id = run.routine_id WHERE r.account_id = %s AND run.answered_at IS NOT NULL",
                              (account_id,))

    with contextlib.suppress(AssertionError):  # the problems below say which are missing
        wait_for(lambda: accepted <= {event_id for _, event_id, _ in answered_runs()}, 30, "the runs answered")
    runs = answered_runs()
    checks.wait_usage(stack, account_id, {f"run-{run_id}" for run_id, _, _ in runs})
    usage = Counter(dict(stack.pg.query("SELECT request_id, count(*) FROM gateway_usagerecord WHERE account_id = %s "
                                        "GROUP BY request_id", (account_id,))))
    calls, _ = checks.model_calls(stack)
    by_event = Counter(event_id for _, event_id, _ in runs)
    problems = [f"event {e}: {by_event[e]} runs" for e in sorted(accepted) if by_event[e] != 1]
    for run_id, event_id, status in runs:
        if event_id in accepted and (status in ("succeeded", "running"), usage[f"run-{run_id}"],
                                     calls[event_id]) != (True, 1, 1):
            problems.append(f"event {event_id}: run {run_id} {status}, {usage[f'run-{run_id}']} usage records, "
                            f"{calls[event_id]} model calls")
    checks.fail_if(problems + checks.mispriced(stack, account_id), f"{len(accepted)} accepted events")
    return {"accepted": len(accepted)}


def events_run_and_delivered(stack: SentinelStack, account: dict, count: int = 4) -> int:
    """Events posted after the switch are taken up by the worker from the new primary: each run succeeds and its
    in-app delivery too, within 30 s. The number of usage records they made."""
    answers = Load(stack.url, event_maker(account["routines"], "after"), count, concurrency=2).start().join(30)
    ids = [a.ident for a in answers if a.queued]
    assert len(ids) == count, f"events after the switch not accepted: {checks.summary(answers)}"

    def done() -> bool:
        return stack.pg.query(
            "SELECT count(*) FROM routines_run run JOIN routines_delivery d ON d.run_id = run.id WHERE "
            "run.event_id = ANY(%s) AND run.status = 'succeeded' AND d.status = 'succeeded'", (ids,))[0][0] == count

    wait_for(done, 30, f"the runs and deliveries of {count} events posted after the switch")
    return count


def test_primary_killed_under_load(sentinel_stack: SentinelStack):
    live = sentinel_stack
    account = live.seed({"op": "account", "name": f"sentinel-{os.urandom(3).hex()}", "routines": 2, **LIMITS})
    events = Load(live.url, event_maker(account["routines"], "sent"), 100, rate=10, concurrency=4).start()
    chats = Load(live.url, chat_maker(account["key"], MODEL, "sent"), 200, rate=20, concurrency=6).start()
    chats.wait_answered(40)
    old, killed_at = live.redis.kill_primary()
    new = live.redis.wait_new_primary(old)
    switched = time.monotonic() - killed_at

    def one_chat_ok() -> bool:
        body = {"model": MODEL, "messages": [{"role": "user", "content": "after the switch"}]}
        return httpx.post(f"{live.url}/v1/chat/completions", json=body, timeout=10,
                          headers={"Authorization": f"Bearer {account['key']}"}).status_code == 200

    wait_for(one_chat_ok, BACK_WITHIN, "a chat call answered 200 after the failover")
    back = time.monotonic() - killed_at
    answers = events.join() + chats.join()
    try:
        dropped = [a for a in answers if a.status is None]
        assert not dropped, f"{len(dropped)} calls got no HTTP answer, e.g. {dropped[0].error}"
        checks.check_answers(answers, outage=True)
        chat_figures = checks.check_chats(live, account, answers)
        event_figures = check_runs(live, account, answers)
        checks.check_quota_counters(live, account)
        probe = events_run_and_delivered(live, account)

        # A ceiling counted on the new primary is exact: a fresh account's reads, GENERAL_CEILING answered.
        reader = live.seed({"op": "account", "name": f"sentinel-ceiling-{os.urandom(3).hex()}"})
        statuses = Counter(httpx.get(f"{live.url}/api/v1/routines", timeout=10,
                                     headers={"Authorization": f"Bearer {reader['key']}"}).status_code
                           for _ in range(GENERAL_CEILING + 5))
        assert statuses == {200: GENERAL_CEILING, 429: 5}, f"the ceiling on the new primary: {dict(statuses)}"
        ready = httpx.get(f"{live.url}/readyz", timeout=10)
        assert ready.status_code == 200, f"/readyz after the failover: {ready.text}"
        scrape = httpx.get(f"{live.url}/metrics", timeout=10).text  # from loopback: no token needed
        assert 'gateway_scrape_reading_up{reading="queue_depth"} 1.0' in scrape, "the broker's depth not read"
    except AssertionError:
        print(f"\n===== logs of the stack in {live.base} =====\n{live.tail()}")
        raise
    usage = live.pg.query("SELECT count(*) FROM gateway_usagerecord WHERE account_id = %s",
                          (account["account_id"],))[0][0] - probe
    by_status = Counter(a.status for a in answers)
    print(f"\nsentinel failover: primary :{old.port} killed, :{new.port} promoted after {switched:.1f} s, calls "
          f"answered 200 again after {back:.1f} s; {len(answers)} calls made ({by_status[200]} answered 200, "
          f"{by_status[503]} answered 503 with Retry-After); chats answered {chat_figures['answered']}, events "
          f"accepted {event_figures['accepted']}; {usage} usage records (chats, runs and the probe)")
    assert usage == chat_figures["answered"] + event_figures["accepted"] + 1  # + the one probe answered 200


def test_a_demoted_primary_sends_the_clients_to_the_new_one(tmp_path):
    """`SENTINEL FAILOVER`: the old primary lives on as a replica, so a connection still open to it gets READONLY.
    The loop's client and the counters' redis-py client both go on, on the new primary, without an error the caller
    sees (the READONLY reply is taken as a lost connection and the command tried again); the quota amounts are
    dropped once for the switch, by the first process to see it, and a second look drops nothing."""
    import asyncio

    from gateway.state.redis.client import (
        ADD_SCRIPT,
        KEY_PREFIX,
        PRIMARY_KEY,
        client_for,
        forget_after_switch,
    )
    from gateway.state.redis.loop import LoopRedis
    from gateway.state.redis.sentinel import Sentinels, primary_address
    from tests.faults.sentinel import SERVICE, SentinelRedis

    logs = tmp_path / "logs"
    logs.mkdir()
    group = SentinelRedis(tmp_path, logs)
    try:
        group.start()
        where = Sentinels(tuple(("127.0.0.1", s.port) for s in group.sentinels), SERVICE)
        url = group.url
        sync = client_for(url, where)
        first = "%s:%s" % primary_address(where)
        wait_for(lambda: sync.get(KEY_PREFIX + PRIMARY_KEY) == first.encode(), 10, "gw:primary set at the start")
        sync.set(KEY_PREFIX + "tokens:{a1}:day:0", 5)

        async def steps(client: LoopRedis):
            await client.script(ADD_SCRIPT, [KEY_PREFIX + "spend:1:day:0"], [1])
            return await client.command("INCR", KEY_PREFIX + "t:loop")

        async def scenario():
            client = LoopRedis(url, where)
            assert await steps(client) == 1
            old = group.primary()
            group.sentinel_client().execute_command("SENTINEL", "FAILOVER", SERVICE)
            new = group.wait_new_primary(old)
            wait_for(lambda: old.client().execute_command("ROLE")[0] == b"slave", 20, "the old primary demoted")
            assert client.connection is not None and not client.connection.closed  # still on the old primary
            assert await steps(client) == 2  # READONLY, then again on the new primary
            client.close()
            return new

        new = asyncio.run(scenario())
        assert sync.incr(KEY_PREFIX + "t:sync") == 1  # redis-py's pool: READONLY, reconnected
        assert group.client().get(KEY_PREFIX + "t:loop") == b"2"
        second = f"127.0.0.1:{new.port}"
        wait_for(lambda: group.client().get(KEY_PREFIX + PRIMARY_KEY) == second.encode()
                 and group.client().get(KEY_PREFIX + "tokens:{a1}:day:0") is None, 10,
                 "the amounts dropped after the switch (to be rebuilt), once")
        sync.set(KEY_PREFIX + "tokens:{a1}:day:0", 5)
        assert forget_after_switch(second, url, where) is False  # once per switch
        assert group.client().get(KEY_PREFIX + "tokens:{a1}:day:0") == b"5"
    finally:  # the clients made here stay in client_for's cache, unused: clearing it would renew the others'
        group.stop()
