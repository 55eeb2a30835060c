"""Issue 28, Redis primary failover through Sentinel: a private stack whose web, worker and beat find Redis through
three Sentinels (tests/faults/sentinel.py). Under webhook events and chat calls the primary is killed (SIGKILL):
calls answer 200, or 503 with Retry-After while no primary answers, never a 500 or a dropped connection; once the
Sentinels have promoted the replica, calls succeed again; every answered call has one usage record, every accepted
event one run, the quota counters equal the records, and a per-account ceiling is exact on the new primary."""

from __future__ import annotations

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
    stack = SentinelStack(RATE_LIMIT_GENERAL=str(GENERAL_CEILING))
    try:
        stack.start()
        yield stack
    except BaseException:
        print(f"\n===== logs of the stack in {stack.base} =====\n{stack.tail()}")
        raise
    finally:
        stack.close()


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
        event_figures = checks.check_events(live, account, answers)
        checks.check_quota_counters(live, account)

        # A ceiling counted on the new primary is exact: a fresh account's reads, GENERAL_CEILING answered.
        reader = live.seed({"op": "account", "name": f"sentinel-ceiling-{os.urandom(3).hex()}"})
        statuses = Counter(httpx.get(f"{live.url}/api/v1/routines", timeout=10,
                                     headers={"Authorization": f"Bearer {reader['key']}"}).status_code
                           for _ in range(GENERAL_CEILING + 5))
        assert statuses == {200: GENERAL_CEILING, 429: 5}, f"the ceiling on the new primary: {dict(statuses)}"
        ready = httpx.get(f"{live.url}/readyz", timeout=10)
        assert ready.status_code == 200, f"/readyz after the failover: {ready.text}"
    except AssertionError:
        print(f"\n===== logs of the stack in {live.base} =====\n{live.tail()}")
        raise
    usage = live.pg.query("SELECT count(*) FROM gateway_usagerecord WHERE account_id = %s",
                          (account["account_id"],))[0][0]
    by_status = Counter(a.status for a in answers)
    print(f"\nsentinel failover: primary :{old.port} killed, :{new.port} promoted after {switched:.1f} s, calls "
          f"answered 200 again after {back:.1f} s; {len(answers)} calls made ({by_status[200]} answered 200, "
          f"{by_status[503]} answered 503 with Retry-After); chats answered {chat_figures['answered']}, events "
          f"accepted {event_figures['accepted']}; {usage} usage records (chats, runs and the probe)")
    assert usage == chat_figures["answered"] + event_figures["accepted"] + 1  # + the one probe answered 200
