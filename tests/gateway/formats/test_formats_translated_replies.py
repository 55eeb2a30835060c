"""Replies translated across formats, whole and streamed (gateway/formats/anthropic/replies.py,
anthropic_stream.py): a stop sequence, thinking and reasoning, and the forced tool that carries a
response_format to an Anthropic server read back as text. Checked with the official SDKs' types
and clients (over httpx MockTransport)."""

import json

import httpx2
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types import Message, RawMessageStreamEvent
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from pydantic import BaseModel, TypeAdapter

from gateway.formats.anthropic.replies import chat_to_messages_response, messages_to_chat_response
from gateway.formats.anthropic.streams import ChatToMessagesStream, MessagesToChatStream
from tests.gateway.formats.anthropic_support import anthropic_client, openai_client

ANTHROPIC_EVENT = TypeAdapter(RawMessageStreamEvent)
START = {"type": "message_start", "message": {
    "id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "claude-x", "stop_reason": None,
    "stop_sequence": None, "usage": {"input_tokens": 5, "output_tokens": 1}}}


class Person(BaseModel):
    name: str
    age: int


def message(content, stop_reason="end_turn", stop_sequence=None):
    return Message.model_validate({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x", "content": content,
        "stop_reason": stop_reason, "stop_sequence": stop_sequence,
        "usage": {"input_tokens": 5, "output_tokens": 3}}).to_dict()


def to_chunks(events, **kwargs):
    stream = MessagesToChatStream(completion_id="chatcmpl-1", model="claude-x", created=1, include_usage=False,
                                  **kwargs)
    chunks = [c for event in events for c in stream.feed(ANTHROPIC_EVENT.validate_python(event).to_dict())]
    for c in chunks:
        ChatCompletionChunk.model_validate(c)
    return chunks


def joined(chunks, key):
    return "".join(c["choices"][0]["delta"].get(key) or "" for c in chunks if c["choices"])


def block(index, content_block, *deltas):
    return [{"type": "content_block_start", "index": index, "content_block": content_block},
            *({"type": "content_block_delta", "index": index, "delta": d} for d in deltas),
            {"type": "content_block_stop", "index": index}]


def end(stop_reason, stop_sequence=None):
    return [{"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence},
             "usage": {"output_tokens": 4}}, {"type": "message_stop"}]


# ----------------------------------------------------------------------------- Anthropic server → chat


def test_the_output_tool_of_a_whole_reply_is_its_text():
    reply = message([{"type": "tool_use", "id": "toolu_1", "name": "Person", "input": {"name": "Ada", "age": 36}}],
                    stop_reason="tool_use")
    completion = ChatCompletion.model_validate(messages_to_chat_response(reply, output_tool="Person"))
    assert completion.choices[0].finish_reason == "stop" and completion.choices[0].message.tool_calls is None
    assert Person.model_validate_json(completion.choices[0].message.content) == Person(name="Ada", age=36)


def test_a_client_tool_next_to_the_output_tool_stays_a_tool_call():
    reply = message([{"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {"city": "Oslo"}}],
                    stop_reason="tool_use")
    choice = messages_to_chat_response(reply, output_tool="Person")["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["tool_calls"][0]["function"]["name"] == "weather"


def test_a_stop_sequence_and_thinking_of_a_whole_reply():
    reply = message([{"type": "thinking", "thinking": "Hmm.", "signature": "sig"}, {"type": "text", "text": "One"}],
                    stop_reason="stop_sequence", stop_sequence="TWO")
    choice = messages_to_chat_response(reply)["choices"][0]
    assert choice["finish_reason"] == "stop" and choice["stop_reason"] == "TWO"
    assert choice["message"]["reasoning_content"] == "Hmm." and choice["message"]["content"] == "One"
    ChatCompletion.model_validate(messages_to_chat_response(reply))


def test_a_streamed_output_tool_becomes_content_deltas_the_openai_sdk_parses():
    events = [START, *block(0, {"type": "tool_use", "id": "toolu_1", "name": "Person", "input": {}},
                            {"type": "input_json_delta", "partial_json": ""},
                            {"type": "input_json_delta", "partial_json": '{"name": "Ada", '},
                            {"type": "input_json_delta", "partial_json": '"age": 36}'}), *end("tool_use")]
    chunks = to_chunks(events, output_tool="Person")
    assert joined(chunks, "content") == '{"name": "Ada", "age": 36}'
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert not any(c["choices"][0]["delta"].get("tool_calls") for c in chunks)

    def chat_surface(request):
        sse = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=sse)

    with openai_client(chat_surface).chat.completions.stream(
            model="claude-x", messages=[{"role": "user", "content": "Who?"}], response_format=Person) as stream:
        final = stream.get_final_completion()
    assert final.choices[0].message.parsed == Person(name="Ada", age=36)


def test_an_output_tool_whose_input_comes_whole_in_its_start():
    events = [START, *block(0, {"type": "tool_use", "id": "toolu_1", "name": "json_output", "input": {"a": 1}}),
              *end("tool_use")]
    chunks = to_chunks(events, output_tool="json_output")
    assert json.loads(joined(chunks, "content")) == {"a": 1}


def test_streamed_thinking_and_a_stop_sequence():
    events = [START, *block(0, {"type": "thinking", "thinking": "", "signature": ""},
                            {"type": "thinking_delta", "thinking": "Let me "},
                            {"type": "thinking_delta", "thinking": "think."},
                            {"type": "signature_delta", "signature": "sig"}),
              *block(1, {"type": "text", "text": ""}, {"type": "text_delta", "text": "One "}),
              *end("stop_sequence", "TWO")]
    chunks = to_chunks(events)
    assert joined(chunks, "reasoning_content") == "Let me think." and joined(chunks, "content") == "One "
    finish = chunks[-1]["choices"][0]
    assert finish["finish_reason"] == "stop" and finish["stop_reason"] == "TWO"


# ----------------------------------------------------------------------------- OpenAI-compatible server → Messages


def completion(message, finish_reason="stop", **choice):
    return ChatCompletion.model_validate({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish_reason,
                     **choice}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}}).to_dict()


def test_a_matched_stop_string_is_a_stop_sequence():
    reply = Message.model_validate(chat_to_messages_response(completion({"content": "One "}, stop_reason="TWO")))
    assert (reply.stop_reason, reply.stop_sequence) == ("stop_sequence", "TWO")
    token = chat_to_messages_response(completion({"content": "One"}, stop_reason=151643))  # a stop token id
    assert (token["stop_reason"], token["stop_sequence"]) == ("end_turn", None)
    cut = chat_to_messages_response(completion({"content": "One"}, finish_reason="length", stop_reason="TWO"))
    assert cut["stop_reason"] == "max_tokens"


def test_reasoning_becomes_a_thinking_block():
    for key in ("reasoning_content", "reasoning"):
        reply = Message.model_validate(chat_to_messages_response(completion({"content": "42", key: "Sum it."})))
        assert [b.type for b in reply.content] == ["thinking", "text"]
        assert (reply.content[0].thinking, reply.content[0].signature) == ("Sum it.", "")


def chunk(delta, finish_reason=None, **choice):
    data = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, **choice}]}
    ChatCompletionChunk.model_validate(data)
    return data


def test_streamed_reasoning_and_a_stop_string_reach_the_anthropic_sdk():
    chunks = [chunk({"role": "assistant", "content": ""}), chunk({"reasoning_content": "Sum "}),
              chunk({"reasoning_content": "it."}), chunk({"content": "4"}), chunk({"content": "2"}),
              chunk({}, "stop", stop_reason="END")]
    stream = ChatToMessagesStream(message_id="msg_1", model="m")
    events = stream.start() + [e for c in chunks for e in stream.feed(c)] + stream.finish()
    snapshot, bufs = None, {}
    for event in events:
        snapshot = accumulate_event(event=ANTHROPIC_EVENT.validate_python(event), current_snapshot=snapshot,
                                    json_bufs=bufs)
    assert [(e["type"], e.get("delta", {}).get("type")) for e in events[1:5]] == [
        ("content_block_start", None), ("content_block_delta", "thinking_delta"),
        ("content_block_delta", "thinking_delta"), ("content_block_stop", None)]

    def messages_surface(request):
        sse = b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)
        return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=sse)

    with anthropic_client(messages_surface).messages.stream(
            model="m", max_tokens=10, messages=[{"role": "user", "content": "6*7?"}]) as sdk_stream:
        final = sdk_stream.get_final_message()
    assert [b.type for b in final.content] == ["thinking", "text"]
    assert (final.content[0].thinking, final.content[0].signature, final.content[1].text) == ("Sum it.", "", "42")
    assert (final.stop_reason, final.stop_sequence) == ("stop_sequence", "END")
    assert Message.model_validate(snapshot.to_dict()).stop_sequence == "END"
