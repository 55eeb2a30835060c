"""POST /v1/responses through the official openai SDK: the request's fields beside input and tools reach the
model server as their chat-completions counterparts (the OpenAI kind) or Messages counterparts (the Anthropic
kind), or are refused with a 400 naming them (docs/decisions/0108-responses-fields.md); the reply's
JSON parses in the SDK, its log probabilities come back, and a reply cut midway says it failed."""

import json

import httpx
import openai
import pytest
from pydantic import BaseModel

MODELS = ["oa/echo-1", "an/claude-echo"]
CITY_JSON = '{"city": "Paris", "population": 2102650}'


class City(BaseModel):
    city: str
    population: int


def alone(world):
    """No default model after the requested one: its refusal is the chain's answer."""
    world.default.is_default = False
    world.default.save()


def post(world, **body):
    return httpx.post(f"{world.base}/v1/responses", json={"model": "oa/echo-1", "input": "hello", **body},
                      headers={"Authorization": f"Bearer {world.key}"}, timeout=30)


def parsed(world, model, stream):
    if not stream:
        return world.openai.responses.parse(model=model, input="Largest city of France?", text_format=City)
    with world.openai.responses.stream(model=model, input="Largest city of France?", text_format=City) as events:
        return events.get_final_response()


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("model", MODELS)
def test_a_pydantic_text_format_parses_in_the_sdk(world, model, stream):
    world.upstream.configure(reply=CITY_JSON, tool_arguments=json.loads(CITY_JSON))
    response = parsed(world, model, stream)
    assert response.output_parsed == City(city="Paris", population=2102650)
    assert response.status == "completed" and json.loads(response.output_text) == json.loads(CITY_JSON)
    sent = world.upstream.last.json
    if model.startswith("oa/"):
        schema = sent["response_format"]["json_schema"]
        assert sent["response_format"]["type"] == "json_schema" and (schema["name"], schema["strict"]) == ("City", True)
        assert schema["schema"]["properties"]["population"] == {"title": "Population", "type": "integer"}
    else:  # structured_output "tool": the schema is a forced tool's, its input the reply
        assert sent["tool_choice"] == {"type": "tool", "name": "City"}
        assert sent["tools"][0]["input_schema"]["required"] == ["city", "population"]


@pytest.mark.parametrize("model", MODELS)
def test_a_json_object_format_answers_json(world, model):
    world.upstream.configure(reply='{"answer": 42}', tool_arguments={"answer": 42})
    response = world.openai.responses.create(model=model, input="Answer in JSON.",
                                             text={"format": {"type": "json_object"}})
    assert json.loads(response.output_text) == {"answer": 42}
    assert response.text.format.type == "json_object"
    sent = world.upstream.last.json
    if model.startswith("oa/"):
        assert sent["response_format"] == {"type": "json_object"}
    else:
        assert sent["tool_choice"] == {"type": "tool", "name": "json_output"}


def test_effort_user_and_caching_reach_an_openai_server(world):
    response = world.openai.responses.create(
        model="oa/echo-1", input="hello", reasoning={"effort": "high", "summary": "auto"}, user="user-9",
        safety_identifier="safe-9", prompt_cache_key="thread-1", metadata={"team": "blue"}, service_tier="flex",
        text={"verbosity": "low"})
    sent = world.upstream.last.json
    assert {key: sent.get(key) for key in ("reasoning_effort", "user", "safety_identifier", "prompt_cache_key",
                                           "metadata", "service_tier", "verbosity")} == {
        "reasoning_effort": "high", "user": "user-9", "safety_identifier": "safe-9", "prompt_cache_key": "thread-1",
        "metadata": {"team": "blue"}, "service_tier": "flex", "verbosity": "low"}
    assert "reasoning" not in sent and "text" not in sent
    assert (response.reasoning.effort, response.metadata, response.user) == ("high", {"team": "blue"}, "user-9")


def test_effort_and_user_reach_an_anthropic_server(world):
    world.openai.responses.create(model="an/claude-echo", input="hello", reasoning={"effort": "low"},
                                  safety_identifier="safe-9", prompt_cache_key="thread-1")
    sent = world.upstream.last.json
    assert sent["output_config"] == {"effort": "low"} and sent["metadata"] == {"user_id": "safe-9"}
    assert "prompt_cache_key" not in sent  # a caching hint, no field of a Messages request


@pytest.mark.parametrize("fields, name", [({"include": ["message.output_text.logprobs"]}, "logprobs"),
                                          ({"text": {"verbosity": "low"}}, "verbosity")])
def test_what_an_anthropic_server_cannot_take_is_refused_by_name(world, fields, name):
    alone(world)
    with pytest.raises(openai.BadRequestError) as info:
        world.openai.responses.create(model="an/claude-echo", input="hello", **fields)
    assert f"'{name}'" in info.value.message and "'an'" in info.value.message
    assert world.upstream.requests == []


def test_log_probabilities_come_back_whole_and_streamed(world):
    options = {"include": ["message.output_text.logprobs"], "top_logprobs": 2}
    response = world.openai.responses.create(model="oa/echo-1", input="one two", **options)
    assert (world.upstream.last.json["logprobs"], world.upstream.last.json["top_logprobs"]) == (True, 2)
    logprobs = response.output[0].content[0].logprobs
    assert [p.token for p in logprobs] == ["Echo: ", "one ", "two"]
    assert [len(p.top_logprobs) for p in logprobs] == [2, 2, 2] and logprobs[0].bytes == list(b"Echo: ")
    with world.openai.responses.stream(model="oa/echo-1", input="one two", **options) as stream:
        deltas = [[p.token for p in e.logprobs] for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert deltas == [["Echo: "], ["one "], ["two"]]
    assert [p.token for p in final.output[0].content[0].logprobs] == ["Echo: ", "one ", "two"]


def test_what_codex_sends_on_every_call_is_taken(world):
    response = world.openai.responses.create(
        model="oa/echo-1", input="hello", reasoning={"summary": "auto"}, store=False, prompt_cache_key="thread-1",
        include=["reasoning.encrypted_content"], extra_body={"client_metadata": {"session_id": "s-1"}})
    assert response.output_text == "Echo: hello"
    sent = world.upstream.last.json
    assert sent["prompt_cache_key"] == "thread-1"
    assert not {"reasoning", "store", "include", "client_metadata", "logprobs"} & set(sent)


@pytest.mark.parametrize("fields, param, says", [
    ({"previous_response_id": "resp_1"}, "previous_response_id", "responses are not stored by this gateway"),
    ({"conversation": "conv_1"}, "conversation", "conversations are not stored by this gateway"),
    ({"store": True}, "store", "this gateway keeps no responses"),
    ({"background": True}, "background", "this gateway keeps no responses to poll"),
    ({"truncation": "auto"}, "truncation", "does not drop input items"),
    ({"prompt": {"id": "pmpt_1"}}, "prompt", "no stored prompt templates"),
    ({"top_k": 3}, "top_k", "not a field this gateway carries"),
    ({"text": {"format": {"type": "json_schema", "name": "c"}}}, "text.format.schema", "required"),
    ({"include": ["file_search_call.everything"]}, "include.0", "not something this gateway can include"),
])
def test_what_cannot_be_honoured_is_a_400_naming_it(world, fields, param, says):
    r = post(world, **fields)
    assert r.status_code == 400
    error = r.json()["error"]
    assert (error["type"], error["code"], error["param"]) == ("invalid_request_error", "invalid_request_error", param)
    assert error["message"].startswith(f"{param}: ") and says in error["message"]
    assert world.upstream.requests == []


def test_the_sdk_raises_on_previous_response_id(world):
    with pytest.raises(openai.BadRequestError) as info:
        world.openai.responses.create(model="oa/echo-1", input="and then?", previous_response_id="resp_1")
    assert info.value.param == "previous_response_id" and info.value.status_code == 400


def test_a_reply_cut_midway_says_failed_in_its_partial(world):
    world.upstream.configure(cut_after_tokens=2)
    r = post(world, input="one two three")
    assert r.status_code == 502
    body = r.json()
    assert body["error"]["code"] == "upstream_disconnected"
    partial = body["partial"]
    assert (partial["status"], partial["incomplete_details"], partial["output"][0]["status"]) == \
        ("failed", None, "incomplete")
    assert partial["error"] == {"code": "server_error",
                                "message": "The model server closed the connection mid-reply. (disconnected)"}
    assert partial["output"][0]["content"][0]["text"] == "Echo: one "
