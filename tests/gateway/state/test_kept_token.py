"""A cloud's access token kept by the process (gateway/state/kept_token.py): fetched once for many callers
at once, in a worker thread, used until its margin before it expires, fetched again after a failure."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from gateway.state.kept_token import KeptToken


class Fetcher:
    def __init__(self, lifetime: float = 3600.0, fail: int = 0) -> None:
        self.calls, self.threads, self.lifetime, self.fail = 0, set(), lifetime, fail
        self.gate = threading.Event()

    def __call__(self) -> tuple[str, float]:
        self.gate.wait(5)
        self.calls += 1
        self.threads.add(threading.get_ident())
        if self.fail:
            self.fail -= 1
            raise RuntimeError("the tenant said no")
        return f"token-{self.calls}", time.time() + self.lifetime


def test_callers_at_once_share_one_fetch_made_off_the_event_loop():
    fetcher = Fetcher()
    kept = KeptToken(fetcher, margin=300)

    async def many():
        waiting = [asyncio.ensure_future(kept.get(ValueError)) for _ in range(20)]
        await asyncio.sleep(0)
        fetcher.gate.set()
        return await asyncio.gather(*waiting)

    assert asyncio.run(many()) == ["token-1"] * 20
    assert fetcher.calls == 1 and threading.get_ident() not in fetcher.threads
    assert asyncio.run(kept.get(ValueError)) == "token-1"  # kept: no second fetch
    assert fetcher.calls == 1


@pytest.mark.parametrize("lifetime, fetches", [(301.0, 1), (299.0, 2)])
def test_a_token_inside_its_margin_is_fetched_again(lifetime, fetches):
    fetcher = Fetcher(lifetime=lifetime)
    fetcher.gate.set()
    kept = KeptToken(fetcher, margin=300)
    asyncio.run(kept.get(ValueError))
    asyncio.run(kept.get(ValueError))
    assert fetcher.calls == fetches


def test_a_failed_fetch_is_the_caller_s_failure_and_the_next_call_tries_again():
    fetcher = Fetcher(fail=1)
    fetcher.gate.set()
    kept = KeptToken(fetcher, margin=300)
    with pytest.raises(LookupError, match="no token: the tenant said no"):
        asyncio.run(kept.get(lambda exc: LookupError(f"no token: {exc}")))
    assert asyncio.run(kept.get(ValueError)) == "token-2"
    assert kept.fetch_now() == "token-2"  # blocking callers get the kept one too
