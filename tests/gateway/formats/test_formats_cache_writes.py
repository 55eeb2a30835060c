"""Prompt-cache writes through the translations: Anthropic's `cache_creation_input_tokens` becomes the
chat form's `prompt_tokens_details.cache_write_tokens` (a field of OpenAI's own schema, not an extra),
and comes back out of `input_tokens` for a Messages client, whole and streamed; a Responses client
gets it in `input_tokens_details.cache_write_tokens`. Checked against the official SDKs' own types."""

from anthropic.types import Message, RawMessageStreamEvent
from openai.types.chat import ChatCompletion
from openai.types.responses import Response
from pydantic import TypeAdapter

from gateway.calls.metering import cache_write_of, cached_input_of
from gateway.formats.anthropic.events import MessageAccumulator
from gateway.formats.anthropic.replies import (
    chat_to_messages_response,
    chat_usage,
    messages_to_chat_response,
    messages_usage,
)
from gateway.formats.anthropic.streams import ChatToMessagesStream, MessagesToChatStream
from gateway.formats.responses.translate import chat_to_response

ANTHROPIC_EVENT = TypeAdapter(RawMessageStreamEvent)
CLAUDE_USAGE = {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 4,
                "cache_creation_input_tokens": 6}
MESSAGE = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
           "content": [{"type": "text", "text": "Hi"}], "stop_reason": "end_turn", "stop_sequence": None,
           "usage": CLAUDE_USAGE}


def test_anthropic_cache_writes_are_prompt_tokens_in_openais_own_field():
    assert chat_usage(CLAUDE_USAGE) == {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25,
                                        "prompt_tokens_details": {"cached_tokens": 4, "cache_write_tokens": 6}}
    completion = ChatCompletion.model_validate(messages_to_chat_response(Message.model_validate(MESSAGE).to_dict()))
    details = completion.usage.prompt_tokens_details
    assert (details.cached_tokens, details.cache_write_tokens) == (4, 6)
    assert not details.model_extra  # both are fields OpenAI's schema declares


def test_writes_alone_or_none_give_only_what_there_is():
    assert chat_usage({"input_tokens": 3, "output_tokens": 1, "cache_creation_input_tokens": 2}) == {
        "prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6,
        "prompt_tokens_details": {"cache_write_tokens": 2}}
    assert "prompt_tokens_details" not in chat_usage({"input_tokens": 3, "output_tokens": 1,
                                                      "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0})


def test_a_chat_usage_with_writes_is_anthropics_again():
    again = messages_usage(chat_usage(CLAUDE_USAGE))
    assert {name: again[name] for name in CLAUDE_USAGE} == CLAUDE_USAGE  # and the schema's neutral fields
    assert again["cache_creation"] is None and again["server_tool_use"] is None
    message = Message.model_validate(chat_to_messages_response(messages_to_chat_response(MESSAGE)))
    usage = message.usage
    assert (usage.input_tokens, usage.cache_read_input_tokens, usage.cache_creation_input_tokens) == (10, 4, 6)
    assert messages_usage({"prompt_tokens": 2, "completion_tokens": 1,
                           "prompt_tokens_details": {"cache_write_tokens": 9}})["input_tokens"] == 0  # never below


def test_a_chat_stream_with_writes_ends_with_anthropics_counts():
    stream = ChatToMessagesStream(message_id="msg_1", model="m")
    events = stream.start()
    events += stream.feed({"choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": "stop"}]})
    events += stream.feed({"choices": [], "usage": chat_usage(CLAUDE_USAGE)})
    events += stream.finish()
    for event in events:
        ANTHROPIC_EVENT.validate_python(event)
    assert events[-2]["usage"] == {"output_tokens": 5, "input_tokens": 10, "cache_read_input_tokens": 4,
                                   "cache_creation_input_tokens": 6, "output_tokens_details": None,
                                   "server_tool_use": None}


def test_an_anthropic_stream_with_writes_ends_with_them_in_the_chat_usage():
    stream = MessagesToChatStream(completion_id="c1", model="m", created=1, include_usage=True)
    start = {"type": "message_start", "message": {**MESSAGE, "content": [], "stop_reason": None,
                                                  "usage": {**CLAUDE_USAGE, "output_tokens": 1}}}
    for event in (start, {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                          "usage": {"output_tokens": 5}}):
        stream.feed(ANTHROPIC_EVENT.validate_python(event).to_dict())
    assert stream.usage["prompt_tokens_details"] == {"cached_tokens": 4, "cache_write_tokens": 6}


def test_a_passed_through_anthropic_reply_is_metered_with_its_writes():
    """A `/v1/messages` call to an Anthropic server: its own events, gathered for metering."""
    reply = MessageAccumulator()
    reply.feed({"type": "message_start", "message": {**MESSAGE, "content": [], "usage": {**CLAUDE_USAGE,
                                                                                       "output_tokens": 1}}})
    reply.feed({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}})
    assert (reply.usage["prompt_tokens"], cached_input_of(reply), cache_write_of(reply)) == (20, 4, 6)
    assert reply.message(message_id="msg_2", model="an/x")["usage"]["cache_creation_input_tokens"] == 6


def test_a_responses_client_gets_the_writes_in_its_input_details():
    completion = messages_to_chat_response(MESSAGE)
    response = Response.model_validate(chat_to_response(completion, request={"input": "x"}, response_id="resp_1"))
    details = response.usage.input_tokens_details
    assert (response.usage.input_tokens, details.cached_tokens, details.cache_write_tokens) == (20, 4, 6)
