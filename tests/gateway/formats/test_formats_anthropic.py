"""Anthropic Messages <-> neutral chat translations (gateway.formats.anthropic.to_chat) of requests and of
non-streamed replies, checked against the official SDKs' own types and through the real SDK clients
over httpx MockTransport. The streams are in test_formats_anthropic_stream.py."""

import json

import httpx2
import pytest
from anthropic.types import Message
from openai.types.chat import ChatCompletion

from gateway.formats.anthropic.from_chat import chat_to_messages_request
from gateway.formats.anthropic.replies import chat_to_messages_response, messages_to_chat_response
from gateway.formats.anthropic.to_chat import messages_to_chat_request
from gateway.web.errors import ApiError
from tests.gateway.formats.anthropic_support import (
    WEATHER_SCHEMA,
    anthropic_client,
    openai_client,
    valid_anthropic_request,
    valid_chat_request,
)

PNG = "iVBORw0KGgo="
IMAGE_BLOCK = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}


def refused(fn, body, status=400):
    with pytest.raises(ApiError) as info:
        fn(body)
    assert info.value.status == status and info.value.message
    return info.value


# ----------------------------------------------------------------------------- Anthropic request → chat


def test_a_plain_anthropic_request_becomes_a_chat_request():
    body = {"model": "claude-x", "max_tokens": 100, "system": "Be brief.", "temperature": 0.5, "top_p": 0.9,
            "top_k": 5, "stop_sequences": ["END"], "metadata": {"user_id": "u"},
            "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]}
    valid_anthropic_request(body)
    req = valid_chat_request(messages_to_chat_request(body))
    assert req == {"model": "claude-x", "max_tokens": 100, "temperature": 0.5, "top_p": 0.9, "top_k": 5,
                   "stop": ["END"], "user": "u",
                   "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"},
                                {"role": "assistant", "content": "Hello"}]}


def test_system_blocks_are_joined_and_streaming_asks_for_usage():
    body = {"model": "m", "max_tokens": 5, "stream": True,
            "system": [{"type": "text", "text": "One."},
                       {"type": "text", "text": "Two.", "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]}
    req = valid_chat_request(messages_to_chat_request(valid_anthropic_request(body)))
    assert req["messages"][0] == {"role": "system", "content": "One.\n\nTwo."}
    assert req["messages"][1]["content"] == [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    assert req["stream"] is True and req["stream_options"] == {"include_usage": True}


def test_images_documents_and_thinking():
    body = {"model": "m", "max_tokens": 5, "messages": [
        {"role": "user", "content": [
            IMAGE_BLOCK,
            {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
            {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "doc text"}},
            {"type": "text", "text": "What are these?"}]},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm", "signature": "s"},
                                          {"type": "text", "text": "A cat."}]}]}
    req = valid_chat_request(messages_to_chat_request(valid_anthropic_request(body)))
    assert req["messages"] == [
        {"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.jpg"}},
            {"type": "text", "text": "doc text"}, {"type": "text", "text": "What are these?"}]},
        {"role": "assistant", "content": "A cat."}]


def test_tool_use_and_tool_results():
    body = {"model": "m", "max_tokens": 5,
            "tools": [{"name": "weather", "description": "Weather by city", "input_schema": WEATHER_SCHEMA},
                      {"name": "now", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
            "messages": [
                {"role": "user", "content": "Weather in Paris and Rome?"},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Paris"}},
                    {"type": "tool_use", "id": "toolu_2", "name": "weather", "input": {"city": "Rome"}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"},
                    {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": True,
                     "content": [{"type": "text", "text": "no"}, {"type": "text", "text": "data"},
                                 IMAGE_BLOCK]},
                    {"type": "text", "text": "Thanks"}]}]}
    req = valid_chat_request(messages_to_chat_request(valid_anthropic_request(body)))
    assert req["tools"] == [
        {"type": "function",
         "function": {"name": "weather", "description": "Weather by city", "parameters": WEATHER_SCHEMA}},
        {"type": "function", "function": {"name": "now", "parameters": {"type": "object"}}}]
    assert req["tool_choice"] == "auto" and req["parallel_tool_calls"] is False
    assistant, tool1, tool2, user = req["messages"][1:]
    assert assistant["content"] == "Checking."
    assert [c["id"] for c in assistant["tool_calls"]] == ["toolu_1", "toolu_2"]
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {"city": "Paris"}
    assert tool1 == {"role": "tool", "tool_call_id": "toolu_1", "content": "18C"}
    assert tool2 == {"role": "tool", "tool_call_id": "toolu_2",
                     "content": [{"type": "text", "text": "Error: no"}, {"type": "text", "text": "data"}]}
    assert user["role"] == "user" and user["content"][0]["type"] == "image_url"
    assert user["content"][1] == {"type": "text", "text": "Thanks"}


def test_an_assistant_turn_of_only_tool_calls_has_null_content():
    body = {"model": "m", "max_tokens": 5, "messages": [
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]}]}
    req = valid_chat_request(messages_to_chat_request(body))
    assert req["messages"][1]["content"] is None
    assert req["messages"][1]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert req["messages"][2] == {"role": "tool", "tool_call_id": "t", "content": ""}


@pytest.mark.parametrize("choice, expected", [
    ({"type": "auto"}, "auto"), ({"type": "any"}, "required"), ({"type": "none"}, "none"),
    ({"type": "tool", "name": "weather"}, {"type": "function", "function": {"name": "weather"}})])
def test_tool_choice_maps_to_chat(choice, expected):
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "tool_choice": choice,
            "tools": [{"name": "weather", "input_schema": WEATHER_SCHEMA}]}
    req = valid_chat_request(messages_to_chat_request(valid_anthropic_request(body)))
    assert req["tool_choice"] == expected and "parallel_tool_calls" not in req


@pytest.mark.parametrize("body", [
    None, {}, {"messages": "hi"}, {"messages": []}, {"messages": ["hi"]},
    {"messages": [{"content": "hi"}]}, {"messages": [{"role": "tool", "content": "hi"}]},
    {"messages": [{"role": "user"}]}, {"messages": [{"role": "user", "content": 5}]},
    {"messages": [{"role": "user", "content": [{"text": "no type"}]}]},
    {"messages": [{"role": "user", "content": [{"type": "text", "text": 3}]}]},
    {"messages": [{"role": "user", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]}]},
    {"messages": [{"role": "user", "content": [{"type": "tool_result", "content": "no id"}]}]},
    {"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": 7}]}]},
    {"messages": [{"role": "assistant", "content": [{"type": "tool_use", "input": {}}]}]},
    {"messages": [{"role": "assistant", "content": [{"type": "tool_result", "tool_use_id": "t"}]}]},
    {"system": 42, "messages": [{"role": "user", "content": "x"}]},
    {"system": [{"type": "image"}], "messages": [{"role": "user", "content": "x"}]},
    {"messages": [{"role": "user", "content": "x"}], "tools": {"name": "f"}},
    {"messages": [{"role": "user", "content": "x"}], "tools": [{"input_schema": {}}]},
    {"messages": [{"role": "user", "content": "x"}], "tool_choice": {"type": "tool"}},
    {"messages": [{"role": "user", "content": "x"}], "tool_choice": "auto"},
    {"messages": [{"role": "user", "content": "x"}], "stop_sequences": "END"},
    {"messages": [{"role": "user", "content": [{"type": 5}]}]},
    {"messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "base64"}}]}]},
    {"messages": [{"role": "user", "content": [{"type": "document", "source": {"type": "content", "content": 3}}]}]},
    {"messages": [{"role": "assistant", "content": [{"type": "image", "source": {}}]}]},
    {"messages": [{"role": "user", "content": "x"}], "tools": [{"type": 7, "name": "f"}]},
    {"messages": [{"role": "user", "content": "x"}], "output_config": {"format": {"type": "regex"}}},
    {"messages": [{"role": "user", "content": "x"}], "output_config": {"effort": 3}},
    {"messages": [{"role": "user", "content": "x"}], "metadata": {"user_id": 5}},
])
def test_malformed_anthropic_requests_are_refused_with_400(body):
    error = refused(messages_to_chat_request, body)
    assert error.code == "invalid_request_error"


# ----------------------------------------------------------------------------- chat request → Anthropic


def test_a_chat_request_becomes_an_anthropic_request():
    body = {"model": "gpt-x", "n": 1, "logprobs": True, "stream": True, "stream_options": {"include_usage": True},
            "temperature": 1.7, "top_p": 0.5, "stop": "END", "user": "u", "max_tokens": 50,
            "messages": [{"role": "system", "content": "Sys one."},
                         {"role": "developer", "content": [{"type": "text", "text": "Dev two."}]},
                         {"role": "user", "content": "Hi"},
                         {"role": "user", "content": [{"type": "text", "text": "again"}]},
                         {"role": "assistant", "content": "Hello"}]}
    req = valid_anthropic_request(chat_to_messages_request(valid_chat_request(body)))
    assert req == {"model": "gpt-x", "max_tokens": 50, "system": "Sys one.\n\nDev two.", "stop_sequences": ["END"],
                   "temperature": 1.0, "top_p": 0.5, "stream": True, "metadata": {"user_id": "u"},
                   "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"},
                                                             {"type": "text", "text": "again"}]},
                                {"role": "assistant", "content": [{"type": "text", "text": "Hello"}]}]}


@pytest.mark.parametrize("fields, expected", [
    ({}, 4096), ({"max_tokens": 7}, 7), ({"max_completion_tokens": 9, "max_tokens": 7}, 9)])
def test_max_tokens_precedence(fields, expected):
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], **fields}
    assert chat_to_messages_request(body)["max_tokens"] == expected
    assert chat_to_messages_request({**body, "stop": ["a", "b"]}, default_max_tokens=33)["stop_sequences"] == ["a", "b"]


def test_images_and_tool_calls_go_to_anthropic():
    weather = {"name": "weather", "description": "d", "parameters": WEATHER_SCHEMA}
    body = {"model": "m", "tools": [{"type": "function", "function": weather},
                                    {"type": "function", "function": {"name": "bare"}}],
            "tool_choice": "required", "parallel_tool_calls": False,
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Look"},
                                             {"type": "image_url",
                                              "image_url": {"url": f"data:image/jpeg;base64,{PNG}", "detail": "low"}},
                                             {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "weather", "arguments": '{"city": "Paris"}'}},
                    {"id": "call_2", "type": "function", "function": {"name": "weather", "arguments": "{not json"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "18C"},
                {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "err"}]},
                {"role": "user", "content": "And now?"}]}
    req = valid_anthropic_request(chat_to_messages_request(valid_chat_request(body)))
    assert req["tools"] == [{"name": "weather", "description": "d", "input_schema": WEATHER_SCHEMA},
                            {"name": "bare", "input_schema": {"type": "object", "properties": {}}}]
    assert req["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    user, assistant, results = req["messages"]
    assert user["content"][1] == {**IMAGE_BLOCK, "source": {**IMAGE_BLOCK["source"], "media_type": "image/jpeg"}}
    assert user["content"][2] == {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
    assert assistant["content"] == [
        {"type": "tool_use", "id": "call_1", "name": "weather", "input": {"city": "Paris"}},
        {"type": "tool_use", "id": "call_2", "name": "weather", "input": {}}]
    assert results == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "call_1", "content": "18C"},
        {"type": "tool_result", "tool_use_id": "call_2", "content": "err"},
        {"type": "text", "text": "And now?"}]}


@pytest.mark.parametrize("choice, expected", [
    ("auto", {"type": "auto"}), ("none", {"type": "none"}), ("required", {"type": "any"}),
    ({"type": "function", "function": {"name": "f"}}, {"type": "tool", "name": "f"})])
def test_tool_choice_maps_to_anthropic(choice, expected):
    body = {"model": "m", "messages": [{"role": "user", "content": "x"}], "tool_choice": choice,
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]}
    assert valid_anthropic_request(chat_to_messages_request(body))["tool_choice"] == expected


@pytest.mark.parametrize("body", [
    None, {}, {"messages": []}, {"messages": [{"role": "function", "content": "x"}]},
    {"messages": [{"role": "system", "content": "only system"}]},
    {"messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}]},
    {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "ftp://x"}}]}]},
    {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png,raw"}}]}]},
    {"messages": [{"role": "user", "content": 5}]},
    {"messages": [{"role": "system", "content": [{"type": "image_url"}]}]},
    {"messages": [{"role": "tool", "content": "no id"}]},
    {"messages": [{"role": "assistant", "tool_calls": [{"id": "c", "function": {}}]}]},
    {"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "custom", "custom": {"name": "g"}}]},
    {"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "f"}}],
     "tool_choice": "sometimes"},
])
def test_malformed_chat_requests_are_refused_with_400(body):
    refused(chat_to_messages_request, body)


def test_requests_round_trip_anthropic_chat_anthropic():
    body = {"model": "m", "max_tokens": 64, "system": "S",
            "tools": [{"name": "weather", "description": "w", "input_schema": WEATHER_SCHEMA}],
            "tool_choice": {"type": "tool", "name": "weather"},
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]},
                         {"role": "assistant", "content": [
                             {"type": "text", "text": "Calling."},
                             {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}}]},
                         {"role": "user", "content": [
                             {"type": "tool_result", "tool_use_id": "toolu_1", "content": "cold"},
                                                      {"type": "text", "text": "So?"}]}]}
    back = valid_anthropic_request(chat_to_messages_request(messages_to_chat_request(body)))
    assert back == body


# ----------------------------------------------------------------------------- replies


ANTHROPIC_MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
                     "content": [{"type": "thinking", "thinking": "t", "signature": "s"},
                                 {"type": "text", "text": "Let me check."},
                                 {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}}],
                     "stop_reason": "tool_use", "stop_sequence": None,
                     "usage": {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 4}}


def test_an_anthropic_message_becomes_a_chat_completion():
    completion = messages_to_chat_response(Message.model_validate(ANTHROPIC_MESSAGE).to_dict())
    parsed = ChatCompletion.model_validate(completion)
    assert parsed.id == "msg_1" and parsed.model == "claude-x" and parsed.object == "chat.completion"
    choice = parsed.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content == "Let me check."
    assert choice.message.tool_calls[0].id == "toolu_1"
    assert json.loads(choice.message.tool_calls[0].function.arguments) == {"city": "Oslo"}
    assert completion["usage"] == {"prompt_tokens": 14, "completion_tokens": 5, "total_tokens": 19,
                                   "prompt_tokens_details": {"cached_tokens": 4}}


def test_a_chat_completion_becomes_an_anthropic_message_and_back():
    completion = messages_to_chat_response(ANTHROPIC_MESSAGE)
    message = Message.model_validate(chat_to_messages_response(completion))
    assert message.id == "msg_1" and message.stop_reason == "tool_use"
    assert [b.type for b in message.content] == ["thinking", "text", "tool_use"]
    assert (message.content[0].thinking, message.content[0].signature) == ("t", "")
    assert message.content[2].input == {"city": "Oslo"}
    usage = message.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_input_tokens) == (10, 5, 4)


@pytest.mark.parametrize("stop_reason, finish_reason", [
    ("end_turn", "stop"), ("stop_sequence", "stop"), ("max_tokens", "length"), ("tool_use", "tool_calls"),
    ("refusal", "content_filter"), ("model_context_window_exceeded", "length"), ("pause_turn", "stop")])
def test_stop_reasons_to_chat(stop_reason, finish_reason):
    message = {**ANTHROPIC_MESSAGE, "content": [{"type": "text", "text": "x"}], "stop_reason": stop_reason}
    assert ChatCompletion.model_validate(messages_to_chat_response(message)).choices[0].finish_reason == finish_reason


@pytest.mark.parametrize("finish_reason, stop_reason", [
    ("stop", "end_turn"), ("length", "max_tokens"), ("tool_calls", "tool_use"), ("content_filter", "refusal"),
    (None, "end_turn")])
def test_finish_reasons_to_anthropic(finish_reason, stop_reason):
    completion = {"id": "chatcmpl-9", "object": "chat.completion", "created": 1, "model": "m",
                  "choices": [{"index": 0, "message": {"role": "assistant", "content": "x"},
                               "finish_reason": finish_reason}],
                  "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}
    message = Message.model_validate(chat_to_messages_response(completion))
    assert message.stop_reason == stop_reason and message.id == "chatcmpl-9" and message.usage.input_tokens == 3


def test_tool_calls_with_a_stop_finish_reason_still_end_in_tool_use():
    completion = {"id": "c", "model": "m", "choices": [{"index": 0, "finish_reason": "stop", "message": {
        "role": "assistant", "content": None,
        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{bad"}}]}}]}
    message = Message.model_validate(chat_to_messages_response(completion))
    assert message.stop_reason == "tool_use" and message.content[0].input == {}
    assert message.usage.input_tokens == 0


def test_non_streamed_replies_through_the_sdk_clients():
    completion = messages_to_chat_response(ANTHROPIC_MESSAGE)
    seen = {}

    def anthropic_surface(request):
        seen["chat"] = valid_chat_request(messages_to_chat_request(json.loads(request.content)))
        return httpx2.Response(200, json=chat_to_messages_response(completion))

    message = anthropic_client(anthropic_surface).messages.create(
        model="claude-x", max_tokens=10, messages=[{"role": "user", "content": "Weather?"}])
    assert message.content[2].input == {"city": "Oslo"} and message.stop_reason == "tool_use"
    assert seen["chat"]["messages"] == [{"role": "user", "content": "Weather?"}]

    def chat_surface(request):
        seen["anthropic"] = valid_anthropic_request(chat_to_messages_request(json.loads(request.content)))
        return httpx2.Response(200, json=messages_to_chat_response(ANTHROPIC_MESSAGE))

    client = openai_client(chat_surface)
    reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Weather?"}])
    assert reply.choices[0].message.tool_calls[0].function.name == "weather"
    assert seen["anthropic"]["max_tokens"] == 4096
