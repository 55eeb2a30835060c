"""Anthropic Messages <-> neutral chat translations (gateway.formats.anthropic), checked against the
official SDKs' own types and, for the streams, through the real SDK clients over httpx MockTransport."""

import json

import anthropic
import httpx2
import openai
import pytest
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types import Message, RawMessageStreamEvent
from anthropic.types.message_create_params import MessageCreateParams
from anthropic.types.shared import ErrorResponse
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from pydantic import TypeAdapter

from gateway.errors import ApiError
from tests.sdk_types import CHAT_REQUEST, deep
from gateway.formats import StreamError
from gateway.formats.anthropic_stream import ChatToMessagesStream, MessagesToChatStream
from gateway.formats.anthropic import chat_to_messages_request, messages_to_chat_request
from gateway.formats.anthropic_reply import chat_to_messages_response, messages_to_chat_response

ANTHROPIC_REQUEST = TypeAdapter(MessageCreateParams)
ANTHROPIC_EVENT = TypeAdapter(RawMessageStreamEvent)
PNG = "iVBORw0KGgo="
IMAGE_BLOCK = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}}
WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def valid_chat_request(req):
    deep(CHAT_REQUEST.validate_python(req))
    return req


def valid_anthropic_request(req):
    deep(ANTHROPIC_REQUEST.validate_python(req))
    return req


def chunk(delta=None, finish_reason=None, usage=None, choices=True):
    data = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000, "model": "m",
            "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish_reason, "logprobs": None}]
            if choices else []}
    if usage is not None:
        data["usage"] = usage
    ChatCompletionChunk.model_validate(data)
    return data


def anthropic_sse(events):
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def openai_sse(chunks):
    return b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"


def sse_response(body):
    return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)


def anthropic_client(handler):
    transport = httpx2.MockTransport(handler)
    return anthropic.Anthropic(api_key="k", base_url="http://gw.test", max_retries=0,
                               http_client=httpx2.Client(transport=transport))


def openai_client(handler):
    transport = httpx2.MockTransport(handler)
    return openai.OpenAI(api_key="k", base_url="http://gw.test/v1", max_retries=0,
                         http_client=httpx2.Client(transport=transport))


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
    assert req == {"model": "claude-x", "max_tokens": 100, "temperature": 0.5, "top_p": 0.9, "stop": ["END"],
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
    assert tool2 == {"role": "tool", "tool_call_id": "toolu_2", "content": "no\ndata"}
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
    {"messages": [{"role": "user", "content": [{"type": "video", "url": "x"}]}]},
    {"messages": [{"role": "user", "content": [{"text": "no type"}]}]},
    {"messages": [{"role": "user", "content": [{"type": "text", "text": 3}]}]},
    {"messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "file", "file_id": "f"}}]}]},
    {"messages": [{"role": "user", "content": [{"type": "document", "source": {"type": "url", "url": "u"}}]}]},
    {"messages": [{"role": "user", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]}]},
    {"messages": [{"role": "user", "content": [{"type": "tool_result", "content": "no id"}]}]},
    {"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": 7}]}]},
    {"messages": [{"role": "assistant", "content": [{"type": "tool_use", "input": {}}]}]},
    {"messages": [{"role": "assistant", "content": [{"type": "tool_result", "tool_use_id": "t"}]}]},
    {"system": 42, "messages": [{"role": "user", "content": "x"}]},
    {"system": [{"type": "image"}], "messages": [{"role": "user", "content": "x"}]},
    {"messages": [{"role": "user", "content": "x"}], "tools": {"name": "f"}},
    {"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "web_search_20250305", "name": "web_search"}]},
    {"messages": [{"role": "user", "content": "x"}], "tools": [{"input_schema": {}}]},
    {"messages": [{"role": "user", "content": "x"}], "tool_choice": {"type": "tool"}},
    {"messages": [{"role": "user", "content": "x"}], "tool_choice": "auto"},
    {"messages": [{"role": "user", "content": "x"}], "stop_sequences": "END"},
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
                   "temperature": 1.0, "top_p": 0.5, "stream": True,
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
    assert [b.type for b in message.content] == ["text", "tool_use"]
    assert message.content[1].input == {"city": "Oslo"}
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
    assert message.content[1].input == {"city": "Oslo"} and message.stop_reason == "tool_use"
    assert seen["chat"]["messages"] == [{"role": "user", "content": "Weather?"}]

    def chat_surface(request):
        seen["anthropic"] = valid_anthropic_request(chat_to_messages_request(json.loads(request.content)))
        return httpx2.Response(200, json=messages_to_chat_response(ANTHROPIC_MESSAGE))

    client = openai_client(chat_surface)
    reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "Weather?"}])
    assert reply.choices[0].message.tool_calls[0].function.name == "weather"
    assert seen["anthropic"]["max_tokens"] == 4096


# ----------------------------------------------------------------------------- Anthropic stream → chat chunks


def anthropic_events(*, error=False):
    msg = {"id": "msg_s", "type": "message", "role": "assistant", "content": [], "model": "claude-x",
           "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 9, "output_tokens": 1}}
    events = [
        {"type": "message_start", "message": msg},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "ping"},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hel"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "lo"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1,
         "content_block": {"type": "thinking", "thinking": "", "signature": ""}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "thinking_delta", "thinking": "hmm"}},
        {"type": "content_block_stop", "index": 1},
        {"type": "content_block_start", "index": 2,
         "content_block": {"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}}},
        {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": ""}},
        {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": '{"city": '}},
        {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": '"Oslo"}'}},
        {"type": "content_block_stop", "index": 2},
        {"type": "content_block_start", "index": 3,
         "content_block": {"type": "tool_use", "id": "toolu_2", "name": "now", "input": {}}},
        {"type": "content_block_delta", "index": 3, "delta": {"type": "input_json_delta", "partial_json": "{}"}},
        {"type": "content_block_stop", "index": 3},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
         "usage": {"output_tokens": 12}},
        {"type": "message_stop"}]
    if error:
        events = events[:5] + [{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}]
    for event in events:
        if event["type"] not in ("error", "ping"):
            ANTHROPIC_EVENT.validate_python(event)
    return events


def test_an_anthropic_stream_becomes_chat_chunks():
    stream = MessagesToChatStream(completion_id="chatcmpl-s", model="claude-x", created=1700000000, include_usage=True)
    chunks = [c for event in anthropic_events() for c in stream.feed(event)]
    for c in chunks:
        ChatCompletionChunk.model_validate(c)
        assert c["id"] == "chatcmpl-s" and c["created"] == 1700000000 and "usage" in c
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert text == "Hello"
    calls = [t for c in chunks if c["choices"] for t in c["choices"][0]["delta"].get("tool_calls", [])]
    assert calls[0] == {"index": 0, "id": "toolu_1", "type": "function",
                        "function": {"name": "weather", "arguments": ""}}
    assert "".join(t["function"]["arguments"] for t in calls if t["index"] == 0) == '{"city": "Oslo"}'
    assert [t for t in calls if t["index"] == 1] == [
        {"index": 1, "id": "toolu_2", "type": "function", "function": {"name": "now", "arguments": ""}},
        {"index": 1, "function": {"arguments": "{}"}}]
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["choices"] == []
    assert chunks[-1]["usage"] == {"prompt_tokens": 9, "completion_tokens": 12, "total_tokens": 21}
    assert stream.finished and stream.usage["completion_tokens"] == 12


def test_without_include_usage_there_is_no_usage_chunk_and_ping_alone_emits_nothing():
    stream = MessagesToChatStream(completion_id="c", model="m", created=1, include_usage=False)
    assert stream.feed({"type": "ping"}) == []
    chunks = [c for event in anthropic_events() for c in stream.feed(event)]
    assert all(c["choices"] and "usage" not in c for c in chunks)
    assert stream.usage == {"prompt_tokens": 9, "completion_tokens": 12, "total_tokens": 21}


def test_an_anthropic_error_event_raises_stream_error():
    stream = MessagesToChatStream(completion_id="c", model="m", created=1, include_usage=True)
    with pytest.raises(StreamError) as info:
        for event in anthropic_events(error=True):
            stream.feed(event)
    assert (info.value.type, info.value.message) == ("overloaded_error", "Overloaded")
    assert not stream.finished and stream.usage["prompt_tokens"] == 9
    with pytest.raises(ValueError):
        stream.feed(["not", "an", "event"])


def test_chat_surface_streams_an_anthropic_provider_through_the_openai_sdk():
    seen = {}

    def chat_surface(request):
        body = json.loads(request.content)
        seen["anthropic"] = valid_anthropic_request(chat_to_messages_request(body))
        stream = MessagesToChatStream(completion_id="chatcmpl-s", model=body["model"], created=1700000000,
                                      include_usage=body.get("stream_options", {}).get("include_usage", False))
        return sse_response(openai_sse([c for e in anthropic_events() for c in stream.feed(e)]))

    client = openai_client(chat_surface)
    tools = [{"type": "function", "function": {"name": "weather", "parameters": WEATHER_SCHEMA}}]
    with client.chat.completions.stream(model="claude-x", messages=[{"role": "user", "content": "Weather?"}],
                                        tools=tools, stream_options={"include_usage": True}) as stream:
        final = stream.get_final_completion()
    assert seen["anthropic"]["stream"] is True and "stream_options" not in seen["anthropic"]
    message = final.choices[0].message
    assert message.content == "Hello" and final.choices[0].finish_reason == "tool_calls"
    assert message.tool_calls[0].id == "toolu_1"
    assert json.loads(message.tool_calls[0].function.arguments) == {"city": "Oslo"}
    assert (message.tool_calls[1].id, message.tool_calls[1].function.name) == ("toolu_2", "now")
    assert final.usage.prompt_tokens == 9 and final.usage.completion_tokens == 12


# ----------------------------------------------------------------------------- chat chunks → Anthropic stream


def chat_chunks():
    return [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Let me "}),
        chunk({"content": "check."}),
        chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                               "function": {"name": "weather", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Oslo"}'}}]}),
        chunk({"tool_calls": [{"index": 1, "id": "call_2", "type": "function",
                               "function": {"name": "weather", "arguments": '{"city":"Rome"}'}}]}),
        chunk({}, finish_reason="tool_calls"),
        chunk(usage={"prompt_tokens": 20, "completion_tokens": 7, "total_tokens": 27}, choices=False)]


def test_chat_chunks_become_anthropic_events_the_sdk_accumulates():
    stream = ChatToMessagesStream(message_id="msg_1", model="m", input_tokens=5)
    events = stream.start() + [e for c in chat_chunks() for e in stream.feed(c)] + stream.finish()
    snapshot, bufs = None, {}
    for event in events:
        parsed = ANTHROPIC_EVENT.validate_python(event)
        snapshot = accumulate_event(event=parsed, current_snapshot=snapshot, json_bufs=bufs)
    assert [e["type"] for e in events] == [
        "message_start", "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
        "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
        "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"]
    message = Message.model_validate(snapshot.to_dict())
    assert message.content[0].text == "Let me check."
    assert [(b.id, b.input) for b in message.content[1:]] == [("call_1", {"city": "Oslo"}),
                                                               ("call_2", {"city": "Rome"})]
    assert message.stop_reason == "tool_use"
    assert (message.usage.input_tokens, message.usage.output_tokens) == (20, 7) and stream.output_tokens == 7


def test_an_empty_reply_still_ends_properly_and_error_events_are_valid():
    stream = ChatToMessagesStream(message_id="msg_1", model="m")
    events = stream.feed(chunk({}, finish_reason="length")) + stream.finish()
    assert [e["type"] for e in events] == ["message_start", "message_delta", "message_stop"]
    assert events[1]["delta"]["stop_reason"] == "max_tokens" and events[1]["usage"] == {"output_tokens": 0}
    for event in events:
        ANTHROPIC_EVENT.validate_python(event)
    error = stream.error("overloaded_error", "Overloaded")
    assert ErrorResponse.model_validate(error).error.type == "overloaded_error"


def test_messages_surface_streams_a_chat_provider_through_the_anthropic_sdk():
    seen = {}

    def messages_surface(request):
        seen["chat"] = chat_req = valid_chat_request(messages_to_chat_request(json.loads(request.content)))
        stream = ChatToMessagesStream(message_id="msg_s", model=chat_req["model"])
        events = stream.start() + [e for c in chat_chunks() for e in stream.feed(c)] + stream.finish()
        return sse_response(anthropic_sse(events))

    client = anthropic_client(messages_surface)
    with client.messages.stream(model="claude-x", max_tokens=100, system="Be brief.",
                                tools=[{"name": "weather", "input_schema": WEATHER_SCHEMA}],
                                messages=[{"role": "user", "content": "Weather?"}]) as stream:
        texts = list(stream.text_stream)
        message = stream.get_final_message()
    assert "".join(texts) == "Let me check."
    assert seen["chat"]["stream_options"] == {"include_usage": True}
    assert seen["chat"]["messages"][0] == {"role": "system", "content": "Be brief."}
    assert message.id == "msg_s" and message.stop_reason == "tool_use"
    assert [b.input for b in message.content if b.type == "tool_use"] == [{"city": "Oslo"}, {"city": "Rome"}]
    assert message.usage.output_tokens == 7 and message.usage.input_tokens == 20


def test_a_mid_stream_error_reaches_the_anthropic_sdk():
    def messages_surface(request):
        stream = ChatToMessagesStream(message_id="msg_s", model="m")
        events = stream.start() + stream.feed(chunk({"content": "partial"}))
        events.append(stream.error("overloaded_error", "Overloaded"))
        return sse_response(anthropic_sse(events))

    client = anthropic_client(messages_surface)
    received = []
    with pytest.raises(anthropic.APIStatusError) as info:
        with client.messages.stream(model="m", max_tokens=5, messages=[{"role": "user", "content": "x"}]) as stream:
            received.extend(stream.text_stream)
    assert received == ["partial"] and info.value.type == "overloaded_error"
