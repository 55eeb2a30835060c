"""The chat form -> Converse (gateway.formats.converse.from_chat), continued: what a Converse request
cannot carry (`lost`, by the client's own field names), what differs by model family (top_k,
reasoning), and malformed input, refused as the Anthropic translation refuses it. Every request built
is validated by botocore's service model and serialized by boto3 as in test_formats_converse.py."""

import pytest

from gateway.formats.anthropic.from_chat import chat_to_messages_request
from gateway.formats.anthropic.to_chat import messages_to_chat_request
from gateway.formats.converse.families import family
from gateway.formats.converse.from_chat import chat_to_converse_request, converse_request_uncarried
from gateway.web.errors import ApiError
from tests.gateway.formats.test_formats_converse import CLAUDE, LLAMA, WEATHER, converse

HI = [{"role": "user", "content": "Hi"}]
GPT_OSS = "openai.gpt-oss-120b-1:0"
NOVA_2 = "us.amazon.nova-2-lite-v1:0"


def lost_of(body, model_id="amazon.nova-lite-v1:0", **options):
    return converse({"model": "m", "messages": HI, **body}, model_id, **options)[1]


def test_a_type_outside_the_openai_sdk_s_is_lost_too():
    body = {"response_format": {"type": "grammar", "grammar": "root ::= x"}}
    assert lost_of(body, openai_typed=False) == ["response_format"]


def test_fields_without_a_place_are_lost_by_name():
    body = {"n": 2, "logprobs": True, "top_logprobs": 3, "presence_penalty": 0.5, "frequency_penalty": 0.1,
            "logit_bias": {"50256": -100}, "seed": 7, "store": True, "modalities": ["text", "audio"],
            "audio": {"voice": "alloy", "format": "mp3"}, "prediction": {"type": "content", "content": "x"},
            "web_search_options": {}, "verbosity": "low"}
    assert lost_of(body) == list(body)


def test_neutral_values_and_hints_are_no_loss():
    body = {"n": 1, "logprobs": False, "top_logprobs": 0, "presence_penalty": 0, "frequency_penalty": 0,
            "logit_bias": {}, "store": False, "modalities": ["text"], "seed": None, "temperature": None,
            "prompt_cache_key": "k", "prompt_cache_retention": "24h", "metadata": {"team": "a"},
            "parallel_tool_calls": True, "tools": [WEATHER], "service_tier": "auto", "stream": False}
    assert lost_of(body) == []


def test_message_keys_and_content_parts_without_a_place():
    messages = [
        {"role": "user", "name": "alice", "content": [
            {"type": "text", "text": "Look"},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
            {"type": "image_url", "image_url": {"url": "data:image/bmp;base64,Qk0="}},
            {"type": "image_url", "image_url": {"url": "s3://bucket/cat"}},
            {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "aiff"}},
            {"type": "file", "file": {"file_id": "file-abc"}},
            {"type": "file", "file": {"file_data": "data:application/zip;base64,UEsDBA==", "filename": "a.zip"}}]}]
    req, lost = converse({"model": "m", "messages": messages}, openai_typed=False)  # aiff, bmp: not OpenAI's
    assert lost == ["messages.0.name", "messages.0.content.1.image_url (url)",
                     "messages.0.content.2.image_url (image/bmp)", "messages.0.content.3.image_url (s3)",
                     "messages.0.content.4 (input_audio)", "messages.0.content.5 (file)",
                     "messages.0.content.6.file (application/zip)"]
    assert req["messages"] == [{"role": "user", "content": [{"text": "Look"}]}]


def test_what_the_family_or_converse_cannot_say_is_lost():
    assert lost_of({"top_k": 40}, LLAMA) == ["top_k"]
    assert lost_of({"reasoning_effort": "high"}, LLAMA) == ["reasoning_effort"]
    assert lost_of({"reasoning_effort": "none"}, GPT_OSS) == ["reasoning_effort"]  # it always reasons
    assert lost_of({"tools": [WEATHER], "parallel_tool_calls": False}) == ["parallel_tool_calls"]
    assert lost_of({"service_tier": "scale"}) == ["service_tier"]
    assert lost_of({"user": "<alice>"}) == ["user"]  # not of requestMetadata's pattern
    assert lost_of({"user": "a", "safety_identifier": "b"}) == ["safety_identifier"]


def test_uncarried_names_the_same_fields():
    body = {"model": "m", "messages": HI, "n": 3, "top_k": 5}
    assert converse_request_uncarried(body, model_id=LLAMA) == ["n", "top_k"]
    assert converse_request_uncarried(body, model_id="amazon.nova-micro-v1:0") == ["n"]


@pytest.mark.parametrize(("model_id", "kind"), [
    ("amazon.nova-pro-v1:0", "nova"), ("us.amazon.nova-2-lite-v1:0", "nova-2"), (CLAUDE, "claude"),
    ("arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.meta.llama3-1-8b-instruct-v1:0", "other"),
    ("openai.gpt-oss-20b-1:0", "gpt-oss"), ("mistral.mixtral-8x7b-instruct-v0:1", "mistral"),
    ("mistral.mistral-large-2407-v1:0", "other"), ("cohere.command-r-plus-v1:0", "cohere-command-r"),
    ("deepseek.r1-v1:0", "other"), (None, "other")])
def test_the_family_is_read_from_the_model_id(model_id, kind):
    assert family(model_id) == kind


@pytest.mark.parametrize(("model_id", "fields"), [
    (CLAUDE, {"top_k": 40}), ("amazon.nova-pro-v1:0", {"inferenceConfig": {"topK": 40}}),
    ("mistral.mistral-7b-instruct-v0:2", {"top_k": 40}), ("cohere.command-r-v1:0", {"k": 40})])
def test_top_k_in_the_family_s_own_field(model_id, fields):
    req, lost = converse({"model": "m", "messages": HI, "top_k": 40}, model_id)
    assert req["additionalModelRequestFields"] == fields and lost == []


@pytest.mark.parametrize(("model_id", "effort", "output", "fields"), [
    (CLAUDE, "high", {"effort": "high"}, None), (CLAUDE, "minimal", {"effort": "low"}, None),
    (CLAUDE, "none", None, {"thinking": {"type": "disabled"}}),
    (NOVA_2, "medium", None, {"reasoningConfig": {"type": "enabled", "maxReasoningEffort": "medium"}}),
    (NOVA_2, "xhigh", None, {"reasoningConfig": {"type": "enabled", "maxReasoningEffort": "high"}}),
    (NOVA_2, "none", None, None),  # Nova 2 reasons only when asked
    (GPT_OSS, "low", None, {"reasoning_effort": "low"}), (GPT_OSS, "max", None, {"reasoning_effort": "high"})])
def test_reasoning_effort_by_family(model_id, effort, output, fields):
    req, lost = converse({"model": "m", "messages": HI, "reasoning_effort": effort}, model_id)
    assert req.get("outputConfig") == output and req.get("additionalModelRequestFields") == fields and lost == []


def test_top_k_and_reasoning_share_the_model_fields():
    req, _ = converse({"model": "m", "messages": HI, "top_k": 5, "reasoning_effort": "low"}, NOVA_2)
    assert req["additionalModelRequestFields"] == {
        "inferenceConfig": {"topK": 5}, "reasoningConfig": {"type": "enabled", "maxReasoningEffort": "low"}}


def test_the_model_id_defaults_to_the_body_s_model():
    req = chat_to_converse_request({"model": "amazon.nova-lite-v1:0", "messages": HI, "top_k": 3})
    assert req["additionalModelRequestFields"] == {"inferenceConfig": {"topK": 3}}


MALFORMED = [
    {"model": "m"},
    {"model": "m", "messages": []},
    {"model": "m", "messages": [{"role": "robot", "content": "Hi"}]},
    {"model": "m", "messages": [{"role": "system", "content": "Only a system prompt"}]},
    {"model": "m", "messages": [{"role": "user", "content": 5}]},
    {"model": "m", "messages": [{"role": "user", "content": [{"text": "no type"}]}]},
    {"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "ftp://x"}}]}]},
    {"model": "m", "messages": [{"role": "system", "content": [{"type": "image_url", "image_url": {"url": "x"}}]},
                                *HI]},
    {"model": "m", "messages": [*HI, {"role": "assistant", "content": None, "tool_calls": {"id": "c"}}]},
    {"model": "m", "messages": [*HI, {"role": "assistant", "tool_calls": [{"id": "c", "function": {}}]}]},
    {"model": "m", "messages": [*HI, {"role": "tool", "content": "r"}]},
    {"model": "m", "messages": HI, "tools": [{"type": "web_search"}]},
    {"model": "m", "messages": HI, "tools": [WEATHER], "tool_choice": "sometimes"},
]


@pytest.mark.parametrize("body", MALFORMED)
def test_malformed_input_is_refused_as_the_anthropic_translation_refuses_it(body):
    with pytest.raises(ApiError) as anthropic:
        chat_to_messages_request(body)
    with pytest.raises(ApiError) as bedrock:
        chat_to_converse_request(body)
    assert (bedrock.value.status, bedrock.value.code) == (400, "invalid_request_error")
    assert bedrock.value.message == anthropic.value.message


def test_malformed_audio_is_refused():
    body = {"model": "m", "messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}]}
    with pytest.raises(ApiError) as info:
        chat_to_converse_request(body)
    assert info.value.message == "messages.0.content.0.input_audio.data: must be base64 audio."


def test_a_messages_request_reaches_converse_through_the_chat_form():
    body = {"model": "m", "max_tokens": 50, "system": [{"type": "text", "text": "Rules.",
                                                        "cache_control": {"type": "ephemeral"}}],
            "stop_sequences": ["END"], "metadata": {"user_id": "u-1"}, "top_k": 4,
            "tools": [{"name": "weather", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
            "messages": [
                {"role": "user", "content": "Weather?"},
                {"role": "assistant", "content": [{"type": "thinking", "thinking": "hmm", "signature": "s"},
                                                  {"type": "tool_use", "id": "toolu_1", "name": "weather",
                                                   "input": {"city": "Oslo"}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "is_error": True,
                                              "content": [{"type": "text", "text": "down"},
                                                          {"type": "image", "source": {
                                                              "type": "base64", "media_type": "image/png",
                                                              "data": "iVBORw0KGgo="}}]}]}]}
    first = []
    chat = messages_to_chat_request(body, lost=first)
    req, lost = converse(chat, "amazon.nova-pro-v1:0")
    assert first == [] and lost == ["parallel_tool_calls"]
    assert req["system"] == [{"text": "Rules."}]  # the chat form has no place for the mark: no cachePoint
    assert req["messages"][1:] == [
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": "toolu_1", "name": "weather",
                                                       "input": {"city": "Oslo"}}}]},
        {"role": "user", "content": [
            {"toolResult": {"toolUseId": "toolu_1", "content": [{"text": "Error: down"}], "status": "error"}},
            {"image": {"format": "png", "source": {"bytes": "iVBORw0KGgo="}}}]}]
    assert req["inferenceConfig"] == {"maxTokens": 50, "stopSequences": ["END"]}
    assert req["additionalModelRequestFields"] == {"inferenceConfig": {"topK": 4}}
    assert req["requestMetadata"] == {"user": "u-1"} and req["toolConfig"]["toolChoice"] == {"any": {}}
