"""Requests translated across formats (gateway/formats/anthropic/to_chat.py, chat_to_anthropic.py): what each
carries, as what, and the names of what it cannot carry (for gateway.upstream.providers.base.uncarried)."""

import json

import pytest

from gateway.formats.anthropic.from_chat import chat_request_uncarried, chat_to_messages_request, output_tool_name
from gateway.formats.anthropic.to_chat import messages_request_uncarried, messages_to_chat_request
from tests.gateway.formats.anthropic_support import WEATHER_SCHEMA, valid_anthropic_request, valid_chat_request

HI = [{"role": "user", "content": "hi"}]
PDF = "JVBERi0xLjQK"
PERSON = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"],
          "additionalProperties": False}


def anthropic(**fields):
    return {"model": "m", "max_tokens": 10, "messages": HI, **fields}


def chat(**fields):
    return {"model": "m", "messages": HI, **fields}


# ----------------------------------------------------------------------------- Anthropic request → chat


def test_top_k_user_output_format_and_effort_are_carried():
    body = anthropic(top_k=7, metadata={"user_id": "user-42"},
                     output_config={"format": {"type": "json_schema", "schema": PERSON}, "effort": "high"})
    req = valid_chat_request(messages_to_chat_request(valid_anthropic_request(body)))
    assert req["top_k"] == 7 and req["user"] == "user-42" and req["reasoning_effort"] == "high"
    assert req["response_format"] == {"type": "json_schema",
                                      "json_schema": {"name": "output", "schema": PERSON, "strict": True}}
    assert messages_request_uncarried(body) == []


def test_a_failed_tool_reads_as_an_error_and_several_blocks_stay_apart():
    body = anthropic(messages=[
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "w", "input": {}},
                                          {"type": "tool_use", "id": "t2", "name": "w", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "is_error": True, "content": "city not found"},
            {"type": "tool_result", "tool_use_id": "t2", "is_error": True},
            {"type": "tool_result", "tool_use_id": "t2", "content": [
                {"type": "text", "text": "first", "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "second"}]}]}])
    req = valid_chat_request(messages_to_chat_request(valid_anthropic_request(body)))
    assert req["messages"][2:] == [
        {"role": "tool", "tool_call_id": "t1", "content": "Error: city not found"},
        {"role": "tool", "tool_call_id": "t2", "content": "Error: the tool failed."},
        {"role": "tool", "tool_call_id": "t2",
         "content": [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}]}]


def test_a_system_message_mid_conversation_stays_at_its_place():
    body = anthropic(system="Top.", messages=[
        {"role": "user", "content": "one"}, {"role": "assistant", "content": "two"},
        {"role": "system", "content": "Now answer in French."}, {"role": "user", "content": "three"}])
    req = messages_to_chat_request(body)
    assert [m["role"] for m in req["messages"]] == ["system", "user", "assistant", "system", "user"]
    assert req["messages"][3] == {"role": "system", "content": "Now answer in French."}


def test_cache_control_and_thinking_history_need_no_place():
    """Prompt-caching marks are left out without a refusal (the chat server caches prefixes by
    itself), and so is the thinking of earlier turns (chat servers take no reasoning back)."""
    cached = {"type": "ephemeral", "ttl": "1h"}
    body = anthropic(cache_control={"type": "ephemeral"},
                     system=[{"type": "text", "text": "Sys.", "cache_control": cached}],
                     tools=[{"name": "w", "input_schema": WEATHER_SCHEMA, "cache_control": cached}],
                     messages=[{"role": "user", "content": [{"type": "text", "text": "a", "cache_control": cached}]},
                               {"role": "assistant", "content": [
                                   {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                                   {"type": "redacted_thinking", "data": "xyz"}, {"type": "text", "text": "b"}]},
                               {"role": "user", "content": "c"}])
    req = valid_chat_request(messages_to_chat_request(valid_anthropic_request(body)))
    assert req["messages"] == [{"role": "system", "content": "Sys."}, {"role": "user", "content": "a"},
                               {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]
    assert req["tools"] == [{"type": "function", "function": {"name": "w", "parameters": WEATHER_SCHEMA}}]
    assert messages_request_uncarried(body) == []


@pytest.mark.parametrize("fields, names", [
    ({"thinking": {"type": "enabled", "budget_tokens": 2048}}, ["thinking"]),
    ({"thinking": {"type": "adaptive"}}, ["thinking"]),
    ({"thinking": {"type": "disabled"}}, []),
    ({"context_management": {"edits": [{"type": "clear_tool_uses_20250919"}]}}, ["context_management"]),
    ({"container": "c1", "mcp_servers": [{"type": "url", "url": "https://mcp.test", "name": "x"}]},
     ["container", "mcp_servers"]),
    ({"service_tier": "auto", "speed": "standard"}, []),
    ({"service_tier": "standard_only", "speed": "fast", "inference_geo": "eu"},
     ["service_tier", "speed", "inference_geo"]),
    ({"a_field_of_a_later_version": 1, "another": None}, ["a_field_of_a_later_version"]),
    ({"metadata": {"user_id": "u", "tenant": "t"}}, ["metadata.tenant"]),
    ({"output_config": {"task_budget": {"total": 5}}}, ["output_config.task_budget"]),
    ({"tools": [{"name": "w", "input_schema": WEATHER_SCHEMA, "input_examples": [{"city": "Oslo"}]},
                {"type": "web_search_20250305", "name": "web_search", "max_uses": 2}]},
     ["tools.0.input_examples", "tools.1 (web_search_20250305)"]),
])
def test_what_the_chat_form_cannot_carry_is_named(fields, names):
    assert messages_request_uncarried(anthropic(**fields)) == names


def test_blocks_with_no_chat_counterpart_are_named_and_left_out():
    body = anthropic(messages=[
        {"role": "user", "content": [
            {"type": "image", "source": {"type": "file", "file_id": "file_1"}},
            {"type": "document", "source": {"type": "url", "url": "https://example.test/a.pdf"}},
            {"type": "document", "title": "a.pdf", "source": {"type": "base64", "media_type": "application/pdf",
                                                              "data": PDF}},
            {"type": "document", "citations": {"enabled": True},
             "source": {"type": "content", "content": [{"type": "text", "text": "inner"}]}},
            {"type": "container_upload", "file_id": "file_2"},
            {"type": "text", "text": "Read them."}]},
        {"role": "assistant", "content": [
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}},
            {"type": "text", "text": "Found."}]},
        {"role": "user", "content": "ok", "cache": "me"}])
    req = messages_to_chat_request(body)
    assert req["messages"][0]["content"] == [
        {"type": "file", "file": {"file_data": f"data:application/pdf;base64,{PDF}", "filename": "a.pdf"}},
        {"type": "text", "text": "inner"}, {"type": "text", "text": "Read them."}]
    assert req["messages"][1] == {"role": "assistant", "content": "Found."}
    assert messages_request_uncarried(body) == [
        "messages.0.content.0.source (file)", "messages.0.content.1.source (url)", "messages.0.content.3.citations",
        "messages.0.content.4 (container_upload)", "messages.1.content.0 (server_tool_use)", "messages.2.cache"]


def test_only_server_tools_leave_no_tools_and_no_tool_choice():
    body = anthropic(tools=[{"type": "web_search_20250305", "name": "web_search"}], tool_choice={"type": "any"})
    req = messages_to_chat_request(body)
    assert "tools" not in req and "tool_choice" not in req


# ----------------------------------------------------------------------------- chat request → Anthropic


def test_user_top_k_stop_and_effort_are_carried():
    body = chat(user="user-7", top_k=3, stop=["END", "STOP"], reasoning_effort="medium", service_tier="default",
                n=1, logprobs=False, presence_penalty=0, frequency_penalty=0.0, store=False, modalities=["text"],
                prompt_cache_key="k", top_logprobs=0, logit_bias={}, metadata={})
    req = valid_anthropic_request(chat_to_messages_request(valid_chat_request(body)))
    assert req["metadata"] == {"user_id": "user-7"} and req["top_k"] == 3
    assert req["stop_sequences"] == ["END", "STOP"] and req["output_config"] == {"effort": "medium"}
    assert req["service_tier"] == "standard_only"
    assert chat_request_uncarried(body) == []


@pytest.mark.parametrize("effort, expected", [
    ("none", {"thinking": {"type": "disabled"}}), ("minimal", {"output_config": {"effort": "low"}}),
    ("xhigh", {"output_config": {"effort": "xhigh"}})])
def test_reasoning_effort(effort, expected):
    req = chat_to_messages_request(chat(reasoning_effort=effort))
    assert {k: req[k] for k in expected} == expected


@pytest.mark.parametrize("fields, names", [
    ({"n": 2}, ["n"]), ({"logprobs": True, "top_logprobs": 3}, ["logprobs", "top_logprobs"]),
    ({"logit_bias": {"50256": -100}}, ["logit_bias"]), ({"presence_penalty": 0.5}, ["presence_penalty"]),
    ({"frequency_penalty": -1}, ["frequency_penalty"]), ({"seed": 0}, ["seed"]),
    ({"audio": {"voice": "alloy", "format": "wav"}, "modalities": ["text", "audio"]}, ["audio", "modalities"]),
    ({"prediction": {"type": "content", "content": "x"}}, ["prediction"]),
    ({"web_search_options": {}}, ["web_search_options"]), ({"store": True}, ["store"]),
    ({"verbosity": "low"}, ["verbosity"]),
    ({"service_tier": "flex"}, ["service_tier"]), ({"reasoning_effort": "extreme"}, ["reasoning_effort"]),
    ({"user": "a", "safety_identifier": "b"}, ["safety_identifier"]),
    ({"response_format": {"type": "structural_tag"}}, ["response_format"]),
    ({"a_later_field": True}, ["a_later_field"]),
])
def test_what_a_messages_request_cannot_carry_is_named(fields, names):
    assert chat_request_uncarried(chat(**fields)) == names


def test_the_calls_tags_are_no_loss_and_not_sent_as_a_model_field():
    """`metadata` annotates the call (the gateway keeps it); a Messages request's own `metadata` is
    `user_id` alone, made from `user`."""
    body = chat(metadata={"app": "billing", "team": "a"})
    assert chat_request_uncarried(body) == []
    assert "metadata" not in chat_to_messages_request(body)
    assert chat_to_messages_request({**body, "user": "u-1"})["metadata"] == {"user_id": "u-1"}


def test_message_parts_with_no_anthropic_counterpart_are_named_and_left_out():
    body = chat(messages=[
        {"role": "system", "content": "S", "name": "boss"},
        {"role": "user", "name": "ada", "content": [
            {"type": "text", "text": "Listen and read."},
            {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
            {"type": "file", "file": {"file_id": "file-1"}},
            {"type": "file", "file": {"file_data": f"data:application/pdf;base64,{PDF}", "filename": "a.pdf"}}]}])
    req = valid_anthropic_request(chat_to_messages_request(body))
    assert req["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "Listen and read."},
        {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
         "title": "a.pdf"}]}]
    assert chat_request_uncarried(body) == ["messages.0.name", "messages.1.name",
                                            "messages.1.content.1 (input_audio)", "messages.1.content.2 (file)"]


def test_a_tool_message_of_several_parts_stays_block_by_block():
    body = chat(messages=[
        {"role": "user", "content": "x"},
        {"role": "assistant", "content": None, "reasoning_content": "let me see",
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1",
         "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}])
    req = valid_anthropic_request(chat_to_messages_request(body))
    assert req["messages"][1]["content"] == [{"type": "tool_use", "id": "c1", "name": "f", "input": {}}]
    assert req["messages"][2]["content"] == [{"type": "tool_result", "tool_use_id": "c1", "content": [
        {"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]
    assert chat_request_uncarried(body) == []


SCHEMA_FORMAT = {"type": "json_schema", "json_schema": {"name": "Person", "schema": PERSON, "strict": True}}


def test_a_json_schema_goes_as_output_config_when_the_server_says_so():
    body = chat(response_format=SCHEMA_FORMAT, reasoning_effort="low")
    req = valid_anthropic_request(chat_to_messages_request(body, structured_output="output_config"))
    assert req["output_config"] == {"effort": "low", "format": {"type": "json_schema", "schema": PERSON}}
    assert "tools" not in req and output_tool_name(body, "output_config") is None


def test_a_json_schema_goes_as_a_forced_tool_by_default():
    body = chat(response_format=SCHEMA_FORMAT)
    req = valid_anthropic_request(chat_to_messages_request(body))
    assert req["tools"] == [{"name": "Person", "description": "Give your answer as this tool's input: the input is "
                                                              "the reply, in the JSON it describes.",
                             "input_schema": PERSON}]
    assert req["tool_choice"] == {"type": "tool", "name": "Person"} and "output_config" not in req
    assert output_tool_name(body) == "Person"


@pytest.mark.parametrize("mode", ["tool", "output_config"])
def test_a_json_object_always_goes_as_a_forced_tool(mode):
    body = chat(response_format={"type": "json_object"})
    req = valid_anthropic_request(chat_to_messages_request(body, structured_output=mode))
    assert req["tools"][0]["name"] == "json_output" and req["tools"][0]["input_schema"] == {"type": "object"}
    assert req["tool_choice"] == {"type": "tool", "name": "json_output"}


@pytest.mark.parametrize("choice, expected", [
    (None, {"type": "any"}), ("auto", {"type": "any"}), ("required", {"type": "any"}),
    ("none", {"type": "tool", "name": "json_output"}),
    ({"type": "function", "function": {"name": "Person"}}, {"type": "tool", "name": "Person"})])
def test_client_tools_and_a_response_format_together(choice, expected):
    """The model may call a client tool or answer through the output tool, whose name moves
    aside when a client tool holds the schema's name."""
    tools = [{"type": "function", "function": {"name": "Person", "parameters": WEATHER_SCHEMA}}]
    body = chat(tools=tools, response_format=SCHEMA_FORMAT, **({"tool_choice": choice} if choice else {}))
    req = valid_anthropic_request(chat_to_messages_request(body))
    assert [t["name"] for t in req["tools"]] == ["Person", "json_output"]
    assert req["tool_choice"] == expected


def test_requests_round_trip_with_the_new_fields():
    body = anthropic(top_k=4, metadata={"user_id": "u"}, stop_sequences=["X"],
                     output_config={"effort": "high", "format": {"type": "json_schema", "schema": PERSON}})
    chat_form = messages_to_chat_request(body)
    back = chat_to_messages_request(chat_form, structured_output="output_config")
    assert {k: back[k] for k in ("top_k", "metadata", "stop_sequences", "output_config")} == {
        "top_k": 4, "metadata": {"user_id": "u"}, "stop_sequences": ["X"],
        "output_config": {"effort": "high", "format": {"type": "json_schema", "schema": PERSON}}}
    assert json.loads(json.dumps(back)) == back
