"""The key layout is ready for Redis Cluster: every multi-key script, transaction and
multi-key command the gateway sends keeps its keys in one hash slot. Shown on a Redis node of its own
started in cluster mode and given every slot: such a node refuses a command whose keys hash to two
slots (CROSSSLOT), as a cluster of many nodes would, so each step below would fail if one of its
commands mixed slots. The gateway talks to it as to any Redis (it owns every slot: no redirection).

The steps: a proxied call's admission (ceilings, the account's version, its quota and budget amounts, the
registry's stamps beside), an amount's rebuild and the additions after a reply, whole and streamed, from
the event loop and from synchronous code; a key revoked and a group changed (the account versions moved);
a server's cooldown, its probe and its clearing; the deployments' loads; a webhook event's marks."""

from __future__ import annotations

import asyncio
import time

import pytest
import redis
import time_machine
from django.test import AsyncClient

from accounts.models import ApiKey
from gateway.limits.quotas import quota_used, quota_window_keys
from gateway.registry import cooldown
from gateway.registry.snapshot import registry
from gateway.state import counters, loads
from gateway.state.counters import account_tag
from gateway.usage.writer import usage_writer
from tests.conftest import clear_counters
from tests.factories import AccountFactory, AccountGroupFactory, ModelFactory, ModelServerFactory, api_key_for
from tests.faults.services import PrivateRedis, free_port, wait_for
from tests.servers import wait_for_quiet_database
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture

BODY = {"model": "oa/echo-1", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture(scope="module")
def cluster_node(tmp_path_factory):
    base = tmp_path_factory.mktemp("cluster")
    # a Redis in cluster mode on loopback (database 0 alone), to hold all 16,384 slots itself
    options = ("--cluster-enabled", "yes", "--cluster-port", str(free_port()),
               "--cluster-config-file", str(base / "nodes.conf"))
    node = PrivateRedis(base, base, name="redis-cluster", options=options).start(timeout=30)
    try:
        client = node.client()
        client.execute_command("CLUSTER", "ADDSLOTSRANGE", 0, 16383)
        wait_for(lambda: b"cluster_state:ok" in client.execute_command("CLUSTER", "INFO"), 20,
                 "the one-node cluster to take its slots")
        yield node
    finally:
        node.stop()


@pytest.fixture
def on_cluster(settings, cluster_node):
    """The shared state on the cluster node (the Django caches stay where the test settings put them)."""
    client = cluster_node.client()
    with pytest.raises(redis.ResponseError, match="hash to the same slot"):  # the node refuses what a cluster refuses
        client.mget(["gw:a", "gw:b"])
    settings.REDIS_URL = cluster_node.url
    clear_counters()
    yield client
    clear_counters()


@pytest.fixture
def caller(transactional_db, on_cluster, upstream):  # noqa: F811
    group = AccountGroupFactory(api_access=True, daily_tokens=1_000_000, daily_budget=5)
    account = AccountFactory(group=group)
    server = ModelServerFactory(name="oa", kind="openai", base_url=f"{upstream.url}/v1")
    ModelFactory(server=server, name="echo-1", is_default=True, input_price=1, output_price=2)
    yield account, api_key_for(account)
    # the calls' usage written before the teardown empties the tables (a late INSERT meeting the TRUNCATE
    # deadlocks on PostgreSQL, and the tables are left full for the next test)
    assert usage_writer.flush(timeout=10)
    wait_for_quiet_database()


def post(key: str, count: int, **extra) -> list:
    """`count` chat completions from the event loop (a streamed reply read to its end)."""
    async def run():
        client, answers = AsyncClient(), []
        for _ in range(count):
            answer = await client.post("/v1/chat/completions", {**BODY, **extra}, content_type="application/json",
                                       headers={"Authorization": f"Bearer {key}"})
            if answer.streaming:
                answer.read_to_end = b"".join([chunk async for chunk in answer.streaming_content])
            answers.append(answer)
        return answers

    return asyncio.run(run())


def day_tokens(account) -> int:
    return dict((w.period, n) for w, n in quota_used(account_id=account.pk).tokens)["day"]


def test_a_proxied_call_from_the_loop_steps_one_slot_at_a_time(caller, on_cluster):
    account, key = caller
    answers = post(key, 3) + post(key, 1, stream=True)
    assert [a.status_code for a in answers] == [200, 200, 200, 200]
    assert [a["X-RateLimit-Remaining"] for a in answers] == ["19", "18", "17", "16"]
    assert answers[3].read_to_end.endswith(b"data: [DONE]\n\n")
    usage = [a.json()["usage"]["total_tokens"] for a in answers[:3]]
    wait_for(lambda: day_tokens(account) >= sum(usage) + 1, 10, "the streamed call's tokens added")
    tag = account_tag(account.pk)
    held = {k.decode() for k in on_cluster.keys(f"gw:*{tag}*")}
    assert f"gw:acct:{tag}:shared" in held and f"gw:authv:{tag}" in held
    assert {f"gw:{c.key}" for c in quota_window_keys(account_id=account.pk) if c.window.period == "day"} <= held


def test_the_synchronous_steps_keep_to_one_slot_too(caller, on_cluster):
    account, _ = caller
    keyed = quota_window_keys(account_id=account.pk)
    result = counters.window_hit([(f"acct:{account_tag(account.pk)}:shared", 20)], 60,
                                 guards=[(f"authv:{account_tag(account.pk)}", None)], reads=[c.key for c in keyed],
                                 beside=[cooldown.STAMP_KEY, "registry:{registry}:v"])
    assert result.allowed and result.amounts == (None,) * 6 and len(result.beside) == 2
    assert quota_used(account_id=account.pk).tokens[0][1] == 0  # rebuilt: one account's keys
    counters.amounts_add([(c.key, 7) for c in keyed])
    assert counters.amounts_get([c.key for c in keyed]) == [7] * 6
    counters.amounts_forget([c.key for c in keyed])
    assert counters.amounts_get([c.key for c in keyed]) == [None] * 6


def test_a_revoked_key_and_a_changed_group_are_refused_through_the_cluster(caller, on_cluster):
    account, key = caller
    other = api_key_for(AccountFactory(group=account.group))
    assert [a.status_code for a in post(key, 1) + post(other, 1)] == [200, 200]
    ApiKey.objects.filter(account=account).delete()
    assert post(key, 1)[0].status_code == 401
    account.group.api_access = False
    account.group.save()  # moves the version of each of its accounts
    assert post(other, 1)[0].status_code == 401


def test_cooldowns_loads_and_marks_on_the_cluster(caller, on_cluster, settings):
    """(A webhook event's marks are one key each, set in one pipeline and dropped one DEL per key.)"""
    server = registry().by_public_id["oa/echo-1"].server
    cooldown.record_failure(server, "a test")  # the cooldown set and the stamp moved: one transaction
    assert cooldown.shared_ends([server.id])  # one MGET of the registry's slot
    with time_machine.travel(time.time() + settings.SERVER_COOLDOWN_SECONDS + 1):
        assert cooldown.take_probe(server) is cooldown.Verdict.PROBE  # the probe script's two keys
    cooldown.record_success(server)
    assert cooldown.shared_ends([server.id]) == {}
    loads.started(server.id)
    loads.watch([server.id])
    assert loads.trade()  # the loads script's keys, one tag
    loads.ended(server.id)
    assert counters.marks_many([("routine:1:event:a", 60), ("routine:2:event:b", 60)]) == [True, True]
    counters.unmark("routine:1:event:a", "routine:2:event:b")
    assert counters.marks_many([("routine:1:event:a", 60)]) == [True]
