"""The neutral chat form -> a Gemini generateContent request (gateway.formats.gemini.from_chat): every
request is read by google-genai's own types and sent by its client to the Gemini API and to Vertex AI,
whose bodies must be the body the gateway builds (support.py). What a request leaves out, the settings
and malformed input are in test_formats_gemini_fields.py."""

import base64
import re

import pytest

from gateway.formats.gemini import GeminiToChatStream, chat_to_gemini_request
from gateway.web.errors import ApiError
from tests.gateway.formats.anthropic_support import WEATHER_SCHEMA
from tests.gateway.formats.gemini.support import gemini

PNG, PDF, WAV = "iVBORw0KGgo=", "JVBERi0xLjQK", "UklGRg=="
WEATHER = {"type": "function", "function": {"name": "weather", "description": "The weather.",
                                             "parameters": WEATHER_SCHEMA}}
CALL = {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Paris"}'}}


def test_a_plain_request():
    body = {"model": "gemini-2.5-flash", "max_tokens": 100, "temperature": 1.5, "top_p": 0.9, "stop": ["END", ""],
            "n": 2, "seed": 7, "presence_penalty": 0.5, "frequency_penalty": -0.5, "stream": True,
            "stream_options": {"include_usage": True},
            "messages": [{"role": "system", "content": "Be brief."}, {"role": "developer", "content": "Be kind."},
                         {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
                         {"role": "user", "content": [{"type": "text", "text": "Again"}, {"type": "text", "text": ""}]},
                         {"role": "user", "content": "And again"}]}
    req, _ = gemini(body, lost=[])
    assert req == {"contents": [{"role": "user", "parts": [{"text": "Hi"}]},
                                {"role": "model", "parts": [{"text": "Hello"}]},
                                {"role": "user", "parts": [{"text": "Again"}, {"text": "And again"}]}],
                   "systemInstruction": {"parts": [{"text": "Be brief."}, {"text": "Be kind."}]},
                   "generationConfig": {"temperature": 1.5, "topP": 0.9, "presencePenalty": 0.5,
                                        "frequencyPenalty": -0.5, "seed": 7, "maxOutputTokens": 100,
                                        "stopSequences": ["END"], "candidateCount": 2}}


def test_max_completion_tokens_a_single_stop_and_top_k():
    body = {"model": "gemini-2.5-flash", "max_tokens": 100, "max_completion_tokens": 50, "stop": "END", "top_k": 40,
            "n": 1, "messages": [{"role": "user", "content": "Hi"}]}
    req, _ = gemini(body, lost=[], openai_typed=False)
    assert req["generationConfig"] == {"topK": 40, "maxOutputTokens": 50, "stopSequences": ["END"]}


def test_media_inline_and_by_url():
    content = [{"type": "text", "text": "Look"},
               {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}", "detail": "high"}},
               {"type": "image_url", "image_url": {"url": "https://example.com/a/cat.JPG?size=2"}},
               {"type": "image_url", "image_url": {"url": "gs://bucket/report.pdf"}},
               {"type": "file", "file": {"file_data": f"data:application/pdf;base64,{PDF}", "filename": "r.pdf"}},
               {"type": "input_audio", "input_audio": {"data": WAV, "format": "wav"}},
               {"type": "image_url", "image_url": {"url": f"data:image/jpg;base64,{PNG}"}}]
    req, _ = gemini({"model": "gemini-2.5-flash", "messages": [{"role": "user", "content": content}]}, lost=[])
    assert req["contents"] == [{"role": "user", "parts": [
        {"text": "Look"}, {"inlineData": {"mimeType": "image/png", "data": PNG}},
        {"fileData": {"mimeType": "image/jpeg", "fileUri": "https://example.com/a/cat.JPG?size=2"}},
        {"fileData": {"mimeType": "application/pdf", "fileUri": "gs://bucket/report.pdf"}},
        {"inlineData": {"mimeType": "application/pdf", "data": PDF}},
        {"inlineData": {"mimeType": "audio/wav", "data": WAV}},
        {"inlineData": {"mimeType": "image/jpeg", "data": PNG}}]}]  # the media type's own name


@pytest.mark.parametrize(("part", "message"), [
    ({"type": "image_url", "image_url": {"url": "https://example.com/cat"}},
     "messages.0.content.0.image_url.url: the media type of 'https://example.com/cat' cannot be told from its "
     "extension, which Gemini needs for a URL; send the data inline (a base64 data URL)."),
    ({"type": "image_url", "image_url": {"url": "ftp://example.com/cat.png"}},
     "messages.0.content.0.image_url.url: must be an http(s) or gs:// URL or a base64 data URL."),
    ({"type": "file", "file": {"file_data": "JVBERi0xLjQK"}},
     "messages.0.content.0.file.file_data: must be an http(s) or gs:// URL or a base64 data URL."),
    ({"type": "input_audio", "input_audio": {"data": WAV}},
     "messages.0.content.0.input_audio.format: must name the audio's format, such as 'wav' or 'mp3'."),
])
def test_media_gemini_cannot_read_is_refused_by_name(part, message):
    with pytest.raises(ApiError) as refused:
        chat_to_gemini_request({"messages": [{"role": "user", "content": [part]}]}, lost=[])
    assert (refused.value.status, refused.value.message) == (400, message)


def test_a_tool_round_trip():
    second = {"id": "call_2", "type": "function", "function": {"name": "time", "arguments": ""}}
    body = {"model": "gemini-2.5-pro", "tools": [WEATHER, {"type": "function", "function": {"name": "time"}}],
            "tool_choice": "auto",
            "messages": [{"role": "user", "content": "Weather and time in Paris?"},
                         {"role": "assistant", "content": "Let me look.", "tool_calls": [CALL, second]},
                         {"role": "tool", "tool_call_id": "call_2", "content": "Error: no clock"},
                         {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "Sunny"}]},
                         {"role": "user", "content": "Thanks"}]}
    req, _ = gemini(body, lost=[])
    assert req["contents"] == [
        {"role": "user", "parts": [{"text": "Weather and time in Paris?"}]},
        {"role": "model", "parts": [{"text": "Let me look."},
                                    {"functionCall": {"name": "weather", "args": {"city": "Paris"}}},
                                    {"functionCall": {"name": "time", "args": {}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "time", "response": {"error": "Error: no clock"}}},
                                   {"functionResponse": {"name": "weather", "response": {"output": "Sunny"}}},
                                   {"text": "Thanks"}]}]
    assert req["tools"] == [{"functionDeclarations": [
        {"name": "weather", "description": "The weather.", "parametersJsonSchema": WEATHER_SCHEMA},
        {"name": "time"}]}]
    assert req["toolConfig"] == {"functionCallingConfig": {"mode": "AUTO"}}


@pytest.mark.parametrize(("choice", "calling"), [
    ("none", {"mode": "NONE"}), ("required", {"mode": "ANY"}),
    ({"type": "function", "function": {"name": "weather"}}, {"mode": "ANY", "allowedFunctionNames": ["weather"]}),
])
def test_tool_choice(choice, calling):
    body = {"model": "gemini-2.5-flash", "tools": [WEATHER], "tool_choice": choice,
            "messages": [{"role": "user", "content": "Weather?"}]}
    assert gemini(body, lost=[])[0]["toolConfig"] == {"functionCallingConfig": calling}


def test_a_tool_choice_without_tools_asks_nothing():
    req, _ = gemini({"model": "gemini-2.5-flash", "tool_choice": "required",
                     "messages": [{"role": "user", "content": "Hi"}]}, lost=[])
    assert "toolConfig" not in req and "tools" not in req


SIGNATURE_BYTES = b"\xfb\xef\xff\x10 a thought's signature"  # base64 with + and /, and padding
SIGNATURE = base64.b64encode(SIGNATURE_BYTES).decode()


def test_a_thought_signature_goes_out_in_the_call_id_and_comes_back_with_the_call():
    stream = GeminiToChatStream("chatcmpl-1", "gem/pro", 1700000000)
    part = {"functionCall": {"name": "weather", "args": {"city": "Paris"}}, "thoughtSignature": SIGNATURE}
    chunks = stream.feed({"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP"}]})
    call = chunks[1]["choices"][0]["delta"]["tool_calls"][0]
    base, signature = call["id"].split("__thought__")
    assert "+" in SIGNATURE and "/" in SIGNATURE and SIGNATURE.endswith("=")
    assert base.startswith("call_") and re.fullmatch(r"[a-zA-Z0-9_-]+", call["id"])  # an id any format takes
    body = {"model": "gemini-3-pro-preview", "tools": [WEATHER],
            "messages": [{"role": "user", "content": "Weather?"},
                         {"role": "assistant", "tool_calls": [{"type": "function", **call}]},
                         {"role": "tool", "tool_call_id": call["id"], "content": "Sunny"}]}
    req, _ = gemini(body, lost=[])  # google-genai sends the signature URL-safe: the same bytes as Gemini's
    assert req["contents"][1] == {"role": "model", "parts": [
        {"functionCall": {"name": "weather", "args": {"city": "Paris"}},
         "thoughtSignature": base64.urlsafe_b64encode(SIGNATURE_BYTES).decode()}]}
    assert req["contents"][2]["parts"] == [{"functionResponse": {"name": "weather", "response": {"output": "Sunny"}}}]


def test_gemini_3_takes_calls_made_elsewhere_with_the_signature_that_skips_its_check():
    """A conversation begun on another model (a fallback, a client's own history) has calls with no
    signature, which Gemini 3 refuses: the first call of each step gets the value Google documents for
    it. Earlier models check nothing, and get nothing."""
    second = {"id": "call_2", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Rome"}'}}
    messages = [{"role": "user", "content": "Weather?"}, {"role": "assistant", "tool_calls": [CALL, second]},
                {"role": "tool", "tool_call_id": "call_1", "content": "Sunny"},
                {"role": "tool", "tool_call_id": "call_2", "content": "Rain"}]
    req, _ = gemini({"model": "gemini-3-flash-preview", "tools": [WEATHER], "messages": messages}, lost=[])
    assert [part.get("thoughtSignature") for part in req["contents"][1]["parts"]] == [
        "skip_thought_signature_validator", None]
    req, _ = gemini({"model": "gemini-2.5-flash", "tools": [WEATHER], "messages": messages}, lost=[])
    assert all("thoughtSignature" not in part for part in req["contents"][1]["parts"])


@pytest.mark.parametrize(("arguments", "field"), [("{not json", "arguments"), ("[1, 2]", "arguments")])
def test_tool_call_arguments_that_are_no_json_object_are_refused_by_name(arguments, field):
    call = {**CALL, "function": {"name": "weather", "arguments": arguments}}
    body = {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "tool_calls": [call]}]}
    with pytest.raises(ApiError) as refused:
        chat_to_gemini_request(body, lost=[])
    assert refused.value.message == (f"messages.1.tool_calls.0.function.{field}: must be a JSON object (as a string) "
                                     "for this model.")


def test_a_tool_result_must_answer_a_call_of_the_conversation():
    body = {"messages": [{"role": "user", "content": "Hi"}, {"role": "tool", "tool_call_id": "call_9", "content": "x"}]}
    with pytest.raises(ApiError) as refused:
        chat_to_gemini_request(body, lost=[])
    assert refused.value.message == ("messages.1.tool_call_id: 'call_9' answers no tool call of an earlier assistant "
                                     "message; this model needs the call to know the function's name.")
