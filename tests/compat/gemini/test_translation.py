"""The Gemini surface's translation to the chat form and back (gateway/formats/gemini/to_chat.py,
replies.py), on the fields the SDK tests do not reach."""

import pytest

from gateway.formats.gemini.replies import ChatToGeminiStream, chat_to_gemini_response, usage_metadata
from gateway.formats.gemini.to_chat import gemini_to_chat_request
from gateway.web.errors import ApiError

USER = {"role": "user", "parts": [{"text": "hi"}]}


def translate(**fields) -> tuple[dict, list[str]]:
    lost: list[str] = []
    return gemini_to_chat_request({"contents": [USER], **fields}, "oa/echo-1", lost=lost), lost


def test_generation_config_becomes_the_chat_forms_fields():
    chat, lost = translate(generationConfig={
        "temperature": 0.2, "topP": 0.9, "topK": 40, "maxOutputTokens": 50, "stopSequences": ["END"],
        "candidateCount": 2, "seed": 7, "presencePenalty": 0.1, "frequency_penalty": 0.3,
        "responseLogprobs": True, "logprobs": 3, "responseModalities": ["TEXT"],
        "thinkingConfig": {"thinkingBudget": 4096, "includeThoughts": True}})
    assert lost == []
    assert {k: v for k, v in chat.items() if k not in ("model", "messages")} == {
        "temperature": 0.2, "top_p": 0.9, "top_k": 40, "max_tokens": 50, "stop": ["END"], "n": 2, "seed": 7,
        "presence_penalty": 0.1, "frequency_penalty": 0.3, "logprobs": True, "top_logprobs": 3,
        "reasoning_effort": "medium"}


@pytest.mark.parametrize(("thinking", "effort"), [
    ({"thinkingLevel": "HIGH"}, "high"), ({"thinkingLevel": "low"}, "low"), ({"thinkingBudget": 0}, "none"),
    ({"thinkingBudget": 1024}, "low"), ({"thinkingBudget": 32768}, "high"), ({"thinkingBudget": -1}, None)])
def test_thinking_becomes_a_reasoning_effort(thinking, effort):
    chat, _ = translate(generationConfig={"thinkingConfig": thinking})
    assert chat.get("reasoning_effort") == effort


def test_structured_output_becomes_a_json_schema_response_format():
    schema = {"type": "OBJECT", "properties": {"name": {"type": "STRING", "nullable": True},
                                               "tags": {"type": "ARRAY", "items": {"type": "STRING"}}},
              "required": ["name"], "propertyOrdering": ["name", "tags"]}
    chat, lost = translate(generationConfig={"responseMimeType": "application/json", "responseSchema": schema})
    assert chat["response_format"] == {"type": "json_schema", "json_schema": {"name": "response", "schema": {
        "type": "object", "properties": {"name": {"type": ["string", "null"]},
                                         "tags": {"type": "array", "items": {"type": "string"}}},
        "required": ["name"]}}}
    json_schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    chat, _ = translate(generationConfig={"responseMimeType": "application/json", "responseJsonSchema": json_schema})
    assert chat["response_format"]["json_schema"]["schema"] == json_schema
    chat, _ = translate(generationConfig={"responseMimeType": "application/json"})
    assert chat["response_format"] == {"type": "json_object"}
    _, lost = translate(generationConfig={"responseMimeType": "text/x.enum"})
    assert lost == ["generationConfig.responseMimeType"]


def test_what_the_chat_form_cannot_carry_is_named():
    _, lost = translate(cachedContent="cachedContents/1", tools=[{"googleSearch": {}}],
                        safetySettings=[{"category": "HARM_CATEGORY_HATE_SPEECH", "threshold": "BLOCK_LOW_AND_ABOVE"}],
                        generationConfig={"responseModalities": ["AUDIO"], "speechConfig": {"voiceConfig": {}}})
    assert lost == ["cachedContent", "generationConfig.responseModalities", "generationConfig.speechConfig",
                    "tools[0].googleSearch", "safetySettings"]
    _, lost = translate(safetySettings=[{"category": "HARM_CATEGORY_HATE_SPEECH", "threshold": "BLOCK_NONE"}],
                        labels={"team": "a"})
    assert lost == []


def test_a_conversation_with_function_calls_pairs_each_response_with_its_call():
    contents = [
        {"role": "user", "parts": [{"text": "weather in two cities?"}]},
        {"role": "model", "parts": [{"text": "I'll look.", "thought": True}, {"thoughtSignature": "abc"},
                                    {"functionCall": {"name": "weather", "args": {"city": "Porto"}}},
                                    {"functionCall": {"name": "weather", "args": {"city": "Lisbon"}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "weather", "response": {"sky": "rain"}}},
                                   {"functionResponse": {"name": "weather", "response": {"sky": "sun"}}},
                                   {"text": "and so?"}]},
    ]
    tools = [{"functionDeclarations": [{"name": "weather", "description": "Weather",
                                        "parameters": {"type": "OBJECT", "properties": {"city": {"type": "STRING"}}}}]}]
    lost: list[str] = []
    chat = gemini_to_chat_request({"systemInstruction": {"parts": [{"text": "Be brief."}]}, "contents": contents,
                                   "tools": tools, "toolConfig": {"functionCallingConfig": {
                                       "mode": "ANY", "allowedFunctionNames": ["weather"]}}}, "m", lost=lost)
    assert lost == []
    assert chat["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "weather in two cities?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Porto"}'}},
            {"id": "call_2", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Lisbon"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": '{"sky": "rain"}'},
        {"role": "tool", "tool_call_id": "call_2", "content": '{"sky": "sun"}'},
        {"role": "user", "content": "and so?"},
    ]
    assert chat["tools"] == [{"type": "function", "function": {
        "name": "weather", "description": "Weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
    assert chat["tool_choice"] == {"type": "function", "function": {"name": "weather"}}


def test_inline_images_and_documents_become_chat_parts():
    chat, lost = translate(contents=[{"role": "user", "parts": [
        {"text": "what is this?"}, {"inlineData": {"mimeType": "image/png", "data": "iVBO"}},
        {"inline_data": {"mime_type": "application/pdf", "data": "JVBE"}},
        {"inlineData": {"mimeType": "audio/wav", "data": "UklG"}}]}])
    assert chat["messages"][0]["content"] == [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO"}},
        {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBE", "filename": "document.pdf"}}]
    assert lost == ["contents[0].parts[3].inlineData (audio/wav)"]


@pytest.mark.parametrize("body", [{}, {"contents": []}, {"contents": [{"role": "system", "parts": []}]},
                                  {"contents": [USER], "generationConfig": {"temperature": "hot"}}])
def test_a_malformed_request_is_a_400(body):
    with pytest.raises(ApiError) as exc:
        gemini_to_chat_request(body, "m", lost=[])
    assert exc.value.status == 400


COMPLETION = {"id": "chatcmpl-1", "model": "oa/echo-1", "usage": {
    "prompt_tokens": 10, "completion_tokens": 8, "total_tokens": 18,
    "prompt_tokens_details": {"cached_tokens": 4}, "completion_tokens_details": {"reasoning_tokens": 5}}}


def test_a_whole_reply_with_a_tool_call_a_length_stop_and_a_refusal():
    completion = {**COMPLETION, "choices": [
        {"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": "Looking.",
                                                                "reasoning_content": "hmm", "tool_calls": [
            {"id": "call_9", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Porto"}'}}]}},
        {"index": 1, "finish_reason": "length", "message": {"role": "assistant", "content": "Trunc"}},
        {"index": 2, "finish_reason": "content_filter", "message": {"role": "assistant", "content": None,
                                                                    "refusal": "I can't help with that."}}]}
    assert chat_to_gemini_response(completion) == {
        "candidates": [
            {"content": {"role": "model", "parts": [
                {"text": "hmm", "thought": True}, {"text": "Looking."},
                {"functionCall": {"name": "weather", "args": {"city": "Porto"}, "id": "call_9"}}]},
             "index": 0, "finishReason": "STOP"},
            {"content": {"role": "model", "parts": [{"text": "Trunc"}]}, "index": 1, "finishReason": "MAX_TOKENS"},
            {"content": {"role": "model", "parts": []}, "index": 2, "finishReason": "SAFETY",
             "finishMessage": "I can't help with that."}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 3, "totalTokenCount": 18,
                          "thoughtsTokenCount": 5, "cachedContentTokenCount": 4},
        "modelVersion": "oa/echo-1", "responseId": "chatcmpl-1"}


def test_a_stream_sends_text_as_it_comes_and_a_tool_call_whole_at_its_end():
    stream = ChatToGeminiStream("oa/echo-1", "r1")
    out = stream.feed({"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hi"}}]})
    assert out == [{"candidates": [{"content": {"role": "model", "parts": [{"text": "Hi"}]}, "index": 0}],
                    "modelVersion": "oa/echo-1", "responseId": "r1"}]
    assert stream.feed({"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "id": "call_1", "function": {"name": "weather", "arguments": '{"ci'}}]}}]}) == []
    assert stream.feed({"choices": [{"index": 0, "delta": {"tool_calls": [
        {"index": 0, "function": {"arguments": 'ty": "Porto"}'}}]}}]}) == []
    out = stream.feed({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    assert out[0]["candidates"][0]["content"]["parts"] == [
        {"functionCall": {"name": "weather", "args": {"city": "Porto"}, "id": "call_1"}}]
    [last] = stream.finish({"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5})
    assert last["candidates"] == [{"content": {"role": "model", "parts": []}, "index": 0, "finishReason": "STOP"}]
    assert last["usageMetadata"] == usage_metadata({"prompt_tokens": 3, "completion_tokens": 2})


def test_a_streamed_refusal_ends_the_candidate_for_safety():
    stream = ChatToGeminiStream("m", "r")
    assert stream.feed({"choices": [{"index": 0, "delta": {"refusal": "No."}}]}) == []
    stream.feed({"choices": [{"index": 0, "delta": {}, "finish_reason": "content_filter"}]})
    [last] = stream.finish({"prompt_tokens": 1, "completion_tokens": 1})
    assert last["candidates"][0]["finishReason"] == "SAFETY" and last["candidates"][0]["finishMessage"] == "No."
