"""The spec's rules hold for cached replies: a hit is a usage record marked
cached with the tokens it delivered, counts against the token quota and the request ceiling, is
given only to a group that may still use the model (checked before the cache is read), and has its
own request ids; a failure, or a reply cut midway, is never kept; hits and their tokens are counted
in /metrics."""

import time

import httpx
import openai
import pytest

from tests.compat.cache_support import ASK, TEXT, caching, chat, model_calls, scrape
from tests.servers import wait_for_usage


def post(world, *, stream: bool) -> httpx.Response:
    """POST /v1/chat/completions with ASK, the status and headers as they came."""
    return httpx.post(f"{world.base}/v1/chat/completions", timeout=30, headers={"Authorization": f"Bearer {world.key}"},
                      json={"model": "oa/echo-1", "messages": ASK, "stream": stream})


def test_a_hit_is_a_usage_record_marked_cached_with_the_tokens_it_delivered(world):
    caching(world.group)
    miss, hit = chat(world), chat(world)
    made, given = wait_for_usage(world.account, 2)
    assert (made.cached, given.cached) == (False, True)
    for record, answer in ((made, miss), (given, hit)):
        usage = answer.body["usage"]
        assert (record.model, record.surface, record.input_tokens, record.output_tokens) == (
            "oa/echo-1", "chat.completions", usage["prompt_tokens"], usage["completion_tokens"])
        assert record.request_id == answer.headers["X-Request-Id"]
    assert hit.body["usage"] == miss.body["usage"]
    assert hit.headers["X-Request-Id"] != miss.headers["X-Request-Id"]
    assert hit.headers["X-Inference-Request-Id"] != miss.headers["X-Inference-Request-Id"]


def test_a_streamed_hit_is_metered_too(world):
    caching(world.group)
    chat(world)
    chat(world, stream=True)
    records = wait_for_usage(world.account, 2)  # the whole reply is metered after its send: either may come first
    assert sorted(r.cached for r in records) == [False, True]
    (given,) = [r for r in records if r.cached]
    assert given.input_tokens > 0 and given.output_tokens > 0


def test_hits_count_against_the_token_quota_which_is_checked_before_the_cache(world):
    caching(world.group)
    tokens = chat(world).body["usage"]["total_tokens"]
    world.group.daily_tokens = 2 * tokens
    world.group.save()
    assert chat(world).cache == "hit"  # within the ceiling: the reply kept is given, and counted
    wait_for_usage(world.account, 2)
    with pytest.raises(openai.PermissionDeniedError) as refused:
        chat(world)
    assert refused.value.status_code == 403
    assert refused.value.body["code"] == "permission_denied"
    assert "X-Cache" not in refused.value.response.headers
    assert model_calls(world) == 1


def test_a_hit_counts_against_the_request_ceiling_and_carries_its_headers(world):
    caching(world.group)
    miss, hit = chat(world), chat(world)
    assert hit.cache == "hit"
    assert (miss.headers["X-RateLimit-Limit"], hit.headers["X-RateLimit-Limit"]) == ("20", "20")
    assert int(hit.headers["X-RateLimit-Remaining"]) == int(miss.headers["X-RateLimit-Remaining"]) - 1


def test_a_model_the_group_may_no_longer_use_is_refused_before_the_cache(world):
    caching(world.group)
    chat(world)
    world.group.all_models = False
    world.group.save()
    world.group.allowed_models.set([world.claude])
    with pytest.raises(openai.PermissionDeniedError) as refused:
        chat(world)
    assert refused.value.body["code"] == "permission_denied" and refused.value.body["param"] == "model"
    assert "X-Cache" not in refused.value.response.headers
    assert model_calls(world) == 1


def test_a_failed_call_is_not_kept_and_says_miss(world):
    caching(world.group)
    world.upstream.configure(fail_status=503, fail_times=1)
    r = post(world, stream=False)
    assert r.status_code == 503 and r.json()["error"]["code"] == "service_unavailable"
    assert r.headers["X-Cache"] == "miss"
    assert (chat(world).cache, chat(world).cache) == ("miss", "hit")
    assert model_calls(world) == 2


@pytest.mark.parametrize("stream", [False, True])
def test_a_reply_cut_midway_is_not_kept(world, stream):
    caching(world.group)
    world.upstream.configure(cut_after_tokens=2)
    r = post(world, stream=stream)
    assert r.headers["X-Cache"] == "miss"
    if stream:
        assert r.status_code == 200 and '"code": "disconnected"' in r.text.replace('":"', '": "')
    else:
        assert r.status_code == 502 and r.json()["error"]["code"] == "upstream_disconnected"
    world.upstream.configure(cut_after_tokens=None)
    whole = chat(world)
    assert (whole.cache, whole.text) == ("miss", TEXT)
    assert model_calls(world) == 2


def test_hits_and_the_tokens_they_saved_are_in_the_metrics(world):
    caching(world.group)
    before = scrape(world.base, httpx.get)
    miss, _ = chat(world), chat(world)
    usage = miss.body["usage"]
    wanted = {("gateway_cache_hits_total", (("model", "oa/echo-1"),)): 1,
              ("gateway_cache_saved_tokens_total", (("direction", "input"), ("model", "oa/echo-1"))):
                  usage["prompt_tokens"],
              ("gateway_cache_saved_tokens_total", (("direction", "output"), ("model", "oa/echo-1"))):
                  usage["completion_tokens"]}
    deadline = time.monotonic() + 5
    while True:  # the hit is metered once its reply has gone out
        after = scrape(world.base, httpx.get)
        grown = {name: after.get(name, 0) - before.get(name, 0) for name in wanted}
        if grown == wanted or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert grown == wanted
