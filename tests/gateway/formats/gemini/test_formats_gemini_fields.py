"""A chat request's settings in a generateContent request (structured output, thinking, Gemini's own
fields), what it cannot carry (named in `lost`, as the client sent it), and malformed input. Every
request built goes through google-genai's oracle (support.py)."""

import pytest

from gateway.formats.anthropic.from_chat import OUTPUT_TOOL_DESCRIPTION
from gateway.formats.gemini import (
    cached_content_name,
    chat_to_gemini_request,
    gemini_output_tool,
    gemini_request_uncarried,
)
from gateway.web.errors import ApiError
from tests.gateway.formats.anthropic_support import WEATHER_SCHEMA
from tests.gateway.formats.gemini.support import LOCATION, PROJECT, gemini, sdk_body

HI = [{"role": "user", "content": "Hi"}]
WEATHER = {"type": "function", "function": {"name": "weather", "parameters": WEATHER_SCHEMA}}


def test_a_json_schema_is_gemini_s_own_structured_output():
    fmt = {"type": "json_schema", "json_schema": {"name": "city", "schema": WEATHER_SCHEMA, "strict": True}}
    req, _ = gemini({"model": "gemini-2.5-flash", "response_format": fmt, "messages": HI}, lost=[])
    assert req["generationConfig"] == {"responseMimeType": "application/json", "responseJsonSchema": WEATHER_SCHEMA}
    assert "tools" not in req  # no forced tool: Gemini holds its output to the schema itself


@pytest.mark.parametrize(("choice", "calling"), [
    (None, {"mode": "ANY"}), ("auto", {"mode": "ANY"}), ("required", {"mode": "ANY"}),
    ("none", {"mode": "ANY", "allowedFunctionNames": ["city"]}),
    ({"type": "function", "function": {"name": "weather"}}, {"mode": "ANY", "allowedFunctionNames": ["weather"]}),
])
def test_before_gemini_3_structured_output_beside_functions_goes_by_a_function(choice, calling):
    """Gemini 2.x refuses JSON output beside function declarations: the schema becomes a function the
    model calls to answer, whose arguments GeminiToChatStream(output_tool=...) gives as the reply."""
    fmt = {"type": "json_schema", "json_schema": {"name": "city", "schema": WEATHER_SCHEMA}}
    body = {"model": "gemini-2.5-flash", "response_format": fmt, "tools": [WEATHER], "messages": HI,
            **({"tool_choice": choice} if choice else {})}
    req, _ = gemini(body, lost=[])
    assert gemini_output_tool(body) == "city" and "generationConfig" not in req
    assert req["tools"] == [{"functionDeclarations": [
        {"name": "weather", "parametersJsonSchema": WEATHER_SCHEMA},
        {"name": "city", "description": OUTPUT_TOOL_DESCRIPTION, "parametersJsonSchema": WEATHER_SCHEMA}]}]
    assert req["toolConfig"] == {"functionCallingConfig": calling}


def test_json_object_beside_functions_and_gemini_3_s_own_structured_output():
    body = {"model": "gemini-2.5-pro", "response_format": {"type": "json_object"}, "tools": [WEATHER], "messages": HI}
    req, _ = gemini(body, lost=[])
    assert req["tools"][0]["functionDeclarations"][1] == {
        "name": "json_output", "description": OUTPUT_TOOL_DESCRIPTION, "parametersJsonSchema": {"type": "object"}}
    body["model"] = "gemini-3-pro-preview"
    req, _ = gemini(body, lost=[])
    assert gemini_output_tool(body) is None and req["generationConfig"] == {"responseMimeType": "application/json"}
    assert req["tools"] == [{"functionDeclarations": [{"name": "weather", "parametersJsonSchema": WEATHER_SCHEMA}]}]


def test_json_object_and_text():
    req, _ = gemini({"model": "gemini-2.5-flash", "response_format": {"type": "json_object"}, "messages": HI}, lost=[])
    assert req["generationConfig"] == {"responseMimeType": "application/json"}
    req, _ = gemini({"model": "gemini-2.5-flash", "response_format": {"type": "text"}, "messages": HI}, lost=[])
    assert "generationConfig" not in req


@pytest.mark.parametrize(("model", "effort", "thinking"), [
    ("gemini-2.5-flash", "low", {"thinkingBudget": 1024, "includeThoughts": True}),
    ("gemini-2.5-flash", "medium", {"thinkingBudget": 8192, "includeThoughts": True}),
    ("gemini-2.5-flash", "high", {"thinkingBudget": 24576, "includeThoughts": True}),
    ("gemini-2.5-flash-lite", "minimal", {"thinkingBudget": 512, "includeThoughts": True}),
    ("gemini-2.5-flash", "none", {"thinkingBudget": 0}),
    ("gemini-2.5-pro", "none", {"thinkingBudget": 128, "includeThoughts": True}),  # a Pro cannot stop thinking
    ("publishers/google/models/gemini-2.5-pro", "xhigh", {"thinkingBudget": 32768, "includeThoughts": True}),
    ("gemini-3-pro-preview", "high", {"thinkingLevel": "HIGH", "includeThoughts": True}),
    ("gemini-3-pro-preview", "minimal", {"thinkingLevel": "LOW", "includeThoughts": True}),
    ("gemini-3-flash-preview", "none", {"thinkingLevel": "MINIMAL", "includeThoughts": True}),
    ("gemini-3-flash-preview", "medium", {"thinkingLevel": "MEDIUM", "includeThoughts": True}),
])
def test_reasoning_effort_as_a_budget_or_a_level_by_the_model(model, effort, thinking):
    req, _ = gemini({"model": model, "reasoning_effort": effort, "messages": HI}, lost=[], openai_typed=False)
    assert req["generationConfig"] == {"thinkingConfig": thinking}


@pytest.mark.parametrize(("model", "effort"), [("gemini-2.0-flash", "low"), ("gemini-1.5-pro", "high"),
                                               ("gemini-2.5-flash", "extreme")])
def test_reasoning_effort_a_model_cannot_take_is_lost(model, effort):
    req, _ = gemini({"model": model, "reasoning_effort": effort, "messages": HI}, lost=["reasoning_effort"],
                    openai_typed=False)
    assert "generationConfig" not in req


def test_gemini_s_own_fields_as_extra_fields():
    safety = [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_ONLY_HIGH"}]
    body = {"model": "gemini-2.5-flash", "messages": HI, "safety_settings": safety, "service_tier": "flex",
            "user": "user_42"}
    req, _ = gemini(body, lost=[], openai_typed=False)
    assert {key: req[key] for key in ("safetySettings", "serviceTier", "labels")} == {
        "safetySettings": safety, "serviceTier": "flex", "labels": {"user": "user_42"}}


@pytest.mark.parametrize("name", ["abc123", "cachedContents/abc123"])
def test_a_cached_content_named_as_google_genai_names_it(name):
    """The Gemini API's name from the request; Vertex AI's completed with the project and location by
    `cached_content_name`, as the SDK completes it."""
    req = chat_to_gemini_request({"model": "gemini-2.5-flash", "messages": HI, "cached_content": name}, lost=[])
    assert req["cachedContent"] == "cachedContents/abc123"
    assert sdk_body({**req, "cachedContent": name})["cachedContent"] == req["cachedContent"]
    on_vertex = cached_content_name(req["cachedContent"], project=PROJECT, location=LOCATION)
    assert on_vertex == f"projects/{PROJECT}/locations/{LOCATION}/cachedContents/abc123"
    assert sdk_body({**req, "cachedContent": name}, vertex=True)["cachedContent"] == on_vertex
    for other in (f"projects/{PROJECT}/locations/{LOCATION}/cachedContents/abc123", "locations/x/cachedContents/y"):
        assert cached_content_name(other, project=PROJECT, location=LOCATION) == sdk_body(
            {**req, "cachedContent": other}, vertex=True)["cachedContent"]


@pytest.mark.parametrize(("tier", "sent"), [("default", "standard"), ("priority", "priority"), ("auto", None)])
def test_service_tiers(tier, sent):
    req, _ = gemini({"model": "gemini-2.5-flash", "messages": HI, "service_tier": tier}, lost=[])
    assert req.get("serviceTier") == sent


def test_a_user_a_label_cannot_hold_is_lost():
    body = {"model": "gemini-2.5-flash", "messages": HI, "user": "Ann@example.com", "safety_identifier": "s1"}
    req, _ = gemini(body, lost=["user", "safety_identifier"])
    assert "labels" not in req
    req, _ = gemini({"model": "gemini-2.5-flash", "messages": HI, "safety_identifier": "s1"}, lost=[])
    assert req["labels"] == {"user": "s1"}


def test_what_gemini_cannot_carry_is_named_as_the_client_sent_it():
    body = {"model": "gemini-2.5-flash", "top_logprobs": 2, "logit_bias": {"50256": -100},
            "store": True, "modalities": ["text", "audio"], "audio": {"voice": "alloy", "format": "wav"},
            "prediction": {"type": "content", "content": "x"}, "web_search_options": {}, "verbosity": "low",
            "service_tier": "scale", "response_format": {"type": "grammar"}, "tools": [WEATHER],
            "parallel_tool_calls": False,
            "messages": [{"role": "user", "name": "ann", "content": [
                {"type": "text", "text": "Hi"}, {"type": "file", "file": {"file_id": "file-abc"}},
                {"type": "input_video", "video_url": "https://example.com/v.mp4"}]}]}
    lost = gemini_request_uncarried(body)
    assert lost == ["logit_bias", "store", "modalities", "audio", "prediction", "web_search_options", "verbosity",
                    "messages.0.name", "messages.0.content.1 (file)", "messages.0.content.2 (input_video)",
                    "parallel_tool_calls", "top_logprobs", "response_format", "service_tier"]


def test_log_probabilities():
    req, _ = gemini({"model": "gemini-2.5-flash", "messages": HI, "logprobs": True, "top_logprobs": 3}, lost=[])
    assert req["generationConfig"] == {"responseLogprobs": True, "logprobs": 3}
    req, _ = gemini({"model": "gemini-2.5-flash", "messages": HI, "logprobs": True}, lost=[])
    assert req["generationConfig"] == {"responseLogprobs": True}


def test_values_that_ask_nothing_are_not_lost():
    body = {"model": "gemini-2.5-flash", "messages": HI, "logprobs": False, "top_logprobs": 0, "logit_bias": {},
            "store": False, "modalities": ["text"], "n": 1, "presence_penalty": 0, "metadata": {"team": "a"},
            "prompt_cache_key": "k", "tools": [WEATHER], "tool_choice": "none", "parallel_tool_calls": False}
    gemini(body, lost=[])


def test_parallel_tool_calls_true_is_what_gemini_does():
    gemini({"model": "gemini-2.5-flash", "messages": HI, "tools": [WEATHER], "parallel_tool_calls": True}, lost=[])


@pytest.mark.parametrize(("body", "message"), [
    ({"messages": []}, "messages: a non-empty list of messages is required."),
    ({"messages": [{"role": "system", "content": "Only rules"}]},
     "messages: at least one user or assistant message with content is required."),
    ({"messages": [{"role": "critic", "content": "x"}]}, "messages.0.role: unsupported role 'critic'."),
    ({"messages": [{"role": "system", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}, *HI]},
     "messages.0.content.0: only text parts are allowed here."),
    ({"messages": HI, "tools": [{"type": "custom", "custom": {"name": "x"}}]},
     "tools.0: only function tools with a name are supported."),
    ({"messages": HI, "tools": [WEATHER], "tool_choice": "sometimes"},
     "tool_choice: must be 'auto', 'required', 'none' or a named function."),
    ({"messages": [*HI, {"role": "assistant", "tool_calls": [{"id": "c", "function": {"arguments": "{}"}}]}]},
     "messages.1.tool_calls.0.function.name: required."),
    ({"messages": [*HI, {"role": "tool", "content": "x"}]}, "messages.1.tool_call_id: required."),
    ({"messages": HI, "cached_content": 5}, "cached_content: must be the name of a cached content, such as "
                                            "'cachedContents/abc'."),
    ({"messages": HI, "safety_settings": {"category": "x"}},
     "safety_settings: must be a list of {category, threshold} objects."),
])
def test_malformed_requests_are_refused_by_name(body, message):
    with pytest.raises(ApiError) as refused:
        chat_to_gemini_request(body, lost=[])
    assert (refused.value.status, refused.value.message) == (400, message)
