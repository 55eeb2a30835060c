"""Prompt-cache writes, through a running gateway and the reference upstream: a call whose provider
wrote its prompt cache is recorded with those tokens (`cache_write_input_tokens`, part of the input)
and costs them at the cache-write price (none set: the input price), on `/v1/messages` passed through
to an Anthropic server and translated from `/v1/chat/completions`, whole and streamed; an
OpenAI-compatible server's own `prompt_tokens_details.cache_write_tokens` counts the same, and an alias
deployment's own cache-write price applies through the alias. The reference upstream counts words:
"one two three" is 3 input tokens, "Echo: one two three" 4 output tokens."""

from decimal import Decimal

from gateway.registry.prices import money
from tests.factories import AliasDeploymentFactory, AliasFactory
from tests.servers import wait_for_usage

HELLO = [{"role": "user", "content": "one two three"}]


def priced(model, *, cache_write_price="3.75", cached_input_price="0.3"):
    model.input_price, model.output_price = Decimal("3"), Decimal("15")
    model.cached_input_price = Decimal(cached_input_price) if cached_input_price is not None else None
    model.cache_write_price = Decimal(cache_write_price) if cache_write_price is not None else None
    model.save()
    return model


def the_record(world):
    return wait_for_usage(world.account, 1)[-1]


def test_messages_passed_through_cost_the_writes_at_the_cache_write_price(world):
    priced(world.claude)
    world.upstream.configure(cached_tokens=1, cache_write_tokens=1)
    message = world.anthropic.messages.create(model="an/claude-echo", max_tokens=50, messages=HELLO)
    usage = message.usage  # the server's own
    assert (usage.input_tokens, usage.cache_read_input_tokens, usage.cache_creation_input_tokens) == (1, 1, 1)
    record = the_record(world)
    assert (record.surface, record.input_tokens, record.cached_input_tokens, record.cache_write_input_tokens,
            record.output_tokens) == ("messages", 3, 1, 1, 4)
    assert money(record.cost_units) == Decimal("0.00006705")  # 1 × 3 + 1 × 0.3 + 1 × 3.75 + 4 × 15 per million


def test_a_streamed_message_passed_through_costs_the_same(world):
    priced(world.claude)
    world.upstream.configure(cached_tokens=1, cache_write_tokens=1)
    with world.anthropic.messages.stream(model="an/claude-echo", max_tokens=50, messages=HELLO) as stream:
        final = stream.get_final_message()
    assert final.usage.cache_creation_input_tokens == 1
    record = the_record(world)
    assert (record.cached_input_tokens, record.cache_write_input_tokens) == (1, 1)
    assert money(record.cost_units) == Decimal("0.00006705")


def test_a_chat_completion_translated_to_anthropic_gives_and_costs_its_writes(world):
    priced(world.claude)
    world.upstream.configure(cache_write_tokens=2)
    completion = world.openai.chat.completions.create(model="an/claude-echo", messages=HELLO)
    assert completion.usage.prompt_tokens == 3  # the writes are prompt tokens, as OpenAI counts them
    assert completion.usage.prompt_tokens_details.cache_write_tokens == 2
    record = the_record(world)
    assert (record.surface, record.input_tokens, record.cached_input_tokens, record.cache_write_input_tokens) == (
        "chat.completions", 3, 0, 2)
    assert money(record.cost_units) == Decimal("0.0000705")  # 1 × 3 + 2 × 3.75 + 4 × 15 per million


def test_a_streamed_chat_completion_translated_to_anthropic_costs_the_same(world):
    priced(world.claude)
    world.upstream.configure(cache_write_tokens=2)
    chunks = list(world.openai.chat.completions.create(model="an/claude-echo", messages=HELLO, stream=True,
                                                        stream_options={"include_usage": True}))
    assert chunks[-1].usage.prompt_tokens_details.cache_write_tokens == 2
    record = the_record(world)
    assert record.cache_write_input_tokens == 2 and money(record.cost_units) == Decimal("0.0000705")


def test_without_a_cache_write_price_the_writes_cost_the_input_price(world):
    priced(world.claude, cache_write_price=None)
    world.upstream.configure(cache_write_tokens=2)
    world.anthropic.messages.create(model="an/claude-echo", max_tokens=50, messages=HELLO)
    record = the_record(world)
    assert record.cache_write_input_tokens == 2
    assert money(record.cost_units) == Decimal("0.000069")  # 3 × 3 + 4 × 15 per million


def test_an_openai_servers_cache_writes_count_the_same_and_reach_a_messages_client(world):
    priced(world.default)
    world.upstream.configure(cache_write_tokens=2)
    message = world.anthropic.messages.create(model="oa/echo-1", max_tokens=50, messages=HELLO)
    assert (message.usage.input_tokens, message.usage.cache_creation_input_tokens) == (1, 2)
    record = the_record(world)
    assert (record.model, record.input_tokens, record.cache_write_input_tokens) == ("oa/echo-1", 3, 2)
    assert money(record.cost_units) == Decimal("0.0000705")


def test_an_alias_deployment_has_its_own_cache_write_price(world):
    priced(world.claude)
    alias = AliasFactory(name="claude-team")
    AliasDeploymentFactory(alias=alias, model=world.claude, cache_write_price=Decimal("6"))  # the rest: the model's
    world.upstream.configure(cache_write_tokens=2)
    world.anthropic.messages.create(model="claude-team", max_tokens=50, messages=HELLO)
    record = the_record(world)
    assert (record.model, record.cache_write_input_tokens) == ("an/claude-echo", 2)
    assert money(record.cost_units) == Decimal("0.000075")  # 1 × 3 + 2 × 6 + 4 × 15 per million
