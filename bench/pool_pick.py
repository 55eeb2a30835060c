"""What a pool costs on the call's way, measured in-process where a loaded machine's noise cannot
hide it (issue 24; bench/README.md, "Issue 24: pools"):

    .venv/bin/python bench/pool_pick.py

- the chain of a pinned model (`bench1/echo-1`) against the chain of a bare name three servers hold,
  under each policy (`gateway/registry/routing.py plan_chain`, on a registry built here: what a
  request finds once its stamps are noted);
- the dispatcher's bookkeeping of one try (`gateway/state/loads.py` started, first_byte, ended, and the
  landing with its weakref finalizer, `gateway/calls/chain.py`), net of making the reply's generator.

No database, no Redis (the loads are this process's own), no network.
"""

from __future__ import annotations

import os
import sys
import time
import timeit
import weakref
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway.settings")
os.environ["REDIS_URL"] = ""  # the loads stay in this process

import django  # noqa: E402

django.setup()

from gateway.calls import chain  # noqa: E402
from gateway.registry import routing  # noqa: E402
from gateway.registry.snapshot import Deployment, Pool, Registry, Server, Target  # noqa: E402
from gateway.state import loads  # noqa: E402

CALLS = 200_000
REPEATS = 5
SERVERS = [Server(i, f"bench{i}", "openai", "http://127.0.0.1:9/v1", "", False, 5.0, 120.0) for i in (1, 2, 3)]
TARGETS = [Target(s.id, f"{s.name}/echo-1", "echo-1", s, frozenset({"chat"}), (), 0) for s in SERVERS]
GROUP = SimpleNamespace(id=1, all_models=True, remote_servers_allowed=True)


def registry_with(policy: str) -> Registry:
    pool = Pool("echo-1", tuple(Deployment(t, 1) for t in TARGETS), policy=policy)
    return Registry(by_id={t.id: t for t in TARGETS}, by_public_id={t.public_id: t for t in TARGETS},
                    by_name={"echo-1": TARGETS[0]}, server_names=frozenset(s.name for s in SERVERS),
                    server_ids=frozenset(s.id for s in SERVERS), default_id=1, group_models={},
                    pools={"echo-1": pool})


def microseconds(function) -> float:
    """The best of REPEATS runs of CALLS calls, per call."""
    return min(timeit.repeat(function, number=CALLS, repeat=REPEATS)) / CALLS * 1e6


async def _reply():
    yield {}


def one_try() -> None:
    loads.started(TARGETS[0].id)
    began = time.perf_counter()
    loads.first_byte(TARGETS[0].id, time.perf_counter() - began)
    answered = chain.Answered(TARGETS[0], None)
    chunks = _reply()
    weakref.finalize(chunks, answered.land)
    answered.land()


def main() -> None:
    print(f"python {sys.version.split()[0]}; best of {REPEATS} x {CALLS:,} calls")
    for policy in ("weighted", "least-busy", "latency"):
        reg = registry_with(policy)
        routing.registry = lambda reg=reg: reg
        pinned = microseconds(lambda: routing.plan_chain("bench1/echo-1", group=GROUP))
        pooled = microseconds(lambda: routing.plan_chain("echo-1", group=GROUP))
        print(f"  chain, {policy:10}: pinned {pinned:5.2f} µs, pool of three {pooled:5.2f} µs "
              f"(+{pooled - pinned:.2f} µs)")
    bookkeeping = microseconds(one_try) - microseconds(_reply)
    print(f"  dispatcher's bookkeeping of one try: {bookkeeping:.2f} µs")


if __name__ == "__main__":
    main()
