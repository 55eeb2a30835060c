"""generateContent and streamGenerateContent through the gateway, driven by the google-genai SDK,
against an OpenAI-compatible and an Anthropic server of the reference upstream (translated)."""

import httpx
import pytest
from google.genai import types

from tests.compat.gemini.conftest import client_for
from tests.servers import wait_for_usage

MODELS = ["oa/echo-1", "an/claude-echo"]


@pytest.mark.parametrize("model", MODELS)
def test_it_generates_content(world, gemini, model):
    reply = gemini.models.generate_content(
        model=model, contents="hello there",
        config=types.GenerateContentConfig(system_instruction="Be brief.", max_output_tokens=100))
    assert reply.text == "Echo: hello there"
    candidate = reply.candidates[0]
    assert candidate.finish_reason == types.FinishReason.STOP
    assert candidate.content.role == "model"
    assert reply.model_version == model
    assert reply.usage_metadata.candidates_token_count == 3
    assert reply.usage_metadata.prompt_token_count > 0
    assert reply.usage_metadata.total_token_count == (reply.usage_metadata.prompt_token_count + 3)
    [record] = wait_for_usage(world.account)
    assert (record.surface, record.model, record.output_tokens) == ("gemini", model, 3)
    assert record.input_tokens == reply.usage_metadata.prompt_token_count


@pytest.mark.parametrize("model", MODELS)
def test_it_streams_content(world, gemini, model):
    chunks = list(gemini.models.generate_content_stream(model=model, contents="one two three"))
    assert "".join(c.text or "" for c in chunks) == "Echo: one two three"
    assert chunks[-1].candidates[0].finish_reason == types.FinishReason.STOP
    assert chunks[-1].usage_metadata.candidates_token_count == 4
    assert {c.response_id for c in chunks} == {chunks[0].response_id}
    [record] = wait_for_usage(world.account)
    assert (record.surface, record.output_tokens) == ("gemini", 4)


@pytest.mark.parametrize("model", MODELS)
def test_max_output_tokens_stops_the_reply(gemini, model):
    reply = gemini.models.generate_content(
        model=model, contents="a b c d e f", config=types.GenerateContentConfig(max_output_tokens=2))
    assert reply.candidates[0].finish_reason == types.FinishReason.MAX_TOKENS
    assert reply.usage_metadata.candidates_token_count == 2


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("stream", [False, True])
def test_a_tool_call_round_trip(world, gemini, model, stream):
    world.upstream.configure(tool_arguments={"city": "Porto"})
    weather = types.FunctionDeclaration(
        name="weather", description="Weather in a city",
        parameters=types.Schema(type=types.Type.OBJECT, properties={"city": types.Schema(type=types.Type.STRING)}))
    config = types.GenerateContentConfig(tools=[types.Tool(function_declarations=[weather])],
                                         automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True))
    asked = types.Content(role="user", parts=[types.Part(text="weather?")])
    if stream:
        chunks = list(gemini.models.generate_content_stream(model=model, contents=[asked], config=config))
        calls = [call for c in chunks for call in (c.function_calls or [])]
        content = types.Content(role="model", parts=[types.Part(function_call=call) for call in calls])
    else:
        first = gemini.models.generate_content(model=model, contents=[asked], config=config)
        calls, content = first.function_calls, first.candidates[0].content
        assert first.candidates[0].finish_reason == types.FinishReason.STOP
    [call] = calls
    assert (call.name, call.args) == ("weather", {"city": "Porto"})
    answer = types.Content(role="user", parts=[types.Part(function_response=types.FunctionResponse(
        name="weather", id=call.id, response={"forecast": "rainy"}))])
    second = gemini.models.generate_content(model=model, contents=[asked, content, answer], config=config)
    assert "rainy" in second.text
    sent = world.upstream.last.json
    if model.startswith("oa/"):
        tool_turn = sent["messages"][-1]
        assert tool_turn["role"] == "tool" and tool_turn["tool_call_id"] == sent["messages"][-2]["tool_calls"][0]["id"]
    else:
        result = sent["messages"][-1]["content"][0]
        assert result["type"] == "tool_result"
        assert result["tool_use_id"] == sent["messages"][-2]["content"][0]["id"]


def test_the_v1_api_version_answers_too(world):
    client = client_for(world, api_version="v1")  # held: the SDK closes its connections when it is collected
    reply = client.models.generate_content(model="oa/echo-1", contents="hi")
    assert reply.text == "Echo: hi"


def test_a_model_id_with_its_slash_encoded_answers(world):
    response = httpx.post(f"{world.base}/v1beta/models/oa%2Fecho-1:generateContent",
                          json={"contents": [{"parts": [{"text": "hi"}]}]}, headers={"x-goog-api-key": world.key})
    assert response.status_code == 200, response.text
    assert response.json()["candidates"][0]["content"]["parts"] == [{"text": "Echo: hi"}]
