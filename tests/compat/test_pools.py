"""Pools and aliases through a running gateway: three reference upstreams hold one model;
calls spread over them, a slow one gets little under least-busy and latency, a dead one costs no
call, and every spec rule holds for a pool or an alias (group rules and their 403 shapes, the
ceiling's headers, request ids, a reply cut midway and its `partial`)."""

import asyncio
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import httpx
import pytest

from accounts.models import AccountGroup
from gateway.calls.dispatch import open_reply
from gateway.calls.plan import affinity_of
from gateway.registry.routing import plan_chain
from tests.factories import (
    AccountFactory,
    AccountGroupFactory,
    AliasDeploymentFactory,
    AliasFactory,
    ModelFactory,
    ModelServerFactory,
    api_key_for,
)
from tests.servers import wait_for_usage
from tests.upstream import UpstreamServer

HELLO = [{"role": "user", "content": "one two three"}]
_spares: list[UpstreamServer] = []


def spare_upstreams():
    """Two more reference upstreams beside the shared one, started once per test process."""
    if len(_spares) < 2 or not all(s.alive for s in _spares):
        for server in _spares:
            server.stop()
        _spares[:] = [UpstreamServer(), UpstreamServer()]
        for server in _spares:
            server.start()
    return [server.controller.reset() for server in _spares]


@pytest.fixture
def pool(world):
    """Servers p1, p2, p3, each on its own upstream, each holding `llama`: the pool `llama`."""
    ups = [world.upstream, *spare_upstreams()]
    servers = [ModelServerFactory(name=f"p{i}", base_url=f"{u.url}/v1", read_timeout=2.0, connect_timeout=1.0)
               for i, u in enumerate(ups, 1)]
    models = [ModelFactory(server=s, name="llama") for s in servers]
    yield SimpleNamespace(ups=ups, servers=servers, models=models, world=world)
    for up in ups[1:]:
        up.reset()


def alias(name, models, weights=None, **fields):
    row = AliasFactory(name=name, **fields)
    for model, weight in zip(models, weights or [1] * len(models)):
        AliasDeploymentFactory(alias=row, model=model, weight=weight)
    return row


def reached(pool):
    """How many chat calls each upstream got, by server name."""
    return {f"p{i}": sum(1 for r in up.requests if r.path == "/v1/chat/completions" and r.json["model"] == "llama")
            for i, up in enumerate(pool.ups, 1)}


def post(base, key, model, *, client=None, stream=False, path="/v1/chat/completions", **body):
    payload = {"model": model, "messages": HELLO, **body}
    if stream:
        payload["stream"] = True
    if path == "/v1/messages":
        payload["max_tokens"] = 20
    return (client or httpx).post(f"{base}{path}", json=payload, headers={"Authorization": f"Bearer {key}"},
                                  timeout=30)


CALLS_PER_KEY = 15  # under the /v1 ceiling of 20 a minute per account (spec 8.1)


def many(pool, model, calls, concurrency, group=None):
    """`calls` calls from `concurrency` clients at once, each account making at most CALLS_PER_KEY;
    their statuses and the models that answered."""
    group = group or pool.world.group
    keys = [api_key_for(AccountFactory(group=group)) for _ in range(-(-calls // CALLS_PER_KEY))]
    jobs = [keys[i // CALLS_PER_KEY] for i in range(calls)]

    def worker(mine):
        with httpx.Client() as client:
            return [post(pool.world.base, key, model, client=client) for key in mine]

    with ThreadPoolExecutor(concurrency) as executor:
        replies = [r for batch in executor.map(worker, [jobs[i::concurrency] for i in range(concurrency)])
                   for r in batch]
    return Counter(r.status_code for r in replies), Counter(r.json().get("model") for r in replies)


def test_calls_to_a_bare_name_several_servers_hold_really_spread(pool):
    statuses, models = many(pool, "llama", 60, 1)
    assert statuses == {200: 60}
    assert set(models) == {"p1/llama", "p2/llama", "p3/llama"}  # each reply names the deployment that answered
    assert all(n >= 5 for n in reached(pool).values()), reached(pool)


# Serial (tests/parallel.py): the share depends on how fast the fast deployments answer, which a busy machine
# slows towards the slow one's. So the bound is against what each fast one got in the same run, not against a
# fixed count. A least-busy pick goes to p3 whenever its one call in flight ties with the fast ones' (random
# among equals), and the slower the fast calls, the more often they tie: on a quiet machine p3 gets a handful
# of 90; beside the CI's other stacks it got 11 and then 13 while p1 got 35, past a third. By chance p3 would
# get as many as each fast one, so at most half of the fewer still tells a pool that weighs speed from one
# that does not.
@pytest.mark.serial
@pytest.mark.parametrize("policy, concurrency", [("least-busy", 4), ("latency", 2)])
def test_a_slow_deployment_gets_at_most_half_a_fast_one_s_share(pool, policy, concurrency):
    pool.ups[2].configure(latency_ms=400)  # p3 answers its first byte 400 ms late
    alias("team", pool.models, policy=policy)
    calls = 90
    statuses, _ = many(pool, "team", calls, concurrency)
    assert statuses == {200: calls}
    counts = reached(pool)
    assert sum(counts.values()) == calls
    assert counts["p3"] * 2 <= min(counts["p1"], counts["p2"]), counts  # at most half a fast one's


def test_one_upstream_down_costs_no_call(pool, closed_port):
    pool.servers[1].base_url = f"http://127.0.0.1:{closed_port}/v1"
    pool.servers[1].save()
    statuses, models = many(pool, "llama", 30, 3)
    assert statuses == {200: 30}
    assert set(models) == {"p1/llama", "p3/llama"}
    streamed = [post(pool.world.base, pool.world.key, "llama", stream=True) for _ in range(6)]
    assert [r.status_code for r in streamed] == [200] * 6
    assert all("data: [DONE]" in r.text for r in streamed)


def test_aliases_are_listed_with_the_models_and_refused_to_a_group_that_may_not_use_them(pool):
    team = alias("team", pool.models[:2])
    alias("other", pool.models[2:])
    listed = httpx.get(f"{pool.world.base}/v1/models", headers={"Authorization": f"Bearer {pool.world.key}"}).json()
    aliases = [m for m in listed["data"] if m["owned_by"] == "gateway"]
    assert [m["id"] for m in aliases] == ["other", "team"]
    assert aliases[1] == {"id": "team", "object": "model", "created": int(team.created_at.timestamp()),
                          "owned_by": "gateway"}

    group = AccountGroupFactory(name="narrow")
    AccountGroup.objects.filter(pk=group.pk).update(all_models=False)
    group.allowed_aliases.add(team)
    key = api_key_for(AccountFactory(group=group))
    listed = httpx.get(f"{pool.world.base}/v1/models", headers={"Authorization": f"Bearer {key}"}).json()
    assert [m["id"] for m in listed["data"]] == ["team"]
    assert post(pool.world.base, key, "team").status_code == 200

    refused = post(pool.world.base, key, "other")
    assert refused.status_code == 403
    assert refused.json() == {"error": {"message": "The model 'other' is not allowed for your account group.",
                                        "type": "permission_error", "param": "model", "code": "permission_denied"}}
    assert refused.headers["X-RateLimit-Limit"] and refused.headers["X-Request-Id"]
    refused = post(pool.world.base, key, "other", path="/v1/messages")
    assert refused.status_code == 403
    assert refused.json() == {"type": "error", "error": {
        "type": "permission_error", "message": "The model 'other' is not allowed for your account group."},
        "request_id": refused.headers["X-Request-Id"]}
    assert reached(pool)["p3"] == 0


def test_a_local_only_group_never_reaches_a_remote_deployment(pool):
    pool.servers[2].is_remote = True
    pool.servers[2].save()
    alias("mixed", pool.models, weights=[1, 1, 8])
    local_only = AccountGroupFactory(name="local-only", remote_servers_allowed=False)
    key = api_key_for(AccountFactory(group=local_only))
    statuses, models = many(pool, "mixed", 30, 3, group=local_only)
    assert statuses == {200: 30} and set(models) <= {"p1/llama", "p2/llama"}
    statuses, models = many(pool, "llama", 15, 3, group=local_only)
    assert statuses == {200: 15} and "p3/llama" not in models
    assert reached(pool)["p3"] == 0
    assert "mixed" in [m["id"] for m in httpx.get(f"{pool.world.base}/v1/models",
                                                   headers={"Authorization": f"Bearer {key}"}).json()["data"]]


def test_an_alias_call_keeps_the_ceiling_headers_request_ids_and_meters_the_deployment(pool):
    alias("team", pool.models)
    reply = post(pool.world.base, pool.world.key, "team", stream=False)
    assert reply.status_code == 200
    body = reply.json()
    assert body["model"] in {"p1/llama", "p2/llama", "p3/llama"}
    assert reply.headers["X-RateLimit-Limit"] == "20" and reply.headers["X-RateLimit-Remaining"] == "19"
    assert reply.headers["X-Request-Id"] and reply.headers["X-Inference-Request-Id"]
    [record] = wait_for_usage(pool.world.account)
    assert record.model == body["model"] and record.input_tokens > 0


def test_a_reply_cut_midway_in_a_pool_is_504_with_its_partial_and_is_not_retried(pool):
    for up in pool.ups:
        up.configure(stall_after_tokens=2, stall_seconds=5)
    alias("team", pool.models)
    reply = post(pool.world.base, pool.world.key, "team")
    assert reply.status_code == 504
    assert reply.json()["error"]["code"] == "read_timeout"
    assert reply.json()["partial"]["choices"][0]["message"]["content"] == "Echo: one "
    assert sum(reached(pool).values()) == 1  # a failure after the first byte moves nowhere


def test_a_pool_stream_cut_midway_ends_with_the_error_item_then_done_and_is_not_retried(pool):
    for up in pool.ups:
        up.configure(cut_after_tokens=2)
    alias("team", pool.models)
    reply = post(pool.world.base, pool.world.key, "team", stream=True)
    assert reply.status_code == 200 and reply.headers["X-Inference-Request-Id"]
    frames = [f for f in reply.text.split("\n\n") if f]
    assert frames[-1] == "data: [DONE]"
    assert '"error"' in frames[-2] and '"code":"disconnected"' in frames[-2]
    assert sum(reached(pool).values()) == 1


def test_a_used_up_quota_refuses_an_alias_before_any_call(pool):
    alias("team", pool.models)
    AccountGroup.objects.filter(pk=pool.world.group.pk).update(daily_tokens=0)
    refused = post(pool.world.base, pool.world.key, "team")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "permission_denied"
    assert sum(reached(pool).values()) == 0


def test_a_conversation_stays_on_one_deployment_while_it_is_up_and_moves_when_it_goes_down(pool, closed_port):
    """Affinity, through the chain and the dispatcher (gateway/calls/plan.py `affinity_of` gives
    the surfaces the key): every call of the conversation reaches one upstream; when that one
    cannot be reached they all move to one other, with no failed call; when it is back, so are they."""
    alias("sticky", pool.models, affinity="session")
    conversation = affinity_of(None, conversation_id=7)
    loop = asyncio.new_event_loop()

    def call():
        chain = plan_chain("sticky", group=pool.world.group, affinity=conversation)

        async def answer():
            opened = await open_reply(chain, {"model": "sticky", "messages": HELLO}, refusals_fall_through=True)
            async for _ in opened.chunks:
                pass
            return opened.target.public_id

        return loop.run_until_complete(answer())

    try:
        homes = [call() for _ in range(8)]
        assert len(set(homes)) == 1
        home = [m.public_id for m in pool.models].index(homes[0])
        assert [n for n in reached(pool).values()] == [8 if i == home else 0 for i in range(3)]
        server, address = pool.servers[home], pool.servers[home].base_url
        server.base_url = f"http://127.0.0.1:{closed_port}/v1"
        server.save()
        moved = [call() for _ in range(8)]
        assert len(set(moved)) == 1 and moved[0] != homes[0]
        server.base_url = address
        server.save()  # an operator's change ends its cooldown
        assert {call() for _ in range(4)} == {homes[0]}
    finally:
        loop.close()


@pytest.mark.parametrize("field", ["header", "user"])
def test_a_session_or_a_user_stays_on_one_deployment_over_http(pool, field):
    """/v1 passes the request's affinity (X-Session-Id, or the `user` field) to the plan."""
    alias("sticky", pool.models, affinity="session" if field == "header" else "user")
    answered = set()
    for i in range(8):
        extra = {"user": "user-7"} if field == "user" else {}
        headers = {"Authorization": f"Bearer {pool.world.key}"}
        if field == "header":
            headers["X-Session-Id"] = "session-7"
        r = httpx.post(f"{pool.world.base}/v1/chat/completions", timeout=30, headers=headers,
                       json={"model": "sticky", "messages": HELLO, **extra})
        assert r.status_code == 200, r.text
        answered.add(r.json()["model"])
    assert len(answered) == 1, answered
