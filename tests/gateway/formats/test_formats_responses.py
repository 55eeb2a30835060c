"""OpenAI Responses <-> neutral chat translations (gateway.formats.responses.translate), checked against the
official SDK's types and through the real SDK client over httpx MockTransport."""

import json

import httpx2
import openai
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


def translate(body, tools=False):
    deep(RESPONSES_REQUEST.validate_python(body))
    req = responses_to_chat_request(body, tools=tools)
    deep(CHAT_REQUEST.validate_python({"model": "m", **req}))
    return req


def completion(text="Hi there", finish_reason="stop", usage=None):
    data = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000, "model": "gpt-x",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": finish_reason}],
            "usage": usage or {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11}}
    ChatCompletion.model_validate(data)
    return data


def chunk(delta=None, finish_reason=None, usage=None, choices=True):
    data = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish_reason}] if choices else []}
    if usage is not None:
        data["usage"] = usage
    ChatCompletionChunk.model_validate(data)
    return data


def text_chunks(finish_reason="stop"):
    return [chunk({"role": "assistant", "content": ""}), chunk({"content": "Hel"}), chunk({"content": "lo"}),
            chunk({}, finish_reason=finish_reason),
            chunk(usage={"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7,
                         "prompt_tokens_details": {"cached_tokens": 1}}, choices=False)]


def run(stream, chunks, end=None, one_item=True):
    events = stream.start() + [e for c in chunks for e in stream.feed(c)] + (end() if end else stream.finish())
    for event in events:
        STREAM_EVENT.validate_python(event)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    for event in events if one_item else ():  # one message item at output 0 with one text part
        assert event.get("output_index", 0) == 0 and event.get("content_index", 0) == 0
        assert event.get("item_id", "msg_" + stream.response_id[5:]) == "msg_" + stream.response_id[5:]
    return events


def client_for(handler):
    return openai.OpenAI(api_key="k", base_url="http://gw.test/v1", max_retries=0,
                         http_client=httpx2.Client(transport=httpx2.MockTransport(handler)))


def sse(events):
    body = b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)
    return httpx2.Response(200, headers={"content-type": "text/event-stream"}, content=body)


# ----------------------------------------------------------------------------- request


def test_a_string_input_becomes_one_user_message():
    req = translate({"model": "gpt-x", "input": "Hello", "instructions": "Be brief.", "max_output_tokens": 50,
                     "temperature": 0.2, "top_p": 0.8, "store": False, "metadata": {"a": "b"}})
    assert req == {"model": "gpt-x", "max_tokens": 50, "temperature": 0.2, "top_p": 0.8, "metadata": {"a": "b"},
                   "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}]}


def test_input_items_become_chat_messages():
    req = translate({"model": "m", "stream": True, "input": [
        {"role": "developer", "content": "Dev rules."},
        {"type": "message", "role": "system", "content": [{"type": "input_text", "text": "Sys."}]},
        {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "What is this?"},
            {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "low"}]},
        {"type": "message", "role": "assistant", "id": "msg_0", "status": "completed",
         "content": [{"type": "output_text", "text": "A cat.", "annotations": []}]},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"role": "user", "content": [{"type": "input_text", "text": "Sure?"}]}]})
    assert req["stream"] is True and req["stream_options"] == {"include_usage": True}
    assert req["messages"] == [
        {"role": "system", "content": "Dev rules."},
        {"role": "system", "content": "Sys."},
        {"role": "user", "content": [{"type": "text", "text": "What is this?"},
                                     {"type": "image_url",
                                      "image_url": {"url": "https://example.com/a.png", "detail": "low"}}]},
        {"role": "assistant", "content": "A cat."},
        {"role": "user", "content": "Sure?"}]


@pytest.mark.parametrize("body", [
    {"model": "m", "input": "x", "tools": [{"type": "function", "name": "f", "parameters": {}}]},
    {"model": "m", "input": "x", "tools": [{"type": "web_search"}]},
    {"model": "m", "input": [{"type": "function_call_output", "call_id": "c", "output": "42"}]},
    {"model": "m", "input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}]},
    {"model": "m", "input": [{"role": "user", "content": [{"type": "input_image", "file_id": "f", "detail": "auto"}]}]},
    {"model": "m", "input": [{"role": "user", "content": [{"type": "input_file", "file_id": "file_1"}]}]},
])
def test_unsupported_features_are_refused_with_501(body):
    with pytest.raises(ApiError) as info:
        responses_to_chat_request(body)
    assert info.value.status == 501 and info.value.code == "unsupported"
    if "tools" in body or "function" in json.dumps(body):
        assert info.value.message == "Tools are not supported on the Responses endpoint."


@pytest.mark.parametrize("body", [
    None, {"model": "m"}, {"model": "m", "input": []}, {"model": "m", "input": 5}, {"model": "m", "input": ["hi"]},
    {"model": "m", "input": "x", "instructions": ["not", "a", "string"]},
    {"model": "m", "input": [{"type": "bogus"}]}, {"model": "m", "input": [{"type": 3}]},
    {"model": "m", "input": [{"role": "tool", "content": "x"}]},
    {"model": "m", "input": [{"role": "user"}]},
    {"model": "m", "input": [{"role": "user", "content": [{"type": "input_text"}]}]},
    {"model": "m", "input": [{"role": "user", "content": [{"type": "input_audio"}]}]},
    {"model": "m", "input": [{"role": "user", "content": [{"type": "input_image"}]}]},
    {"model": "m", "input": [{"role": "assistant", "content": [{"type": "input_image", "image_url": "https://x"}]}]},
])
def test_malformed_requests_are_refused_with_400(body):
    with pytest.raises(ApiError) as info:
        responses_to_chat_request(body)
    assert info.value.status == 400 and info.value.code == "invalid_request_error" and info.value.message


# ----------------------------------------------------------------------------- reply


def test_a_completion_becomes_a_completed_response():
    request = {"model": "gpt-x", "input": "Hello", "instructions": "Be brief."}
    usage = {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11,
             "prompt_tokens_details": {"cached_tokens": 3},
             "completion_tokens_details": {"reasoning_tokens": 1}}
    body = chat_to_response(completion(usage=usage), request=request, response_id="resp_abc")
    response = Response.model_validate(body)
    assert response.id == "resp_abc" and response.status == "completed" and response.output_text == "Hi there"
    assert response.output[0].id == "msg_abc" and response.output[0].status == "completed"
    assert response.instructions == "Be brief." and response.created_at == 1700000000 and response.model == "gpt-x"
    assert (body["tools"], body["tool_choice"], body["parallel_tool_calls"], body["metadata"], body["error"]) == \
        ([], "auto", True, {}, None)
    assert response.usage.input_tokens == 9 and response.usage.output_tokens == 2 and response.usage.total_tokens == 11
    assert response.usage.input_tokens_details.cached_tokens == 3
    assert response.usage.output_tokens_details.reasoning_tokens == 1


@pytest.mark.parametrize("finish_reason, reason", [("length", "max_output_tokens"),
                                                   ("content_filter", "content_filter")])
def test_a_cut_completion_becomes_an_incomplete_response(finish_reason, reason):
    body = chat_to_response(completion("Hi th", finish_reason), request={"input": "x"}, response_id="resp_1")
    response = Response.model_validate(body)
    assert response.status == "incomplete" and response.incomplete_details.reason == reason
    assert response.output_text == "Hi th" and response.output[0].status == "incomplete"


def test_the_sdk_reads_a_non_streamed_response():
    seen = {}

    def surface(request):
        body = json.loads(request.content)
        seen["chat"] = responses_to_chat_request(body)
        return httpx2.Response(200, json=chat_to_response(completion(), request=body, response_id="resp_1"))

    response = client_for(surface).responses.create(model="gpt-x", input="Hello", instructions="Be brief.")
    assert response.output_text == "Hi there" and response.usage.total_tokens == 11
    assert seen["chat"]["messages"][0] == {"role": "system", "content": "Be brief."}


# ----------------------------------------------------------------------------- stream


def test_a_text_stream_becomes_responses_events():
    stream = ChatToResponsesStream(response_id="resp_s", model="m", request={"input": "x"}, created_at=1700000000)
    events = run(stream, text_chunks())
    assert [e["type"] for e in events] == [
        "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
        "response.output_text.delta", "response.output_text.delta", "response.output_text.done",
        "response.content_part.done", "response.output_item.done", "response.completed"]
    assert events[0]["response"]["status"] == "in_progress" and events[0]["response"]["output"] == []
    assert events[6]["text"] == "Hello" and stream.text == "Hello"
    final = Response.model_validate(events[-1]["response"])
    assert final.status == "completed" and final.output_text == "Hello"
    usage = final.usage
    assert (usage.input_tokens, usage.output_tokens, usage.input_tokens_details.cached_tokens) == (5, 2, 1)


def test_a_length_stop_ends_with_response_incomplete():
    stream = ChatToResponsesStream(response_id="resp_s", model="m", request={"input": "x"}, created_at=1)
    events = run(stream, text_chunks("length"))
    assert events[-1]["type"] == "response.incomplete"
    final = Response.model_validate(events[-1]["response"])
    assert final.status == "incomplete" and final.incomplete_details.reason == "max_output_tokens"
    assert final.output_text == "Hello" and events[-2]["item"]["status"] == "incomplete"


def test_an_empty_reply_still_has_its_message_item():
    stream = ChatToResponsesStream(response_id="resp_s", model="m", request={"input": "x"}, created_at=1)
    events = run(stream, [chunk({"role": "assistant", "content": ""}), chunk({}, finish_reason="stop")])
    assert "response.output_text.delta" not in [e["type"] for e in events]
    final = Response.model_validate(events[-1]["response"])
    assert final.output_text == "" and final.usage.total_tokens == 0


def test_a_failure_keeps_the_text_delivered_so_far():
    stream = ChatToResponsesStream(response_id="resp_s", model="m", request={"input": "x"}, created_at=1)
    events = run(stream, text_chunks()[:3], end=lambda: stream.fail("server_error", "The model stopped answering."))
    assert [e["type"] for e in events][-4:] == [
        "response.output_text.done", "response.content_part.done", "response.output_item.done", "response.failed"]
    failed = Response.model_validate(events[-1]["response"])
    assert failed.status == "failed" and failed.error.code == "server_error"
    assert failed.error.message == "The model stopped answering." and failed.output_text == "Hello"
    assert stream.finish() == [] and stream.feed(chunk({"content": "late"})) == [] and stream.text == "Hello"


def test_a_failure_before_any_text_has_no_output():
    stream = ChatToResponsesStream(response_id="resp_s", model="m", request={"input": "x"}, created_at=1)
    events = run(stream, [], end=lambda: stream.fail("server_error", "Upstream unreachable."))
    assert [e["type"] for e in events] == ["response.created", "response.in_progress", "response.failed"]
    assert events[-1]["response"]["output"] == [] and "usage" not in events[-1]["response"]  # nothing counted


def test_the_sdk_stream_helper_reads_the_translated_stream():
    seen = {}

    def surface(request):
        body = json.loads(request.content)
        seen["chat"] = responses_to_chat_request(body)
        stream = ChatToResponsesStream(response_id="resp_s", model=body["model"], request=body, created_at=1700000000)
        return sse(run(stream, text_chunks()))

    with client_for(surface).responses.stream(model="gpt-x", input="Hello", instructions="Be brief.") as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert deltas == ["Hel", "lo"] and seen["chat"]["stream"] is True
    assert final.output_text == "Hello" and final.status == "completed" and final.instructions == "Be brief."
    assert final.usage.total_tokens == 7


@pytest.mark.parametrize("ending", ["length", "fail"])
def test_the_sdk_raw_stream_sees_the_terminal_event(ending):
    def surface(request):
        body = json.loads(request.content)
        stream = ChatToResponsesStream(response_id="resp_s", model="m", request=body, created_at=1)
        if ending == "fail":
            return sse(run(stream, text_chunks()[:2], end=lambda: stream.fail("server_error", "boom")))
        return sse(run(stream, text_chunks("length")))

    events = list(client_for(surface).responses.create(model="m", input="x", stream=True))
    last = events[-1]
    if ending == "fail":
        assert last.type == "response.failed" and last.response.error.message == "boom"
        assert last.response.output_text == "Hel"
    else:
        assert last.type == "response.incomplete" and last.response.incomplete_details.reason == "max_output_tokens"
        assert last.response.output_text == "Hello"


# ----------------------------------------------------------------------------- tools (RESPONSES_TOOLS on)

WEATHER = {"type": "function", "name": "get_weather", "description": "Weather of a city.", "strict": True,
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
AGENTS = {"type": "namespace", "name": "agents", "description": "Sub-agents.",
          "tools": [{"type": "function", "name": "spawn", "parameters": {"type": "object", "properties": {}}}]}
CHAT_WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city.",
                                                 "parameters": WEATHER["parameters"], "strict": True}}


def test_function_tools_and_choices_become_chat_tools():
    req = translate({"model": "m", "input": "x", "tools": [WEATHER, AGENTS], "parallel_tool_calls": False,
                     "tool_choice": {"type": "function", "name": "get_weather"}}, tools=True)
    assert req["tools"] == [CHAT_WEATHER, {"type": "function", "function": {"name": "agents__spawn", "parameters": {
        "type": "object", "properties": {}}, "description": "(agents: Sub-agents.)"}}]
    forced = {"type": "function", "function": {"name": "get_weather"}}
    assert (req["tool_choice"], req["parallel_tool_calls"]) == (forced, False)
    allowed = {"type": "allowed_tools", "mode": "required", "tools": [{"type": "function", "name": "get_weather"}]}
    narrowed = translate({"model": "m", "input": "x", "tools": [WEATHER, AGENTS], "tool_choice": allowed}, tools=True)
    assert (narrowed["tools"], narrowed["tool_choice"]) == ([CHAT_WEATHER], "required")
    assert "parallel_tool_calls" not in translate({"model": "m", "input": "x", "parallel_tool_calls": True}, tools=True)


def test_function_calls_and_outputs_become_assistant_and_tool_messages():
    req = translate({"model": "m", "tools": [WEATHER, AGENTS], "input": [
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {"type": "message", "role": "assistant", "id": "msg_0", "status": "completed",
         "content": [{"type": "output_text", "text": "Checking.", "annotations": []}]},
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": '{"city":"Paris"}'},
        {"type": "function_call", "call_id": "c2", "name": "spawn", "namespace": "agents", "arguments": "{}",
         "id": "fc_1", "status": "completed"},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        {"type": "function_call_output", "call_id": "c2", "output": [
            {"type": "input_text", "text": "agent 7"}, {"type": "input_image", "image_url": "https://x/a.png"}]},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"role": "user", "content": "Thanks."}]}, tools=True)
    assert req["messages"] == [
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}},
            {"id": "c2", "type": "function", "function": {"name": "agents__spawn", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "c2", "content": "agent 7"},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/a.png"}}]},
        {"role": "user", "content": "Thanks."}]


@pytest.mark.parametrize("body, status, where", [
    ({"tools": [{"type": "web_search", "external_web_access": False}]}, 400, "tools.0"),
    ({"tools": [WEATHER, {"type": "file_search", "vector_store_ids": ["v"]}]}, 400, "tools.1"),
    ({"tools": [{"type": "custom", "name": "apply_patch"}]}, 400, "tools.0"),
    ({"tools": [{**AGENTS, "tools": [{"type": "custom", "name": "c"}]}]}, 400, "tools.0.tools.0"),
    ({"tools": [{**WEATHER, "defer_loading": True}]}, 400, "tools.0.defer_loading"),
    ({"tools": [{**WEATHER, "parameters": "x"}]}, 400, "tools.0.parameters"),
    ({"tools": [{"type": "function", "parameters": {}}]}, 400, "tools.0.name"),
    ({"tools": [WEATHER, WEATHER]}, 400, "tools"),
    ({"tools": [WEATHER], "tool_choice": {"type": "function", "name": "nope"}}, 400, "tool_choice.name"),
    ({"tools": [WEATHER], "tool_choice": {"type": "web_search_preview"}}, 400, "tool_choice"),
    ({"input": [{"type": "web_search_call", "id": "ws", "status": "completed"}]}, 400, None),
    ({"input": [{"type": "function_call", "call_id": "c", "name": "f"}]}, 400, "input.0.arguments"),
    ({"input": [{"type": "function_call_output", "call_id": "c", "output": 3}]}, 400, "input.0.output"),
    ({"input": [{"type": "function_call_output", "call_id": "c", "output": [{"type": "input_file"}]}]}, 501, None),
])
def test_what_cannot_be_carried_is_refused_by_name(body, status, where):
    with pytest.raises(ApiError) as info:
        responses_to_chat_request({"model": "m", "input": "x", **body}, tools=True)
    assert info.value.status == status and info.value.param == where
    if "web_search" in json.dumps(body["tools"] if "tools" in body else ""):
        assert info.value.message.startswith("tools.0: tools of type 'web_search' are not carried")
        assert 'Codex CLI: web_search = "disabled"' in info.value.message


def tool_completion(text=None, finish_reason="tool_calls"):
    calls = [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"P"}'}},
             {"id": "call_2", "type": "function", "function": {"name": "agents__spawn", "arguments": "{}"}}]
    data = completion(text, finish_reason)
    data["choices"][0]["message"]["tool_calls"] = calls
    ChatCompletion.model_validate(data)
    return data


@pytest.mark.parametrize("text", [None, "Let me look."])
def test_tool_calls_become_function_call_items(text):
    request = {"input": "x", "tools": [WEATHER, AGENTS], "tool_choice": "required"}
    body = chat_to_response(tool_completion(text), request=request, response_id="resp_t")
    response = Response.model_validate(body)
    first = 1 if text else 0  # the message item comes first when there is text
    assert body["output"][first:] == [
        {"type": "function_call", "id": f"fc_t_{first}", "call_id": "call_1", "name": "get_weather",
         "arguments": '{"city":"P"}', "status": "completed"},
        {"type": "function_call", "id": f"fc_t_{first + 1}", "call_id": "call_2", "name": "spawn",
         "namespace": "agents", "arguments": "{}", "status": "completed"}]
    assert response.status == "completed" and response.output_text == (text or "") and len(response.output) == first + 2
    assert (body["tools"], body["tool_choice"]) == ([WEATHER, AGENTS], "required")


def tool_chunks():
    return [chunk({"role": "assistant", "content": "Hm."}),
            chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                   "function": {"name": "get_weather", "arguments": ""}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]}),
            chunk({"tool_calls": [{"index": 1, "id": "call_2", "type": "function",
                                   "function": {"name": "agents__spawn", "arguments": "{}"}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"P"}'}}]}),
            chunk({}, finish_reason="tool_calls"),
            chunk(usage={"prompt_tokens": 5, "completion_tokens": 4, "total_tokens": 9}, choices=False)]


def test_a_tool_call_stream_becomes_function_call_events():
    stream = ChatToResponsesStream(response_id="resp_s", model="m", request={"input": "x", "tools": [WEATHER, AGENTS]},
                                   created_at=1)
    events = run(stream, tool_chunks(), one_item=False)
    assert [f"{e['type'][9:]}@{e.get('output_index')}" for e in events[2:]] == [
        "output_item.added@0", "content_part.added@0", "output_text.delta@0", "output_text.done@0",
        "content_part.done@0", "output_item.done@0", "output_item.added@1", "function_call_arguments.delta@1",
        "output_item.added@2", "function_call_arguments.delta@2", "function_call_arguments.delta@1",
        "function_call_arguments.done@1", "output_item.done@1", "function_call_arguments.done@2",
        "output_item.done@2", "completed@None"]
    assert all((e.get("item_id") or e["item"]["id"]) == ["msg_s", "fc_s_1", "fc_s_2"][e["output_index"]]
               for e in events[2:-1])
    assert events[8]["item"] == {"type": "function_call", "id": "fc_s_1", "call_id": "call_1", "name": "get_weather",
                                 "arguments": "", "status": "in_progress"}
    assert events[13]["arguments"] == '{"city":"P"}' and events[15]["arguments"] == "{}"
    assert (events[16]["item"]["namespace"], events[16]["item"]["name"]) == ("agents", "spawn")
    final = events[-1]["response"]
    assert final["output"][1:] == [events[14]["item"], events[16]["item"]] and final["status"] == "completed"
    assert Response.model_validate(final).output_text == "Hm."
