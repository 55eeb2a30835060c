"""The neutral chat form -> a Bedrock Converse request (gateway.formats.converse.from_chat): every
request is validated by botocore's own service model and serialized by boto3's client, whose JSON
must be the body the gateway sends. What the request leaves out, the model families and malformed
input are in test_formats_converse_fields.py."""

import json

from gateway.formats.converse.from_chat import chat_to_converse_request
from tests.gateway.formats.anthropic_support import WEATHER_SCHEMA, valid_chat_request
from tests.gateway.formats.converse_support import NOVA, boto3_body, valid_converse_request

PNG = "iVBORw0KGgo="
PDF = "JVBERi0xLjQK"
LLAMA = "us.meta.llama3-3-70b-instruct-v1:0"
CLAUDE = "global.anthropic.claude-sonnet-4-5-20250929-v1:0"
WEATHER = {"type": "function", "function": {"name": "weather", "description": "The weather.",
                                             "parameters": WEATHER_SCHEMA}}
WEATHER_TOOL_SPEC = {"name": "weather", "description": "The weather.", "inputSchema": {"json": WEATHER_SCHEMA}}
CALL = {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Paris"}'}}


def converse(body, model_id=NOVA, *, openai_typed=True, **options):
    """The Converse request and the lost names, after both oracles have had their say (and the OpenAI
    SDK's types on the chat request, unless it holds a value of another server's, `openai_typed`)."""
    lost = []
    req = chat_to_converse_request(valid_chat_request(body) if openai_typed else body, lost=lost,
                                   model_id=model_id, **options)
    valid_converse_request(req, model_id)
    assert boto3_body(req, model_id) == req
    return req, lost


def test_a_plain_request():
    body = {"model": "gw/nova", "max_tokens": 100, "temperature": 0.5, "top_p": 0.9, "stop": ["END", ""],
            "stream": True, "stream_options": {"include_usage": True},
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "developer", "content": "Be kind."},
                         {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
                         {"role": "user", "content": [{"type": "text", "text": "Again"}]}]}
    req, lost = converse(body)
    assert req == {"system": [{"text": "Be brief."}, {"text": "Be kind."}],
                   "messages": [{"role": "user", "content": [{"text": "Hi"}]},
                                {"role": "assistant", "content": [{"text": "Hello"}]},
                                {"role": "user", "content": [{"text": "Again"}]}],
                   "inferenceConfig": {"maxTokens": 100, "temperature": 0.5, "topP": 0.9, "stopSequences": ["END"]}}
    assert lost == []


def test_max_completion_tokens_first_temperature_clamped_and_a_stop_string():
    body = {"model": "m", "max_completion_tokens": 7, "max_tokens": 100, "temperature": 1.6, "stop": "###",
            "messages": [{"role": "user", "content": "Hi"}]}
    req, _ = converse(body)
    assert req["inferenceConfig"] == {"maxTokens": 7, "temperature": 1.0, "stopSequences": ["###"]}


def test_consecutive_messages_of_one_role_merge_and_blank_text_is_left_out():
    body = {"model": "m", "messages": [
        {"role": "user", "content": "One"}, {"role": "user", "content": [{"type": "text", "text": "Two"},
                                                                         {"type": "text", "text": "  "}]},
        {"role": "assistant", "content": ""}, {"role": "assistant", "content": "Three"},
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]}, {"role": "user", "content": ""}]}
    req, _ = converse(body)
    assert req["messages"] == [{"role": "user", "content": [{"text": "One"}, {"text": "Two"}]},
                               {"role": "assistant", "content": [{"text": "Three"}, {"text": "No."}]}]


def test_images_documents_and_audio_go_as_bytes():
    body = {"model": "m", "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}", "detail": "low"}},
        {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{PNG}"}},
        {"type": "image_url", "image_url": {"url": "s3://bucket/photos/cat.JPG"}},
        {"type": "file", "file": {"file_data": f"data:application/pdf;base64,{PDF}", "filename": "Q3 report.v2.pdf"}},
        {"type": "file", "file": {"file_data": f"data:application/pdf;base64,{PDF}", "filename": "Q3 report.v2.pdf"}},
        {"type": "file", "file": {"file_data": f"data:text/csv;base64,{PDF}"}},
        {"type": "file", "file": {"file_data": f"data:image/webp;base64,{PNG}", "filename": "x.webp"}},
        {"type": "input_audio", "input_audio": {"data": PNG, "format": "wav"}},
        {"type": "text", "text": "What are these?"}]}]}
    req, lost = converse(body)
    assert req["messages"][0]["content"] == [
        {"image": {"format": "png", "source": {"bytes": PNG}}},
        {"image": {"format": "jpeg", "source": {"bytes": PNG}}},
        {"image": {"format": "jpeg", "source": {"s3Location": {"uri": "s3://bucket/photos/cat.JPG"}}}},
        {"document": {"format": "pdf", "name": "Q3 report v2", "source": {"bytes": PDF}}},
        {"document": {"format": "pdf", "name": "Q3 report v2 (2)", "source": {"bytes": PDF}}},
        {"document": {"format": "csv", "name": "document", "source": {"bytes": PDF}}},
        {"image": {"format": "webp", "source": {"bytes": PNG}}},
        {"audio": {"format": "wav", "source": {"bytes": PNG}}},
        {"text": "What are these?"}]
    assert lost == []


def test_a_tool_round_trip():
    body = {"model": "m", "tools": [WEATHER], "tool_choice": "auto", "messages": [
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {"role": "assistant", "content": "Let me look.", "tool_calls": [
            CALL, {"id": "functions.weather:1", "type": "function",
                   "function": {"name": "weather", "arguments": "not json"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "Sunny"},
        {"role": "tool", "tool_call_id": "functions.weather:1", "content": [{"type": "text", "text": "Error: no"},
                                                                           {"type": "text", "text": "Rome?"}]},
        {"role": "user", "content": "And tomorrow?"}]}
    req, lost = converse(body)
    assert req["toolConfig"] == {"tools": [{"toolSpec": {"name": "weather", "description": "The weather.",
                                                         "inputSchema": {"json": WEATHER_SCHEMA}}}],
                                 "toolChoice": {"auto": {}}}
    assert req["messages"][1:] == [
        {"role": "assistant", "content": [
            {"text": "Let me look."},
            {"toolUse": {"toolUseId": "call_1", "name": "weather", "input": {"city": "Paris"}}},
            {"toolUse": {"toolUseId": "functions.weather:1", "name": "weather", "input": {}}}]},
        {"role": "user", "content": [
            {"toolResult": {"toolUseId": "call_1", "content": [{"text": "Sunny"}]}},
            {"toolResult": {"toolUseId": "functions.weather:1", "content": [{"text": "Error: no"}, {"text": "Rome?"}],
                            "status": "error"}},
            {"text": "And tomorrow?"}]}]
    assert lost == []


def test_tool_results_lead_their_turn_ids_are_made_converse_s_and_no_status_where_the_family_takes_none():
    body = {"model": "m", "tools": [WEATHER], "messages": [
        {"role": "user", "content": "Weather?"}, {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "user", "content": "Quickly."}, {"role": "tool", "tool_call_id": "call_1", "content": "Error: x"},
        {"role": "tool", "tool_call_id": "call_1", "content": ""}]}
    body["messages"][1]["tool_calls"] = [{**CALL, "id": "call 1/ü"}]
    body["messages"][3]["tool_call_id"] = body["messages"][4]["tool_call_id"] = "call 1/ü"
    req, _ = converse(body, LLAMA)
    assert req["messages"][1]["content"][0]["toolUse"]["toolUseId"] == "call_1__"
    assert req["messages"][2] == {"role": "user", "content": [
        {"toolResult": {"toolUseId": "call_1__", "content": [{"text": "Error: x"}]}},
        {"toolResult": {"toolUseId": "call_1__", "content": [{"text": "(no output)"}]}},
        {"text": "Quickly."}]}


def test_tool_choices():
    base = {"model": "m", "tools": [WEATHER], "messages": [{"role": "user", "content": "Hi"}]}
    assert converse({**base, "tool_choice": "required"})[0]["toolConfig"]["toolChoice"] == {"any": {}}
    named = {"type": "function", "function": {"name": "weather"}}
    assert converse({**base, "tool_choice": named})[0]["toolConfig"]["toolChoice"] == {"tool": {"name": "weather"}}
    assert "toolChoice" not in converse(base)[0]["toolConfig"]
    req, lost = converse({**base, "tool_choice": "none"})
    assert "toolConfig" not in req and lost == []


def test_without_tools_to_offer_the_tool_history_is_told_as_text():
    history = [{"role": "user", "content": "Weather?"}, {"role": "assistant", "content": None, "tool_calls": [CALL]},
               {"role": "tool", "tool_call_id": "call_1", "content": "Sunny"}, {"role": "user", "content": "Sum up."}]
    for body in ({"model": "m", "messages": history}, {"model": "m", "messages": history, "tools": [WEATHER],
                                                        "tool_choice": "none"}):
        req, lost = converse(body)
        assert "toolConfig" not in req and lost == []
        assert req["messages"][1:] == [
            {"role": "assistant", "content": [{"text": '[tool call call_1: weather {"city": "Paris"}]'}]},
            {"role": "user", "content": [{"text": "[tool result call_1 of weather]\nSunny"}, {"text": "Sum up."}]}]


def test_cache_control_marks_become_cache_points_where_the_family_caches():
    marked = {"type": "ephemeral"}
    body = {"model": "m", "tools": [{**WEATHER, "cache_control": {"type": "ephemeral", "ttl": "1h"}}], "messages": [
        {"role": "system", "content": [{"type": "text", "text": "Long rules.", "cache_control": marked},
                                       {"type": "text", "text": "More."}]},
        {"role": "user", "content": [{"type": "text", "text": "Doc", "cache_control": {"type": "ephemeral",
                                                                                        "ttl": "1h"}},
                                     {"type": "text", "text": "Q"}]},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1",
         "content": [{"type": "text", "text": "Sunny", "cache_control": marked}]},
        {"role": "user", "content": "Thanks", "cache_control": marked}]}
    req, lost = converse(body)  # Nova: points in system and messages, no ttl, none among the tools
    point = {"cachePoint": {"type": "default"}}
    assert req["system"] == [{"text": "Long rules."}, point, {"text": "More."}]
    assert req["messages"][0]["content"] == [{"text": "Doc"}, point, {"text": "Q"}]
    assert req["messages"][2]["content"] == [
        {"toolResult": {"toolUseId": "call_1", "content": [{"text": "Sunny"}]}}, point, {"text": "Thanks"}, point]
    assert req["toolConfig"]["tools"] == [{"toolSpec": WEATHER_TOOL_SPEC}]
    claude, _ = converse(body, CLAUDE)  # Claude: the ttl, and points among the tools
    assert claude["messages"][0]["content"][1] == {"cachePoint": {"type": "default", "ttl": "1h"}}
    assert claude["toolConfig"]["tools"][1] == {"cachePoint": {"type": "default", "ttl": "1h"}}
    llama, llama_lost = converse(body, LLAMA)  # no caching: left out without refusal
    assert "cachePoint" not in json.dumps(llama) and lost == llama_lost == []


def test_a_json_schema_goes_by_a_forced_tool_by_default():
    fmt = {"type": "json_schema", "json_schema": {"name": "weather_report", "schema": WEATHER_SCHEMA}}
    req, lost = converse({"model": "m", "response_format": fmt, "messages": [{"role": "user", "content": "Hi"}]})
    assert req["toolConfig"] == {"tools": [{"toolSpec": {
        "name": "weather_report", "inputSchema": {"json": WEATHER_SCHEMA},
        "description": "Give your answer as this tool's input: the input is the reply, in the JSON it describes."}}],
        "toolChoice": {"tool": {"name": "weather_report"}}}
    assert "outputConfig" not in req and lost == []
    req, _ = converse({"model": "m", "response_format": fmt, "tools": [WEATHER], "tool_choice": "auto",
                       "messages": [{"role": "user", "content": "Hi"}]})
    assert [t["toolSpec"]["name"] for t in req["toolConfig"]["tools"]] == ["weather", "weather_report"]
    assert req["toolConfig"]["toolChoice"] == {"any": {}}


def test_a_json_schema_in_converse_s_own_output_config_and_a_json_object_by_tool():
    fmt = {"type": "json_schema", "json_schema": {"name": "report", "description": "A report.",
                                                  "schema": WEATHER_SCHEMA, "strict": True}}
    req, _ = converse({"model": "m", "response_format": fmt, "messages": [{"role": "user", "content": "Hi"}]},
                      structured_output="output_config")
    assert req["outputConfig"] == {"textFormat": {"type": "json_schema", "structure": {"jsonSchema": {
        "schema": '{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}',
        "name": "report", "description": "A report."}}}}
    assert "toolConfig" not in req
    req, _ = converse({"model": "m", "response_format": {"type": "json_object"},
                       "messages": [{"role": "user", "content": "Hi"}]}, structured_output="output_config")
    assert req["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"] == {"json": {"type": "object"}}
    assert req["toolConfig"]["toolChoice"] == {"tool": {"name": "json_output"}}


def test_user_and_service_tier():
    body = {"model": "m", "user": "alice@example.com", "service_tier": "priority",
            "messages": [{"role": "user", "content": "Hi"}]}
    req, lost = converse(body)
    assert req["requestMetadata"] == {"user": "alice@example.com"} and req["serviceTier"] == {"type": "priority"}
    req, lost = converse({"model": "m", "service_tier": "auto", "safety_identifier": "s-1",
                          "messages": body["messages"]})
    assert "serviceTier" not in req and req["requestMetadata"] == {"user": "s-1"} and lost == []
