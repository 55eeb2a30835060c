"""The calls log on the /v1 chat surfaces, through a running gateway and the reference upstream:
each call answered or failed is one row, with who called, the model asked and the one that answered,
the status and the code the client got, the times, the tokens and cost as metered, and the chain tried."""

from datetime import timedelta

import anthropic
import openai
import pytest
from django.utils import timezone

from gateway.models import CallRecord, UsageRecord
from tests.compat.cache_support import caching
from tests.factories import ModelFallbackFactory
from tests.gateway.calls_log.conftest import CHAT_PATH, HELLO, MESSAGES_PATH, call_of, facts, rid, timed, usage_of
from tests.servers import wait_for_usage


def answered(world, surface, model_id, usage, **changes):
    """The row of a call of `model_id` answered by it; `changes` say how this one differs."""
    return {"account": world.account.pk, "group": world.group.pk, "surface": surface, "model_requested": model_id,
            "model": model_id, "status": 200, "outcome": "ok", "error_code": "", "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens, "cost_units": usage.cost_units, "cached": False,
            "fall_throughs": 0, "chain": [(model_id, model_id.split("/")[0], "ok", 200)], **changes}


def test_it_records_an_answered_chat_completion_once_with_its_facts(world):
    before = timezone.now()
    raw = world.openai.chat.completions.with_raw_response.create(model="oa/echo-1", messages=HELLO,
                                                                 extra_headers=rid("chat-ok"))
    completion = raw.parse()
    after = timezone.now()
    call = call_of("chat-ok")
    usage = wait_for_usage(world.account)[0]
    assert (usage.input_tokens, usage.output_tokens) == (completion.usage.prompt_tokens,
                                                         completion.usage.completion_tokens)
    assert usage.cost_units > 0  # the model has a price: the call's cost is the usage record's
    assert facts(call) == answered(world, "chat.completions", "oa/echo-1", usage)
    assert before - timedelta(seconds=1) <= call.created_at <= after
    assert call.latency_ms <= (after - before).total_seconds() * 1000
    timed(call)
    assert call.attempts[0]["error"] is None
    assert raw.headers["X-Request-Id"] == "chat-ok"


def test_it_records_a_streamed_chat_completion_with_its_first_token(world):
    with world.openai.chat.completions.with_streaming_response.create(
            model="oa/echo-1", messages=HELLO, stream=True, extra_headers=rid("chat-stream")) as response:
        text = "".join(c.choices[0].delta.content or "" for c in response.parse() if c.choices)
    assert text == "Echo: one two three four five"
    call = call_of("chat-stream")
    assert facts(call) == answered(world, "chat.completions", "oa/echo-1", usage_of("chat-stream"))
    timed(call)


def test_it_records_a_failed_chat_completion_with_the_code_the_client_got(world):
    world.upstream.configure(fail_status=503)
    with pytest.raises(openai.InternalServerError) as exc:
        world.openai.chat.completions.create(model="oa/echo-1", messages=HELLO, extra_headers=rid("chat-503"))
    assert exc.value.status_code == 503 and exc.value.body["code"] == "service_unavailable"
    call = call_of("chat-503")
    assert facts(call) == {**answered(world, "chat.completions", "oa/echo-1", UsageRecord(), model="",
                                      status=503, outcome="failed", error_code="service_unavailable"),
                           "chain": [("oa/echo-1", "oa", "unavailable", 503)]}
    assert call.attempts[0]["error"].startswith("503 ")
    timed(call, first_token=False)
    assert not UsageRecord.objects.exists()


def test_a_fall_through_keeps_both_attempts_of_the_chain(world):
    ModelFallbackFactory(model=world.default, fallback=world.claude)
    world.upstream.configure(fail_status=503, fail_paths=[CHAT_PATH])
    completion = world.openai.chat.completions.create(model="oa/echo-1", messages=HELLO,
                                                      extra_headers=rid("fell-through"))
    assert completion.model == "an/claude-echo"
    call = call_of("fell-through")
    usage = usage_of("fell-through")
    assert facts(call) == {**answered(world, "chat.completions", "oa/echo-1", usage, model="an/claude-echo",
                                      fall_throughs=1),
                           "chain": [("oa/echo-1", "oa", "unavailable", 503), ("an/claude-echo", "an", "ok", 200)]}
    timed(call)
    assert call.attempts[1]["ttfb_ms"] <= call.ttft_ms


def test_a_stream_cut_midway_is_a_200_cut_with_the_code_in_the_stream(world):
    world.upstream.configure(cut_after_tokens=2)
    with pytest.raises(openai.APIError):
        for _ in world.openai.chat.completions.create(model="oa/echo-1", messages=HELLO, stream=True,
                                                      extra_headers=rid("cut")):
            pass
    call = call_of("cut")
    usage = usage_of("cut")  # what arrived is metered
    assert facts(call) == answered(world, "chat.completions", "oa/echo-1", usage, outcome="cut",
                                   error_code="disconnected")
    timed(call)


def test_a_whole_reply_that_stalls_is_a_504_cut(world):
    world.upstream.configure(stall_after_tokens=2, stall_seconds=5)
    r = world.http.post("/v1/chat/completions", json={"model": "oa/echo-1", "messages": HELLO},
                        headers=rid("stalled"))
    assert r.status_code == 504
    call = call_of("stalled")
    assert facts(call) == answered(world, "chat.completions", "oa/echo-1", usage_of("stalled"), status=504,
                                   outcome="cut", error_code="read_timeout")
    assert call.latency_ms >= 2000 > call.ttft_ms  # the server's read timeout (2 s) after the first byte


def test_a_cache_hit_is_marked_cached_with_no_chain(world):
    caching(world.group, 3600)
    first = world.openai.chat.completions.create(model="oa/echo-1", messages=HELLO, extra_headers=rid("miss"))
    raw = world.openai.chat.completions.with_raw_response.create(model="oa/echo-1", messages=HELLO,
                                                                 extra_headers=rid("hit"))
    assert raw.headers["X-Cache"] == "hit" and raw.parse().choices[0].message.content == \
        first.choices[0].message.content
    miss, hit = call_of("miss"), call_of("hit")
    assert facts(miss) == answered(world, "chat.completions", "oa/echo-1", usage_of("miss"))
    assert facts(hit) == answered(world, "chat.completions", "oa/echo-1", usage_of("hit"), cached=True,
                                  cost_units=0, chain=[])
    timed(hit)


def test_it_records_messages_answered_and_failed(world):
    message = world.anthropic.messages.create(model="an/claude-echo", max_tokens=50, messages=HELLO,
                                              extra_headers=rid("messages-ok"))
    assert message.content[0].text == "Echo: one two three four five"
    call = call_of("messages-ok")
    assert facts(call) == answered(world, "messages", "an/claude-echo", usage_of("messages-ok"))
    timed(call)

    world.upstream.configure(fail_status=500, fail_paths=[MESSAGES_PATH, CHAT_PATH])
    with pytest.raises(anthropic.InternalServerError):
        world.anthropic.messages.create(model="an/claude-echo", max_tokens=50, messages=HELLO,
                                        extra_headers=rid("messages-503"))
    call = call_of("messages-503")
    assert facts(call) == {**answered(world, "messages", "an/claude-echo", UsageRecord(), model="", status=503,
                                      outcome="failed", error_code="service_unavailable", fall_throughs=1),
                           "chain": [("an/claude-echo", "an", "unavailable", 500), ("oa/echo-1", "oa", "unavailable",
                                                                                      500)]}
    timed(call, first_token=False)


def test_it_records_responses_answered_and_failed(world):
    response = world.openai.responses.create(model="oa/echo-1", input="one two three", extra_headers=rid("resp-ok"))
    assert response.output_text == "Echo: one two three"
    call = call_of("resp-ok")
    assert facts(call) == answered(world, "responses", "oa/echo-1", usage_of("resp-ok"))
    timed(call)

    world.upstream.configure(fail_status=400)
    with pytest.raises(openai.BadRequestError):
        world.openai.responses.create(model="oa/echo-1", input="one two three", extra_headers=rid("resp-400"))
    call = call_of("resp-400")
    assert facts(call) == {**answered(world, "responses", "oa/echo-1", UsageRecord(), model="", status=400,
                                      outcome="failed", error_code="upstream_refused"),
                           "chain": [("oa/echo-1", "oa", "refused", 400)]}


def test_calls_of_another_account_are_its_own_rows(world):
    from tests.factories import AccountFactory, AccountGroupFactory, api_key_for

    other = AccountFactory(group=AccountGroupFactory(name="others", api_access=True))
    client = openai.OpenAI(base_url=f"{world.base}/v1", api_key=api_key_for(other), max_retries=0)
    client.chat.completions.create(model="oa/echo-1", messages=HELLO, extra_headers=rid("other-call"))
    world.openai.chat.completions.create(model="oa/echo-1", messages=HELLO, extra_headers=rid("own-call"))
    assert (call_of("other-call").account_id, call_of("other-call").group_id) == (other.pk, other.group_id)
    assert call_of("own-call").account_id == world.account.pk
    assert CallRecord.objects.filter(account=world.account).count() == 1
