"""The Messages usage a translated reply carries, checked against Anthropic's schema
(tests/compat/reply_schemas/anthropic.json) field by field: what the chat server counted is carried
over, what it has no count for is neutral (docs/compatibility.md, "Reply schemas")."""

from gateway.formats.anthropic.replies import chat_to_messages_response
from gateway.formats.anthropic.streams import ChatToMessagesStream
from tests.compat.reply_schemas import check, check_events

USAGE = {"prompt_tokens": 12, "completion_tokens": 9, "total_tokens": 21,
         "prompt_tokens_details": {"cached_tokens": 4}, "completion_tokens_details": {"reasoning_tokens": 6}}


def completion(usage=None, **message):
    return {"id": "c1", "model": "m", "usage": usage or {"prompt_tokens": 3, "completion_tokens": 2},
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "Hi", **message}}]}


def test_a_whole_message_carries_the_servers_counts_and_neutral_values_for_the_rest():
    message = chat_to_messages_response(completion(USAGE, reasoning_content="Thought."))
    check("anthropic", "Message", message)
    assert message["usage"] == {
        "input_tokens": 8, "output_tokens": 9, "cache_read_input_tokens": 4, "cache_creation_input_tokens": 0,
        "cache_creation": None, "inference_geo": None, "server_tool_use": None, "service_tier": None,
        "output_tokens_details": {"thinking_tokens": 6}}
    assert [block["type"] for block in message["content"]] == ["thinking", "text"]
    assert (message["content"][1]["citations"], message["container"], message["stop_details"]) == (None, None, None)


def test_a_tool_call_is_made_by_the_model_itself():
    call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
    message = chat_to_messages_response(completion(content=None, tool_calls=[call]))
    check("anthropic", "Message", message)
    assert message["content"] == [{"type": "tool_use", "id": "call_1", "caller": {"type": "direct"}, "name": "f",
                                   "input": {"a": 1}}]


def test_a_stream_reports_the_input_once_the_server_counted_it():
    stream = ChatToMessagesStream(message_id="msg_1", model="m", input_tokens=3, request_id="req-1")
    chunk = {"choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": "stop"}]}
    events = stream.start() + stream.feed(chunk) + stream.feed({"choices": [], "usage": USAGE}) + stream.finish()
    check_events("anthropic", events)
    assert events[0]["message"]["usage"]["input_tokens"] == 3  # the gateway's own count, before the server's
    assert events[-2]["usage"] == {"input_tokens": 8, "output_tokens": 9, "cache_read_input_tokens": 4,
                                   "cache_creation_input_tokens": 0, "output_tokens_details": {"thinking_tokens": 6},
                                   "server_tool_use": None}
    error = stream.error("overloaded_error", "Overloaded")
    check("anthropic", "ErrorResponse", error)
    assert error["request_id"] == "req-1"
