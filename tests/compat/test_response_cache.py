"""The exact response cache on /v1/chat/completions, through the openai SDK against the
reference upstream: a hit reaches no model server, gives the same reply (streamed when asked, from a
reply kept whole or from a stream), carries X-Cache; it is the group's alone, Cache-Control steers it,
it ends with its TTL, and it is off at TTL 0. The other surfaces: test_response_cache_surfaces.py;
usage, quotas, ceilings and failures: test_response_cache_rules.py; a Redis restart:
test_response_cache_redis.py."""

import time

import openai

from tests.compat.cache_support import TEXT, caching, chat, model_calls, without_ids
from tests.factories import (
    AccountFactory,
    AccountGroupFactory,
    AliasDeploymentFactory,
    AliasFactory,
    ModelFactory,
    ModelServerFactory,
    api_key_for,
)


def test_a_hit_reaches_no_model_server_and_gives_the_same_reply(world):
    caching(world.group)
    first = chat(world)
    second = chat(world)
    assert (first.cache, second.cache) == ("miss", "hit")
    assert model_calls(world) == 1
    assert second.text == first.text == TEXT
    assert without_ids(second.body) == without_ids(first.body)
    assert second.body["model"] == "oa/echo-1"
    assert second.body["id"] == f"chatcmpl-{second.headers['X-Inference-Request-Id']}" != first.body["id"]


def test_a_reply_kept_whole_is_given_streamed_when_asked(world):
    caching(world.group)
    whole = chat(world)
    streamed = chat(world, stream=True, stream_options={"include_usage": True})
    assert streamed.cache == "hit" and model_calls(world) == 1
    assert streamed.text == whole.text == TEXT
    chunks = streamed.events
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert {c["id"] for c in chunks} == {f"chatcmpl-{streamed.headers['X-Inference-Request-Id']}"}
    assert {c["model"] for c in chunks} == {"oa/echo-1"}
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == whole.body["usage"]


def test_a_reply_kept_from_a_stream_is_given_whole_when_asked(world):
    caching(world.group)
    streamed = chat(world, stream=True)
    whole = chat(world)
    assert (streamed.cache, whole.cache) == ("miss", "hit") and model_calls(world) == 1
    assert whole.text == streamed.text == TEXT
    fresh = chat(world, headers={"Cache-Control": "no-cache"})  # made by the model again, for comparison
    assert without_ids(whole.body) == without_ids(fresh.body)


def test_a_streamed_hit_ends_with_done(world):
    caching(world.group)
    chat(world)
    with world.openai.chat.completions.with_streaming_response.create(
            model="oa/echo-1", messages=[{"role": "user", "content": "one two three four five six"}],
            stream=True) as response:
        body = response.read().decode()
    assert response.headers["X-Cache"] == "hit"
    assert response.headers["Content-Type"] == "text/event-stream"
    assert body.endswith("data: [DONE]\n\n")


def test_the_request_is_the_key_but_not_how_it_is_delivered_or_who_asked(world):
    caching(world.group)
    chat(world, user="alice", metadata={"ticket": "1"})
    assert chat(world, stream=True, stream_options={"include_usage": True}, user="bob").cache == "hit"
    assert chat(world, messages=[{"role": "user", "content": "another question"}]).cache == "miss"
    assert chat(world, temperature=0.5).cache == "miss"
    assert chat(world, model="echo-1").cache == "miss"  # a bare name is not the pinned model (it may be a pool)
    assert chat(world, model="echo-1").cache == "hit"
    assert model_calls(world) == 4


def test_replies_never_cross_groups(world):
    caching(world.group)
    others = AccountGroupFactory(name="others", api_access=True, response_cache_ttl=60)
    outsider = openai.OpenAI(base_url=f"{world.base}/v1", api_key=api_key_for(AccountFactory(group=others)),
                             max_retries=0)
    assert chat(world).cache == "miss"
    assert chat(world, client=outsider).cache == "miss"
    assert chat(world, client=outsider).cache == "hit"
    assert model_calls(world) == 2
    teammate = openai.OpenAI(base_url=f"{world.base}/v1", max_retries=0,
                             api_key=api_key_for(AccountFactory(group=world.group)))
    assert chat(world, client=teammate).cache == "hit"  # the group shares its replies
    assert model_calls(world) == 2


def test_no_cache_skips_the_read_and_keeps_the_fresh_reply(world):
    caching(world.group)
    chat(world)
    world.upstream.configure(reply="a newer reply")
    fresh = chat(world, headers={"Cache-Control": "no-cache"})
    assert (fresh.cache, fresh.text) == ("miss", "a newer reply")
    again = chat(world)
    assert (again.cache, again.text) == ("hit", "a newer reply")
    assert model_calls(world) == 2


def test_no_store_keeps_nothing_but_may_read(world):
    caching(world.group)
    assert chat(world, headers={"Cache-Control": "no-store"}).cache == "miss"
    assert chat(world, headers={"Cache-Control": "No-Store, max-age=0"}).cache == "miss"
    assert chat(world).cache == "miss"
    assert chat(world, headers={"Cache-Control": "no-store"}).cache == "hit"
    assert model_calls(world) == 3


def test_a_reply_ends_with_its_ttl(world):
    caching(world.group, seconds=1)
    kept_at = time.monotonic()
    assert chat(world).cache == "miss"
    assert chat(world).cache == "hit"
    deadline = kept_at + 10
    while chat(world).cache == "hit":
        assert time.monotonic() < deadline, "the reply outlived its TTL by 9 s"
        time.sleep(0.1)
    assert time.monotonic() - kept_at >= 1.0
    assert model_calls(world) == 2


def test_at_ttl_0_the_cache_is_off_and_says_nothing(world):
    caching(world.group, seconds=0)
    answers = [chat(world), chat(world, stream=True), chat(world)]
    assert [a.cache for a in answers] == [None, None, None]
    assert model_calls(world) == 3


def test_turning_the_cache_off_stops_hits_at_once(world):
    caching(world.group)
    chat(world)
    assert chat(world).cache == "hit"
    caching(world.group, seconds=0)
    assert chat(world).cache is None
    assert model_calls(world) == 2


def test_a_pool_or_an_alias_is_one_key_whichever_deployment_answers(world):
    caching(world.group)
    ob = ModelServerFactory(name="ob", kind="openai", base_url=f"{world.upstream.url}/v1", read_timeout=2.0)
    second = ModelFactory(server=ob, name="echo-1")  # the bare name echo-1 is now a pool of two servers
    answers = [chat(world, model="echo-1") for _ in range(6)]
    assert [a.cache for a in answers] == ["miss"] + ["hit"] * 5
    assert len({a.body["model"] for a in answers}) == 1  # the model that made the kept reply
    assert model_calls(world) == 1
    assert chat(world, model="ob/echo-1").cache == "miss"  # a pinned deployment is a key of its own
    fast = AliasFactory(name="fast")
    for model in (world.default, second):
        AliasDeploymentFactory(alias=fast, model=model)
    assert [chat(world, model="fast").cache for _ in range(4)] == ["miss", "hit", "hit", "hit"]
    assert model_calls(world) == 3
