"""POST /v1/messages and /v1/messages/count_tokens driven by the official anthropic SDK."""

import anthropic
import pytest

MODELS = ["oa/echo-1", "an/claude-echo"]


@pytest.mark.parametrize("model", MODELS)
def test_it_answers_a_message(world, model):
    message = world.anthropic.messages.create(
        model=model, max_tokens=100, system="Be brief.", messages=[{"role": "user", "content": "hello there"}]
    )
    assert message.content[0].type == "text"
    assert message.content[0].text == "Echo: hello there"
    assert message.stop_reason == "end_turn"
    assert message.model == model
    assert message.usage.output_tokens == 3
    assert message.usage.input_tokens > 0


@pytest.mark.parametrize("model", MODELS)
def test_it_streams_a_message(world, model):
    with world.anthropic.messages.stream(
        model=model, max_tokens=100, messages=[{"role": "user", "content": "one two three"}]
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "Echo: one two three"
    assert final.content[0].text == "Echo: one two three"
    assert final.stop_reason == "end_turn"
    assert final.usage.output_tokens == 4
    assert final.usage.input_tokens > 0


@pytest.mark.parametrize("model", MODELS)
def test_max_tokens_stops_the_reply(world, model):
    message = world.anthropic.messages.create(
        model=model, max_tokens=2, messages=[{"role": "user", "content": "a b c d e f"}]
    )
    assert message.stop_reason == "max_tokens"
    assert message.usage.output_tokens == 2


@pytest.mark.parametrize("model", MODELS)
def test_tool_use_round_trip(world, model):
    world.upstream.configure(tool_arguments={"city": "Porto"})
    tools = [{"name": "weather", "description": "Weather in a city",
              "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]
    first = world.anthropic.messages.create(
        model=model, max_tokens=100, tools=tools, messages=[{"role": "user", "content": "weather?"}]
    )
    assert first.stop_reason == "tool_use"
    use = next(b for b in first.content if b.type == "tool_use")
    assert use.name == "weather" and use.input == {"city": "Porto"}
    second = world.anthropic.messages.create(
        model=model, max_tokens=100, tools=tools,
        messages=[{"role": "user", "content": "weather?"},
                  {"role": "assistant", "content": [b.model_dump() for b in first.content]},
                  {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "rainy"}]}],
    )
    assert second.content[0].text == "Tool said: rainy"


def test_tool_use_streams(world):
    world.upstream.configure(tool_arguments={"city": "Faro"})
    tools = [{"name": "weather", "input_schema": {"type": "object", "properties": {}}}]
    with world.anthropic.messages.stream(
        model="oa/echo-1", max_tokens=100, tools=tools, messages=[{"role": "user", "content": "weather?"}]
    ) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "tool_use"
    assert final.content[-1].input == {"city": "Faro"}


def test_it_counts_tokens(world):
    counted = world.anthropic.messages.count_tokens(
        model="an/claude-echo", system="Be brief.", messages=[{"role": "user", "content": "hello there"}]
    )
    assert counted.input_tokens > 0
    longer = world.anthropic.messages.count_tokens(
        model="an/claude-echo", system="Be brief.", messages=[{"role": "user", "content": "hello there " * 50}]
    )
    assert longer.input_tokens >= counted.input_tokens + 90


def test_a_malformed_request_is_a_400_in_the_anthropic_shape(world):
    with pytest.raises(anthropic.BadRequestError) as exc:
        world.anthropic.messages.create(model="oa/echo-1", max_tokens=10, messages=[{"role": "wizard", "content": "x"}])
    assert exc.value.body["type"] == "error"
    assert exc.value.body["error"]["type"] == "invalid_request_error"
