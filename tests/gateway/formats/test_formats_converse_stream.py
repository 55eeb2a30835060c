"""ConverseStream's events -> chat-completion chunks (gateway.formats.converse.streams). The events are
made of the ConverseStream output shape's member names and validated by botocore's service model; the
same events are also sent to boto3's own client as a binary event stream, and what boto3 reads from
it must translate to the same chunks. The chunks are checked against the OpenAI SDK's types."""

import pytest
from openai.types.chat import ChatCompletionChunk

from gateway.formats import StreamError
from gateway.formats.converse.streams import EXCEPTIONS, ConverseToChatStream
from tests.gateway.formats.converse_support import boto3_stream, valid_event

START = ("messageStart", {"role": "assistant"})


def usage(inputs=9, outputs=4, read=None, write=None):
    tokens = {"inputTokens": inputs, "outputTokens": outputs, "totalTokens": inputs + outputs + (read or 0)
              + (write or 0)}
    if read is not None:
        tokens["cacheReadInputTokens"] = read
    if write is not None:
        tokens["cacheWriteInputTokens"] = write
    return ("metadata", {"usage": tokens, "metrics": {"latencyMs": 120}})


def text(index, piece):
    return ("contentBlockDelta", {"contentBlockIndex": index, "delta": {"text": piece}, "p": "abcdefgh"})


def tool_start(index, tool_id, name):
    return ("contentBlockStart", {"contentBlockIndex": index, "start": {"toolUse": {"toolUseId": tool_id,
                                                                                    "name": name}}})


def tool_input(index, piece):
    return ("contentBlockDelta", {"contentBlockIndex": index, "delta": {"toolUse": {"input": piece}}})


def stop(index):
    return ("contentBlockStop", {"contentBlockIndex": index})


def message_stop(reason, **extra):
    return ("messageStop", {"stopReason": reason, **extra})


def translate(events, *, boto3=True, **options):
    """The chunks of `events`, each event validated by botocore first; the same from what boto3 reads."""
    for kind, payload in events:
        valid_event(kind, {key: value for key, value in payload.items() if key != "p"})  # "p": AWS's padding
    chunks = _feed(events, **options)
    if boto3:
        assert _feed(boto3_stream(events), **options) == chunks
    return chunks


def _feed(events, **options):
    stream = ConverseToChatStream("chatcmpl-1", "bedrock/nova", 1700000000, **options)
    chunks = [chunk for kind, payload in events for chunk in stream.feed(kind, payload)]
    for chunk in chunks:
        ChatCompletionChunk.model_validate(chunk)
    assert stream.finished == (events[-1][0] == "metadata")
    return chunks


def deltas(chunks):
    return [chunk["choices"][0]["delta"] for chunk in chunks if chunk["choices"]]


def finish(chunks):
    return [(c["choices"][0]["finish_reason"], c["choices"][0].get("stop_reason")) for c in chunks
            if c["choices"] and c["choices"][0]["finish_reason"]]


def test_a_text_reply_with_its_usage():
    chunks = translate([START, text(0, "Hel"), text(0, "lo"), stop(0), message_stop("end_turn"), usage()])
    assert deltas(chunks) == [{"role": "assistant", "content": ""}, {"content": "Hel"}, {"content": "lo"}, {}]
    assert finish(chunks) == [("stop", None)]
    assert chunks[0] == {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1700000000,
                         "model": "bedrock/nova", "usage": None,
                         "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                      "finish_reason": None, "logprobs": None}]}
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"] == {
        "prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}


def test_cache_reads_and_writes_count_in_the_prompt_as_anthropic_s_do():
    chunks = translate([START, text(0, "Hi"), message_stop("end_turn"), usage(inputs=10, outputs=5, read=200,
                                                                               write=30)])
    assert chunks[-1]["usage"] == {"prompt_tokens": 240, "completion_tokens": 5, "total_tokens": 245,
                                   "prompt_tokens_details": {"cached_tokens": 200, "cache_write_tokens": 30}}


def test_tool_calls_stream_as_chat_tool_call_deltas():
    chunks = translate([
        START, text(0, "Looking."), stop(0),
        tool_start(1, "tooluse_a", "weather"), tool_input(1, '{"city":'), tool_input(1, ""), tool_input(1, '"Paris"}'),
        stop(1), tool_start(2, "tooluse_b", "time"), tool_input(2, "{}"), stop(2),
        message_stop("tool_use"), usage()])
    assert deltas(chunks)[1:-1] == [
        {"content": "Looking."},
        {"tool_calls": [{"index": 0, "id": "tooluse_a", "type": "function",
                         "function": {"name": "weather", "arguments": ""}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]},
        {"tool_calls": [{"index": 1, "id": "tooluse_b", "type": "function",
                         "function": {"name": "time", "arguments": ""}}]},
        {"tool_calls": [{"index": 1, "function": {"arguments": "{}"}}]}]
    assert finish(chunks) == [("tool_calls", None)]


def test_reasoning_becomes_reasoning_content_and_signatures_are_left_out():
    chunks = translate([
        START, ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "Think"}}}),
        ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {"signature": "sig"}}}),
        stop(0), ("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"reasoningContent": {
            "redactedContent": "cmVkYWN0ZWQ="}}}), stop(1),
        text(2, "Done."), stop(2), message_stop("end_turn"), usage()])
    assert deltas(chunks)[1:-1] == [{"reasoning_content": "Think"}, {"content": "Done."}]


@pytest.mark.parametrize(("reason", "finish_reason"), [
    ("end_turn", "stop"), ("stop_sequence", "stop"), ("max_tokens", "length"),
    ("model_context_window_exceeded", "length"), ("tool_use", "tool_calls"), ("content_filtered", "content_filter"),
    ("guardrail_intervened", "content_filter"), ("malformed_model_output", "stop"), ("malformed_tool_use", "stop")])
def test_stop_reasons(reason, finish_reason):
    assert finish(translate([START, text(0, "x"), message_stop(reason), usage()])) == [(finish_reason, None)]


def test_a_stop_sequence_the_model_names_is_the_choice_s_stop_reason():
    events = [START, text(0, "1, 2"), message_stop("stop_sequence",
                                                   additionalModelResponseFields={"stop_sequence": ", 3"}), usage()]
    assert finish(translate(events)) == [("stop", ", 3")]


def test_the_output_tool_s_input_is_the_reply_s_text():
    events = [START, tool_start(0, "tooluse_o", "json_output"), tool_input(0, '{"city": '), tool_input(0, '"Rome"}'),
              stop(0), message_stop("tool_use"), usage()]
    chunks = translate(events, output_tool="json_output")
    assert deltas(chunks)[1:-1] == [{"content": '{"city": '}, {"content": '"Rome"}'}]
    assert finish(chunks) == [("stop", None)]
    both = translate([*events[:5], tool_start(1, "tooluse_w", "weather"), tool_input(1, "{}"), stop(1),
                      *events[5:]], output_tool="json_output")
    assert finish(both) == [("tool_calls", None)]


def test_without_include_usage_there_is_no_usage():
    chunks = translate([START, text(0, "Hi"), message_stop("end_turn"), usage()], include_usage=False)
    assert all("usage" not in chunk for chunk in chunks) and finish(chunks) == [("stop", None)]
    assert len(chunks) == 3


def test_metadata_without_message_stop_still_finishes_the_choice():
    chunks = translate([START, tool_start(0, "t", "weather"), tool_input(0, "{}"), usage()])
    assert finish(chunks) == [("tool_calls", None)] and chunks[-1]["usage"]["total_tokens"] == 13


def test_events_of_a_later_version_say_nothing_and_nothing_follows_the_end():
    stream = ConverseToChatStream("c", "m", 1)
    assert len(stream.feed("messageStart", {"role": "assistant"})) == 1
    assert stream.feed("somethingNew", {"x": 1}) == []
    assert stream.feed("contentBlockStart", {"contentBlockIndex": 0, "start": {"image": {"format": "png"}}}) == []
    assert stream.feed("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"citation": {"title": "t"}}}) == []
    stream.feed(*usage())
    assert stream.finished and stream.feed(*text(0, "late")) == []


@pytest.mark.parametrize("kind", sorted(EXCEPTIONS))
def test_exceptions_in_the_stream_raise_stream_error(kind):
    stream = ConverseToChatStream("c", "m", 1)
    stream.feed(*START)
    with pytest.raises(StreamError) as info:
        stream.feed(kind, {"message": "It broke."})
    assert (info.value.type, info.value.message) == (kind, "It broke.")
    with pytest.raises(Exception, match="It broke"):  # boto3 reads the same message as that error
        boto3_stream([START, (kind, {"message": "It broke."})])


def test_a_model_stream_error_gives_the_model_s_own_message():
    stream = ConverseToChatStream("c", "m", 1)
    with pytest.raises(StreamError) as info:
        stream.feed("modelStreamErrorException", {"message": "Model failed", "originalStatusCode": 424,
                                                  "originalMessage": "CUDA out of memory"})
    assert info.value.message == "CUDA out of memory"
    with pytest.raises(StreamError) as info:
        ConverseToChatStream("c", "m", 1).feed("throttlingException", {})
    assert info.value.message == "The upstream stream failed."


@pytest.mark.parametrize("event", [
    ("messageStart", ["assistant"]),
    ("contentBlockDelta", {"delta": {"text": "x"}}),
    ("contentBlockDelta", {"contentBlockIndex": -1, "delta": {"text": "x"}}),
    ("contentBlockDelta", {"contentBlockIndex": True, "delta": {"text": "x"}}),
    ("contentBlockDelta", {"contentBlockIndex": "0", "delta": {"text": "x"}}),
    ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": 5}}),
    ("contentBlockDelta", {"contentBlockIndex": 0, "delta": "x"}),
    ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"toolUse": {"input": "{}"}}}),  # no tool started
    ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"toolUse": {}}}),
    ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": ["x"]}}}),
    ("contentBlockStart", {"contentBlockIndex": 0}),
    ("contentBlockStart", {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "t"}}}),
    ("contentBlockStop", {}),
    ("messageStop", {}),
    ("messageStop", {"stopReason": None}),
    ("metadata", {"usage": "lots"}),
    ("metadata", {"metrics": {"latencyMs": 1}}),
])
def test_malformed_events_raise_value_error(event):
    stream = ConverseToChatStream("c", "m", 1)
    with pytest.raises(ValueError):
        stream.feed(*event)


def test_a_payload_that_is_not_an_object_or_a_type_that_is_not_a_string_is_malformed():
    with pytest.raises(ValueError):
        ConverseToChatStream("c", "m", 1).feed("contentBlockDelta", "text")
    with pytest.raises(ValueError):
        ConverseToChatStream("c", "m", 1).feed(["messageStart"], {"role": "assistant"})
