"""The fields of a Responses request beside input and tools (gateway.formats.responses.fields): carried into
the chat form, honoured by the gateway by their meaning, or refused with a 400 naming them; and what the
reply carries back (log probabilities, the settings it repeats, a reply cut midway). Checked against the
official SDK's types."""

import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response, ResponseStreamEvent
from openai.types.responses.response_create_params import ResponseCreateParams
from pydantic import TypeAdapter

from gateway.formats.responses.stream import ChatToResponsesStream
from gateway.formats.responses.translate import chat_to_response, responses_to_chat_request
from gateway.web.errors import ApiError
from tests.sdk_types import CHAT_REQUEST, deep

RESPONSES_REQUEST = TypeAdapter(ResponseCreateParams)
STREAM_EVENT = TypeAdapter(ResponseStreamEvent)
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
          "additionalProperties": False}
HELLO = [{"role": "user", "content": "Hello"}]


def translate(**fields):
    body = {"model": "m", "input": "Hello", **fields}
    deep(RESPONSES_REQUEST.validate_python(body))
    req = responses_to_chat_request(body)
    deep(CHAT_REQUEST.validate_python(req))
    return req


def refusal(tools=False, **fields):
    with pytest.raises(ApiError) as info:
        responses_to_chat_request({"model": "m", "input": "Hello", **fields}, tools=tools)
    assert info.value.status == 400 and info.value.code == "invalid_request_error"
    return info.value


# ----------------------------------------------------------------------------- carried to the model


def test_a_json_schema_format_becomes_response_format():
    fmt = {"type": "json_schema", "name": "city", "schema": SCHEMA, "strict": True, "description": "A city."}
    assert translate(text={"format": fmt, "verbosity": "low"}) == {
        "model": "m", "messages": HELLO, "verbosity": "low",
        "response_format": {"type": "json_schema", "json_schema": {"name": "city", "schema": SCHEMA, "strict": True,
                                                                   "description": "A city."}}}


def test_json_object_and_plain_text_formats():
    assert translate(text={"format": {"type": "json_object"}})["response_format"] == {"type": "json_object"}
    assert translate(text={"format": {"type": "text"}}) == {"model": "m", "messages": HELLO}


def test_who_asks_and_how_reach_the_model():
    req = translate(reasoning={"effort": "high", "summary": "auto"}, user="u-1", metadata={"team": "a"},
                    prompt_cache_key="k-1", prompt_cache_retention="24h", service_tier="flex",
                    prompt_cache_options={"ttl": "30m"})
    assert req == {"model": "m", "messages": HELLO, "reasoning_effort": "high", "user": "u-1",
                   "metadata": {"team": "a"}, "prompt_cache_key": "k-1", "prompt_cache_retention": "24h",
                   "service_tier": "flex", "prompt_cache_options": {"ttl": "30m"}}


@pytest.mark.parametrize("fields, sent", [
    ({"safety_identifier": "s-1"}, {"user": "s-1"}),
    ({"user": "u-1", "safety_identifier": "u-1"}, {"user": "u-1"}),
    ({"user": "u-1", "safety_identifier": "s-1"}, {"user": "u-1", "safety_identifier": "s-1"}),
])
def test_safety_identifier_goes_as_user_unless_both_differ(fields, sent):
    req = translate(**fields)
    assert {key: req[key] for key in ("user", "safety_identifier") if key in req} == sent


@pytest.mark.parametrize("fields, sent", [
    ({"include": ["message.output_text.logprobs"]}, {"logprobs": True}),
    ({"include": ["message.output_text.logprobs"], "top_logprobs": 3}, {"logprobs": True, "top_logprobs": 3}),
    ({"top_logprobs": 2}, {"logprobs": True, "top_logprobs": 2}),
    ({"top_logprobs": 0}, {}),
    ({"include": ["reasoning.encrypted_content", "web_search_call.action.sources"]}, {}),
])
def test_log_probabilities_are_asked_for(fields, sent):
    req = translate(**fields)
    assert {key: req[key] for key in ("logprobs", "top_logprobs") if key in req} == sent


def test_what_codex_sends_on_every_call_is_taken():
    """reasoning.summary, store false, encrypted reasoning, Codex's own annotations: nothing asked of the
    model, no refusal; the prompt cache key reaches it."""
    req = translate(reasoning={"summary": "auto"}, store=False, include=["reasoning.encrypted_content"],
                    prompt_cache_key="thread-1", client_metadata={"session_id": "s", "turn_id": "t"},
                    stream_options={"include_obfuscation": True}, background=False, truncation="disabled",
                    max_tool_calls=3, parallel_tool_calls=True, tool_choice="auto", stream=True, instructions="")
    assert req == {"model": "m", "messages": HELLO, "prompt_cache_key": "thread-1", "stream": True,
                   "stream_options": {"include_usage": True}}


# ----------------------------------------------------------------------------- refused by name


@pytest.mark.parametrize("fields, param", [
    ({"previous_response_id": "resp_1"}, "previous_response_id"),
    ({"conversation": "conv_1"}, "conversation"),
    ({"conversation": {"id": "conv_1"}}, "conversation"),
    ({"prompt": {"id": "pmpt_1", "version": "2"}}, "prompt"),
    ({"store": True}, "store"),
    ({"background": True}, "background"),
    ({"truncation": "auto"}, "truncation"),
    ({"context_management": [{"type": "compaction"}]}, "context_management"),
    ({"top_k": 5}, "top_k"),
    ({"text": {"format": {"type": "grammar"}}}, "text.format.type"),
    ({"text": {"format": {"type": "json_schema", "schema": SCHEMA}}}, "text.format.name"),
    ({"text": {"format": {"type": "json_schema", "name": "c"}}}, "text.format.schema"),
    ({"text": {"format": {"type": "json_schema", "name": "c", "schema": SCHEMA, "strict": "yes"}}},
     "text.format.strict"),
    ({"text": {"format": {"type": "json_schema", "name": "c", "schema": SCHEMA, "grammar": "x"}}},
     "text.format.grammar"),
    ({"text": {"tone": "warm"}}, "text.tone"),
    ({"text": "json"}, "text"),
    ({"reasoning": {"effort": "high", "budget": 100}}, "reasoning.budget"),
    ({"reasoning": {"context": "all_turns"}}, "reasoning.context"),
    ({"reasoning": {"mode": "pro"}}, "reasoning.mode"),
    ({"include": ["message.output_text.logprobs", "file_search_call.everything"]}, "include.1"),
    ({"top_logprobs": 21}, "top_logprobs"),
    ({"stream_options": {"include_usage": True}}, "stream_options.include_usage"),
    ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input.0"),
    ({"tool_choice": "required"}, "tool_choice"),
    ({"tool_choice": {"type": "function", "name": "f"}}, "tool_choice"),
])
def test_what_cannot_be_honoured_is_a_400_naming_it(fields, param):
    error = refusal(**fields)
    assert error.param == param and error.message.startswith(param.split(".")[0])


def test_the_refusals_say_why():
    assert refusal(previous_response_id="resp_1").message == (
        "previous_response_id: responses are not stored by this gateway; send the earlier turns in input.")
    assert refusal(store=True).message == ("store: true is not supported: this gateway keeps no responses (nothing "
                                           "to retrieve or continue from later); send store: false or leave it out.")
    assert refusal(top_k=5).message == "top_k: not a field this gateway carries on /v1/responses; leave it out."
    assert refusal(tools=True, tool_choice="required").param == "tool_choice"  # tools on, but none sent


def test_null_fields_are_absent():
    """Clients send null for what they leave unset: no refusal, nothing carried."""
    req = responses_to_chat_request({"model": "m", "input": "Hello", "previous_response_id": None, "store": None,
                                     "text": {"format": None, "verbosity": None}, "reasoning": None, "unknown": None})
    assert req == {"model": "m", "messages": HELLO}


# ----------------------------------------------------------------------------- the reply


def logprob(token, top=()):
    return {"token": token, "logprob": -0.5, "bytes": list(token.encode()),
            "top_logprobs": [{"token": t, "logprob": -1.5, "bytes": list(t.encode())} for t in top]}


def completion(finish_reason="stop", logprobs=None):
    data = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": '{"city":"Paris"}'},
                         "finish_reason": finish_reason, "logprobs": logprobs}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}
    if finish_reason:  # a reply cut midway has none (gateway.upstream.replies.ReplyAccumulator)
        ChatCompletion.model_validate(data)
    return data


ASKED = {"input": "x", "include": ["message.output_text.logprobs"], "top_logprobs": 1}
ENTRIES = [logprob('{"city":', ["{"]), logprob('"Paris"}', ['"Rome"}'])]


def test_a_whole_reply_carries_its_log_probabilities():
    body = chat_to_response(completion(logprobs={"content": ENTRIES, "refusal": None}), request=ASKED,
                            response_id="resp_1")
    text = Response.model_validate(body).output[0].content[0]
    assert [(p.token, p.logprob, [t.token for t in p.top_logprobs]) for p in text.logprobs] == \
        [('{"city":', -0.5, ["{"]), ('"Paris"}', -0.5, ['"Rome"}'])]
    unasked = chat_to_response(completion(logprobs={"content": ENTRIES}), request={"input": "x"}, response_id="r")
    assert unasked["output"][0]["content"][0]["logprobs"] == []  # not asked for: the schema's empty list


def chunks():
    def chunk(delta, finish_reason=None, logprobs=None):
        data = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": logprobs}]}
        ChatCompletionChunk.model_validate(data)
        return data
    return [chunk({"role": "assistant", "content": ""}),
            chunk({"content": '{"city":'}, logprobs={"content": ENTRIES[:1], "refusal": None}),
            chunk({"content": '"Paris"}'}, "stop", logprobs={"content": ENTRIES[1:], "refusal": None})]


def test_a_stream_carries_its_log_probabilities():
    stream = ChatToResponsesStream(response_id="resp_s", model="m", request=ASKED, created_at=1)
    events = stream.start() + [e for c in chunks() for e in stream.feed(c)] + stream.finish()
    for event in events:
        STREAM_EVENT.validate_python(event)
    deltas = [e["logprobs"] for e in events if e["type"] == "response.output_text.delta"]
    assert deltas == [ENTRIES[:1], ENTRIES[1:]]
    done = next(e for e in events if e["type"] == "response.output_text.done")
    assert done["logprobs"] == ENTRIES and done["text"] == '{"city":"Paris"}'
    final = Response.model_validate(events[-1]["response"])
    assert [p.token for p in final.output[0].content[0].logprobs] == ['{"city":', '"Paris"}']


def test_the_response_repeats_the_settings_it_was_asked_with():
    fmt = {"type": "json_schema", "name": "city", "schema": SCHEMA, "strict": True}
    request = {"input": "x", "text": {"format": fmt, "verbosity": "low"}, "reasoning": {"effort": "low"},
               "metadata": {"team": "a"}, "user": "u-1", "prompt_cache_key": "k", "store": False}
    body = chat_to_response(completion(), request=request, response_id="resp_1")
    response = Response.model_validate(body)
    assert body["text"] == {"format": fmt, "verbosity": "low"} and response.text.format.name == "city"
    assert (response.reasoning.effort, response.metadata, response.user, response.prompt_cache_key) == \
        ("low", {"team": "a"}, "u-1", "k")
    assert (response.store, response.background, response.truncation) == (False, False, "disabled")
    plain = Response.model_validate(chat_to_response(completion(), request={"input": "x"}, response_id="r"))
    assert (plain.text.format.type, plain.metadata, plain.reasoning) == ("text", {}, None)


def test_a_reply_cut_midway_is_a_failed_response():
    """The partial a 502 carries says failed, with the reason, and its items incomplete (as the stream's
    response.failed does)."""
    cut = ("The model server closed the connection mid-reply.", "disconnected")
    body = chat_to_response(completion(finish_reason=None), request={"input": "x"}, response_id="resp_1", cut=cut)
    response = Response.model_validate(body)
    assert (response.status, response.incomplete_details, response.output[0].status) == ("failed", None, "incomplete")
    assert body["error"] == {"code": "server_error",
                             "message": "The model server closed the connection mid-reply. (disconnected)"}
    assert response.output_text == '{"city":"Paris"}'
