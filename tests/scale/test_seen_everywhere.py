"""Proven across hosts (continued): what one host decides, every host holds at once. A
token quota and a budget in money spent through the balancer are refused by all hosts at their
ceiling; a webhook event sent to the three hosts at the same time is accepted once; a group's
allowed models changed by a command on one host, and an API key revoked through another, are seen
by every host on its next request."""

from __future__ import annotations

import math
import os
import tempfile
import time
from collections import Counter, defaultdict
from decimal import Decimal

import httpx

from tests.faults import checks
from tests.scale import load
from tests.scale.cluster import Cluster
from tests.scale.report import figures
from tests.scale.test_across_hosts import MODEL, account, check_usage_on_every_host

PASSWORD = "faults-password-1"  # tests/faults/seed.py's


def request(cluster: Cluster, method: str, url: str, **kwargs) -> httpx.Response:
    """One call from the client host on a connection of its own."""
    def call():
        with httpx.Client(timeout=10) as client:
            return client.request(method, url, **kwargs)

    return cluster.probe(call)


def chat_status(cluster: Cluster, url: str, key: str) -> int:
    return request(cluster, "POST", f"{url}/v1/chat/completions", headers={"Authorization": f"Bearer {key}"},
                   json={"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}).status_code


def one_call_usage(cluster: Cluster, marker: str) -> dict:
    """The usage of one call like those of the load (`load.chat` with `marker`), by an account of its own."""
    calibration = account(cluster, "calib")
    reply = request(cluster, "POST", f"{cluster.url}/v1/chat/completions",
                    headers={"Authorization": f"Bearer {calibration['key']}"},
                    json={"model": MODEL, "messages": [{"role": "user", "content": f"hello {marker}"}]})
    assert reply.status_code == 200, reply.text[:300]
    return reply.json()["usage"]


def test_token_quota_exact_across_hosts(hosts: Cluster):
    """A daily quota of 7 calls' tokens and one: calls one after another through the round robin
    (each host sees a third of them) are answered 8 times, then refused 403 by whichever host takes
    the next; the counter every host reads equals the usage records."""
    per_call = one_call_usage(hosts, "quota-000")["total_tokens"]
    quota = 7 * per_call + 1
    acc = account(hosts, "quota", daily_tokens=quota)
    calls = 15  # below the /v1 ceiling of 20: only the quota refuses
    answers = load.run(hosts, [load.chat(acc["key"], MODEL, f"quota-{i:03d}") for i in range(calls)],
                       rate=5, concurrency=1, deadline=30)
    statuses = Counter(a.status for a in answers)
    expected = math.ceil(quota / per_call)
    refused = [a for a in answers if a.status == 403]
    figures("token quota across hosts", [f"{calls} calls made, {statuses[200]} answered, {len(refused)} refused by "
                                         f"the quota; a quota of {quota} tokens at {per_call} a call allows "
                                         f"{expected}"])
    assert statuses == {200: expected, 403: calls - expected}, dict(statuses)
    assert all(a.body["error"]["code"] == "permission_denied" for a in refused), refused[0].body
    checks.check_chats(hosts, acc, answers)
    check_usage_on_every_host(hosts, acc)


def test_budget_exact_across_hosts(hosts: Cluster):
    """A daily budget in money a little over seven calls' cost, spent through the round robin:
    answered up to the call whose cost reaches it, then refused 403 naming the budget by whichever host
    takes the next; every host reports the spend the usage records hold."""
    usage = one_call_usage(hosts, "budget-000")
    per_call = usage["prompt_tokens"] * checks.INPUT_UNITS + usage["completion_tokens"] * checks.OUTPUT_UNITS
    step = 10**6  # a budget has four decimal places: 10**6 cost units (gateway/registry/prices.py)
    budget = math.ceil((7 * per_call + 1) / step) * step
    acc = account(hosts, "budget", daily_budget=str(Decimal(budget) / 10**10))
    calls = 15  # below the /v1 ceiling of 20: only the budget refuses
    answers = load.run(hosts, [load.chat(acc["key"], MODEL, f"budget-{i:03d}") for i in range(calls)],
                       rate=5, concurrency=1, deadline=30)
    statuses = Counter(a.status for a in answers)
    expected = math.ceil(budget / per_call)
    refused = [a for a in answers if a.status == 403]
    figures("budget across hosts", [f"{calls} calls made, {statuses[200]} answered, {len(refused)} refused by the "
                                    f"budget; a budget of {budget} cost units at {per_call} a call allows {expected}"])
    assert statuses == {200: expected, 403: calls - expected}, dict(statuses)
    assert all(a.body["error"]["message"].startswith("Budget reached") for a in refused), refused[0].body
    checks.check_chats(hosts, acc, answers)
    (spent,) = hosts.pg.query("SELECT coalesce(sum(cost_units), 0) FROM gateway_usagerecord WHERE account_id = %s",
                              (acc["account_id"],))[0]
    assert spent == expected * per_call
    for host in hosts.hosts.values():
        body = hosts.probe(lambda url: httpx.get(url, headers={"Authorization": f"Bearer {acc['key']}"},
                                                 timeout=10).json(), f"{host.url}/api/v1/usage")
        assert Decimal(body["day"]["spend"]) == Decimal(spent) / 10**10, (host.name, body["day"])


def test_duplicate_event_across_hosts_refused(hosts: Cluster):
    """Each of 40 events sent at the same moment to the three hosts directly (not through the
    balancer): exactly one host accepts it, the two others answer it is a duplicate; each accepted
    event is stored once and runs once (tests/faults/checks.py check_events)."""
    acc = account(hosts, "dup", routines=2)
    tag = os.urandom(3).hex()
    requests = []
    for i in range(40):
        for host in hosts.hosts.values():
            requests.append(load.event(acc["routines"][i % 2], f"dup-{tag}-{i}", base=host.url))
    answers = load.run(hosts, requests, concurrency=9, deadline=40)
    outcome = defaultdict(Counter)
    for a in answers:
        body = a.body if isinstance(a.body, dict) else {}
        outcome[a.ident]["queued" if body.get("queued") else body.get("ignored", a.status)] += 1
    wrong = {ident: dict(c) for ident, c in outcome.items() if c != Counter({"queued": 1, "duplicate": 2})}
    result = checks.check_events(hosts, acc, answers)
    stored = hosts.pg.query("SELECT count(*) FROM routines_event e JOIN routines_routine r ON r.id = e.routine_id "
                            "WHERE r.account_id = %s", (acc["account_id"],))[0][0]
    figures("an event duplicated across hosts", [f"{len(answers)} posts of {len(outcome)} events, "
                                                 f"{result['accepted']} accepted, {stored} stored, "
                                                 f"{sum(c['duplicate'] for c in outcome.values())} refused as "
                                                 f"duplicates"])
    assert not wrong, f"events not accepted exactly once: {list(wrong.items())[:5]}"
    assert result["accepted"] == stored == len(outcome)


def test_allowed_models_change_seen_on_every_host_at_once(hosts: Cluster):
    """A group's allowed models changed by `applyconfig` on gw1: the next request on each of the
    three hosts (whose caches hold the group for 30 s) sees it, within a second of the command's end."""
    acc = account(hosts, "reg", all_models=False, allowed_models=[])
    urls = [h.url for h in hosts.hosts.values()]
    assert [chat_status(hosts, url, acc["key"]) for url in urls] == [403] * 3, "not allowed yet"

    def apply(allowed: list[str]) -> float:
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", dir=hosts.base, delete=False) as f:
            f.write(f"groups:\n  - name: {acc['group']}\n    api_access: true\n    allowed_models: {allowed}\n")
        hosts.manage("applyconfig", f.name)
        return time.monotonic()

    lines = []
    for allowed, status in (([MODEL], 200), ([], 403)):
        applied = apply(allowed)
        seen = [chat_status(hosts, url, acc["key"]) for url in urls]
        took = time.monotonic() - applied
        lines.append(f"allowed {allowed}: the next request on gw1, gw2, gw3 answered {seen}, {took:.2f}s after the "
                     f"command ended")
        assert seen == [status] * 3, lines[-1]
        assert took < 1.0, lines[-1]
    figures("allowed models changed on one host", lines)


def test_revoked_key_refused_on_every_host_at_once(hosts: Cluster):
    """A key in use on the three hosts, revoked through gw2 with a session token from gw1: the next
    call with it is refused 401 by every host, the balancer's too."""
    acc = account(hosts, "revoke")
    email = f"{acc['group'].removeprefix('faults-')}@faults.test"
    urls = [h.url for h in hosts.hosts.values()]
    assert [chat_status(hosts, url, acc["key"]) for url in urls] == [200] * 3  # the key is in every host's cache
    login = request(hosts, "POST", f"{urls[0]}/api/v1/auth/login", json={"email": email, "password": PASSWORD})
    assert login.status_code == 200, login.text[:300]
    session = login.json()["data"]["access_token"]
    revoked = request(hosts, "DELETE", f"{urls[1]}/api/v1/auth/api-key/revoke",
                      headers={"Authorization": f"Bearer {session}"})
    assert revoked.status_code == 200, revoked.text[:300]
    at = time.monotonic()
    seen = [chat_status(hosts, url, acc["key"]) for url in [*urls, hosts.url]]
    took = time.monotonic() - at
    figures("an API key revoked on one host", [f"the next call on gw1, gw2, gw3 and the balancer answered {seen} "
                                               f"(all within {took:.2f}s of the revocation's answer)"])
    assert seen == [401] * 4
