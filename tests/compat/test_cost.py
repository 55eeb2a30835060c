"""What a call costs, through a running gateway and the reference upstream: the
usage record of each /v1 surface carries its tokens at the answering model's price, to the cent and
below, whole or streamed, for a reply cut midway, a call that fell through (the model that answered is
priced), a reply from the response cache (no model was paid), a provider's cached input tokens, an
alias deployment's own price, and a price changed later (past records keep theirs)."""

from decimal import Decimal

import httpx

from gateway.models import Model, UsageRecord
from gateway.registry.prices import money
from tests.compat.cache_support import caching
from tests.factories import AliasDeploymentFactory, AliasFactory, ModelFactory, ModelFallbackFactory
from tests.servers import wait_for_usage

HELLO = [{"role": "user", "content": "one two three"}]
PER_MILLION = Decimal(10**6)


def priced(model, *, input_price="2.5", output_price="10", cached_input_price=None):
    model.input_price, model.output_price = Decimal(input_price), Decimal(output_price)
    model.cached_input_price = Decimal(cached_input_price) if cached_input_price is not None else None
    model.save()
    return model


def cost(model, *, input_tokens, output_tokens, cached=0) -> Decimal:
    """The price list's arithmetic, in Decimal: what the record must say."""
    cached_rate = model.cached_input_price if model.cached_input_price is not None else model.input_price
    return ((input_tokens - cached) * model.input_price + cached * cached_rate
            + output_tokens * model.output_price) / PER_MILLION


def the_record(world, count=1) -> UsageRecord:
    return wait_for_usage(world.account, count)[-1]


def test_a_chat_completion_costs_its_tokens_at_the_models_price(world):
    priced(world.default)
    completion = world.openai.chat.completions.create(model="oa/echo-1", messages=HELLO)
    record = the_record(world)
    expected = cost(world.default, input_tokens=completion.usage.prompt_tokens,
                    output_tokens=completion.usage.completion_tokens)
    assert (record.input_tokens, record.output_tokens) == (3, 4)  # as the upstream counts words
    assert money(record.cost_units) == expected == Decimal("0.0000475")  # 3 × 2.5 + 4 × 10 per million


def test_a_streamed_chat_completion_costs_the_same(world):
    priced(world.default)
    stream = world.openai.chat.completions.create(model="oa/echo-1", messages=HELLO, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == "Echo: one two three"
    assert money(the_record(world).cost_units) == Decimal("0.0000475")


def test_a_reply_cut_midway_costs_what_arrived(world):
    priced(world.default, input_price="1000", output_price="3000")
    world.upstream.configure(stall_after_tokens=2, stall_seconds=5)
    r = httpx.post(f"{world.base}/v1/chat/completions", json={"model": "oa/echo-1", "messages": HELLO},
                   headers={"Authorization": f"Bearer {world.key}"}, timeout=30)
    assert r.status_code == 504 and r.json()["partial"]["choices"][0]["message"]["content"] == "Echo: one "
    record = the_record(world)  # no usage came: the gateway counted the request and what arrived
    assert record.input_tokens > 0 and record.output_tokens > 0
    assert money(record.cost_units) == cost(world.default, input_tokens=record.input_tokens,
                                            output_tokens=record.output_tokens)
    assert money(record.cost_units) == Decimal("0.001") * record.input_tokens + Decimal("0.003") * record.output_tokens


def test_a_call_that_fell_through_costs_the_answering_models_price(world):
    priced(world.default, input_price="1", output_price="1")
    priced(world.claude, input_price="3", output_price="15")
    ModelFallbackFactory(model=world.default, fallback=world.claude)
    world.upstream.configure(fail_status=503, fail_paths=["/v1/chat/completions"])
    completion = world.openai.chat.completions.create(model="oa/echo-1", messages=HELLO)
    assert completion.model == "an/claude-echo"
    record = the_record(world)
    assert record.model == "an/claude-echo"
    assert money(record.cost_units) == cost(world.claude, input_tokens=record.input_tokens,
                                            output_tokens=record.output_tokens) == Decimal("0.000069")


def test_messages_to_an_anthropic_server_price_its_cache_reads_apart(world):
    priced(world.claude, input_price="3", output_price="15", cached_input_price="0.3")
    world.upstream.configure(cached_tokens=2)
    message = world.anthropic.messages.create(model="an/claude-echo", max_tokens=50, messages=HELLO)
    assert (message.usage.input_tokens, message.usage.cache_read_input_tokens) == (1, 2)  # as it came
    record = the_record(world)
    assert (record.input_tokens, record.cached_input_tokens, record.output_tokens) == (3, 2, 4)
    # 1 × 3 + 2 × 0.3 + 4 × 15 per million
    assert money(record.cost_units) == cost(world.claude, input_tokens=3, cached=2, output_tokens=4) \
        == Decimal("0.0000636")


def test_an_openai_servers_cached_tokens_cost_the_input_price_when_none_is_set(world):
    priced(world.default, input_price="2", output_price="8")
    world.upstream.configure(cached_tokens=3)
    completion = world.openai.chat.completions.create(model="oa/echo-1", messages=HELLO)
    assert completion.usage.prompt_tokens_details.cached_tokens == 3
    record = the_record(world)
    assert record.cached_input_tokens == 3
    assert money(record.cost_units) == Decimal("0.000038")  # 3 × 2 + 4 × 8 per million


def test_responses_and_translated_messages_cost_the_same_tokens(world):
    priced(world.default)
    world.openai.responses.create(model="oa/echo-1", input="one two three")
    world.anthropic.messages.create(model="oa/echo-1", max_tokens=50, messages=HELLO)
    first, second = wait_for_usage(world.account, 2)
    assert {first.surface, second.surface} == {"responses", "messages"}
    for record in (first, second):
        assert money(record.cost_units) == cost(world.default, input_tokens=record.input_tokens,
                                                output_tokens=record.output_tokens) > 0


def test_a_reply_from_the_response_cache_costs_nothing(world):
    priced(world.default)
    caching(world.group)
    world.openai.chat.completions.create(model="oa/echo-1", messages=HELLO)
    raw = world.openai.chat.completions.with_raw_response.create(model="oa/echo-1", messages=HELLO)
    assert raw.headers["X-Cache"] == "hit"
    made, kept = wait_for_usage(world.account, 2)
    assert (made.cached, money(made.cost_units)) == (False, Decimal("0.0000475"))
    assert (kept.cached, kept.cost_units, kept.input_tokens + kept.output_tokens) == (True, 0, 7)


def test_an_alias_deployment_has_its_own_price_and_the_model_keeps_its_own(world):
    priced(world.default, input_price="1", output_price="2")
    alias = AliasFactory(name="team-chat")
    AliasDeploymentFactory(alias=alias, model=world.default, input_price=Decimal("5"))  # output: the model's
    world.openai.chat.completions.create(model="team-chat", messages=HELLO)
    world.openai.chat.completions.create(model="oa/echo-1", messages=HELLO)
    through_alias, direct = wait_for_usage(world.account, 2)
    assert through_alias.model == direct.model == "oa/echo-1"
    assert money(through_alias.cost_units) == Decimal("0.000023")  # 3 × 5 + 4 × 2 per million
    assert money(direct.cost_units) == Decimal("0.000011")  # 3 × 1 + 4 × 2 per million


def test_a_price_change_applies_from_then_on_and_never_rewrites_a_record(world):
    priced(world.default, input_price="1", output_price="1")
    world.openai.chat.completions.create(model="oa/echo-1", messages=HELLO)
    before = the_record(world)
    priced(Model.objects.get(pk=world.default.pk), input_price="100", output_price="100")
    world.openai.chat.completions.create(model="oa/echo-1", messages=HELLO)
    after = the_record(world, 2)
    assert money(after.cost_units) == Decimal("0.0007")
    before.refresh_from_db()
    assert money(before.cost_units) == Decimal("0.000007")


def test_a_model_without_a_price_costs_nothing(world):
    ModelFactory(server=world.oa, name="free-model")
    world.openai.chat.completions.create(model="oa/echo-1", messages=HELLO)
    record = the_record(world)
    assert record.input_tokens + record.output_tokens == 7 and record.cost_units == 0
