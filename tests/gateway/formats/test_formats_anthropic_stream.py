"""Anthropic Messages <-> neutral chat translations of streams (gateway.formats.anthropic.streams):
Anthropic events to chat chunks and back, checked against the official SDKs' own types and through
the real SDK clients over httpx MockTransport."""

import json

import anthropic
import httpx2
import pytest
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types import Message, RawMessageStreamEvent
from anthropic.types.shared import ErrorResponse
from openai.types.chat import ChatCompletionChunk
from pydantic import TypeAdapter

from gateway.formats import StreamError
from gateway.formats.anthropic.from_chat import chat_to_messages_request
from gateway.formats.anthropic.streams import ChatToMessagesStream, MessagesToChatStream
from gateway.formats.anthropic.to_chat import messages_to_chat_request
from tests.gateway.formats.anthropic_support import (
    WEATHER_SCHEMA,
    anthropic_client,
    openai_client,
    valid_anthropic_request,
    valid_chat_request,
)

ANTHROPIC_EVENT = TypeAdapter(RawMessageStreamEvent)


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
    assert (message.usage.input_tokens, message.usage.output_tokens) == (20, 7)
    assert events[-2]["usage"]["output_tokens"] == 7


def test_an_empty_reply_still_ends_properly_and_error_events_are_valid():
    stream = ChatToMessagesStream(message_id="msg_1", model="m")
    events = stream.feed(chunk({}, finish_reason="length")) + stream.finish()
    assert [e["type"] for e in events] == ["message_start", "message_delta", "message_stop"]
    assert events[1]["delta"]["stop_reason"] == "max_tokens"
    assert events[1]["usage"] == {"output_tokens": 0, "input_tokens": None, "cache_read_input_tokens": None,
                                  "cache_creation_input_tokens": None, "output_tokens_details": None,
                                  "server_tool_use": None}  # the server reported no input count
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
