"""/v1/chat/completions to an Anthropic-kind server, through the official openai SDK: each field
carried reaches the server as its Messages counterpart (the reference upstream records it), and a
field that cannot be carried is refused by name, or left out when the server drops unsupported
fields (docs/compatibility.md)."""

import json

import openai
import pytest
from pydantic import BaseModel

MODEL = "an/claude-echo"
HI = [{"role": "user", "content": "hello there"}]


class Person(BaseModel):
    name: str
    age: int
    tags: list[str]


def alone(world):
    """No default model after the requested one: its refusal is the chain's answer."""
    world.default.is_default = False
    world.default.save()


def use_structured_output(world, mode):
    world.an.structured_output = mode
    world.an.save()


@pytest.mark.parametrize("mode", ["tool", "output_config"])
def test_a_pydantic_response_format_parses_in_the_sdk(world, mode):
    use_structured_output(world, mode)
    completion = world.openai.chat.completions.parse(model=MODEL, messages=HI, response_format=Person)
    choice = completion.choices[0]
    assert choice.message.parsed == Person(name="text", age=1, tags=["text"])
    assert choice.finish_reason == "stop" and not choice.message.tool_calls
    sent = world.upstream.last.json
    schema = sent["tools"][0]["input_schema"] if mode == "tool" else sent["output_config"]["format"]["schema"]
    assert schema["properties"]["age"] == {"title": "Age", "type": "integer"}
    if mode == "tool":
        assert sent["tools"][0]["name"] == "Person" and sent["tool_choice"] == {"type": "tool", "name": "Person"}
        assert "output_config" not in sent
    else:
        assert sent["output_config"]["format"]["type"] == "json_schema" and "tools" not in sent


@pytest.mark.parametrize("mode", ["tool", "output_config"])
def test_a_streamed_json_schema_reply_parses_in_the_sdk(world, mode):
    use_structured_output(world, mode)
    world.upstream.configure(tool_arguments={"name": "Ada", "age": 36, "tags": ["math"]})
    with world.openai.chat.completions.stream(model=MODEL, messages=HI, response_format=Person) as stream:
        final = stream.get_final_completion()
    assert final.choices[0].message.parsed == Person(name="Ada", age=36, tags=["math"])
    assert final.choices[0].finish_reason == "stop"


def test_a_json_object_reply_is_json_text(world):
    world.upstream.configure(tool_arguments={"answer": 42})
    completion = world.openai.chat.completions.create(model=MODEL, messages=HI,
                                                      response_format={"type": "json_object"})
    assert json.loads(completion.choices[0].message.content) == {"answer": 42}
    assert world.upstream.last.json["tool_choice"] == {"type": "tool", "name": "json_output"}


def test_user_top_k_and_reasoning_effort_reach_the_server(world):
    world.openai.chat.completions.create(model=MODEL, messages=HI, user="user-9", reasoning_effort="high",
                                         extra_body={"top_k": 3})
    sent = world.upstream.last.json
    assert sent["metadata"] == {"user_id": "user-9"} and sent["top_k"] == 3
    assert sent["output_config"] == {"effort": "high"}


def test_a_stop_string_becomes_stop_sequences_and_reads_back(world):
    messages = [{"role": "user", "content": "one two STOP three"}]
    completion = world.openai.chat.completions.create(model=MODEL, messages=messages, stop=["STOP", "never"])
    assert world.upstream.last.json["stop_sequences"] == ["STOP", "never"]
    assert completion.choices[0].message.content == "Echo: one two "
    assert completion.choices[0].finish_reason == "stop"
    assert completion.choices[0].model_extra["stop_reason"] == "STOP"
    chunks = list(world.openai.chat.completions.create(model=MODEL, messages=messages, stop="STOP", stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Echo: one two "
    last = [c.choices[0] for c in chunks if c.choices][-1]
    assert last.finish_reason == "stop" and last.model_extra["stop_reason"] == "STOP"


UNCARRIED = [({"n": 2}, "n"), ({"logprobs": True}, "logprobs"), ({"seed": 7}, "seed"),
             ({"presence_penalty": 0.5}, "presence_penalty"), ({"logit_bias": {"50256": -100}}, "logit_bias")]


@pytest.mark.parametrize("fields, name", UNCARRIED)
def test_a_field_an_anthropic_server_cannot_take_is_refused_by_name(world, fields, name):
    alone(world)
    with pytest.raises(openai.BadRequestError) as info:
        world.openai.chat.completions.create(model=MODEL, messages=HI, **fields)
    assert info.value.status_code == 400
    assert f"'{name}'" in info.value.message and "'an'" in info.value.message
    assert world.upstream.requests == []


@pytest.mark.parametrize("fields, name", UNCARRIED)
def test_it_is_left_out_when_the_server_drops_unsupported_fields(world, fields, name):
    world.an.drop_unsupported_fields = True
    world.an.save()
    completion = world.openai.chat.completions.create(model=MODEL, messages=HI, **fields)
    assert completion.choices[0].message.content == "Echo: hello there"
    assert name not in world.upstream.last.json


def test_neutral_values_are_no_loss(world):
    completion = world.openai.chat.completions.create(model=MODEL, messages=HI, n=1, logprobs=False,
                                                      presence_penalty=0, frequency_penalty=0)
    assert completion.choices[0].message.content == "Echo: hello there"


def test_a_refusal_falls_through_to_the_next_model(world):
    """The default model follows the requested one in the chain (docs/design.md, "Models")."""
    completion = world.openai.chat.completions.create(model=MODEL, messages=HI, seed=7)
    assert completion.model == "oa/echo-1"
    assert world.upstream.last.json["seed"] == 7
