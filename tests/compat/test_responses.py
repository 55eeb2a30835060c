"""POST /v1/responses and /v1/responses/input_tokens driven by the official openai SDK."""

import openai
import pytest

MODELS = ["oa/echo-1", "an/claude-echo"]


@pytest.mark.parametrize("model", MODELS)
def test_it_answers_a_response(world, model):
    response = world.openai.responses.create(model=model, input="hello there", instructions="Be brief.")
    assert response.status == "completed"
    assert response.output_text == "Echo: hello there"
    assert response.model == model
    assert response.usage.output_tokens == 3
    assert response.usage.total_tokens == response.usage.input_tokens + 3


@pytest.mark.parametrize("model", MODELS)
def test_it_streams_a_response(world, model):
    with world.openai.responses.stream(model=model, input=[{"role": "user", "content": "one two three"}]) as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == "Echo: one two three"
    assert final.output_text == "Echo: one two three"
    assert final.status == "completed"
    assert final.usage.output_tokens == 4


def test_max_output_tokens_makes_it_incomplete(world):
    response = world.openai.responses.create(model="oa/echo-1", input="a b c d e f", max_output_tokens=2)
    assert response.status == "incomplete"
    assert response.incomplete_details.reason == "max_output_tokens"


def test_tools_answer_501(world):
    with pytest.raises(openai.APIStatusError) as exc:
        world.openai.responses.create(
            model="oa/echo-1", input="x", tools=[{"type": "function", "name": "f", "parameters": {"type": "object"}}]
        )
    assert exc.value.status_code == 501
    assert exc.value.body["message"]


def test_it_counts_input_tokens(world):
    counted = world.openai.responses.input_tokens.count(model="oa/echo-1", input="hello there")
    assert counted.input_tokens > 0
    assert counted.object == "response.input_tokens"
