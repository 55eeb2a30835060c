"""Paths of the compatibility surfaces under /v1 (chat completions, responses, messages, embeddings, moderations,
audio, models)."""

from __future__ import annotations

from gateway.openapi.components import ANY_OBJECT, NULLABLE_STRING, json_response, obj, operation, ref

# OpenAI's `metadata`: the call's tags, kept with the call (docs/compatibility.md); anything else is a 400
METADATA_SCHEMA = {"type": "object", "maxProperties": 16, "propertyNames": {"maxLength": 64},
               "additionalProperties": {"type": "string", "maxLength": 512}}

SCHEMAS = {
    "ModelList": obj({"object": {"const": "list"},
                      "data": {"type": "array", "items": obj({"id": {"type": "string"}, "object": {"const": "model"},
                                                              "created": {"type": "integer"},
                                                              "owned_by": {"type": "string"}})}}),
    "ChatCompletionRequest": obj({"model": {"type": "string"}, "messages": {"type": "array", "maxItems": 200}},
                                 {"stream": {"type": "boolean"}, "stream_options": ANY_OBJECT,
                                  "metadata": METADATA_SCHEMA}),
    "ChatCompletion": obj({"id": {"type": "string"}, "object": {"const": "chat.completion"},
                           "created": {"type": "integer"}, "model": {"type": "string"},
                           "choices": {"type": "array", "minItems": 1, "items": obj({
                               "index": {"type": "integer"}, "finish_reason": NULLABLE_STRING,
                               "message": obj({"role": {"const": "assistant"},
                                               "content": NULLABLE_STRING},
                                              {"tool_calls": {"type": "array", "items": obj({
                                                  "id": {"type": "string"}, "type": {"const": "function"},
                                                  "function": obj({"name": {"type": "string"},
                                                                   "arguments": {"type": "string"}})})}})})}},
                          {"usage": obj({"prompt_tokens": {"type": "integer"},
                                         "completion_tokens": {"type": "integer"},
                                         "total_tokens": {"type": "integer"}})}),
    "MessagesRequest": obj({"model": {"type": "string"}, "messages": {"type": "array", "maxItems": 200}},
                           {"max_tokens": {"type": "integer"}, "stream": {"type": "boolean"}}),
    "AnthropicMessage": obj({"id": {"type": "string"}, "type": {"const": "message"}, "role": {"const": "assistant"},
                             "model": {"type": "string"}, "stop_reason": NULLABLE_STRING,
                             "content": {"type": "array", "items": {"oneOf": [
                                 obj({"type": {"const": "text"}, "text": {"type": "string"}}),
                                 obj({"type": {"const": "tool_use"}, "id": {"type": "string"},
                                      "name": {"type": "string"}, "input": ANY_OBJECT}),
                                 obj({"type": {"const": "thinking"}, "thinking": {"type": "string"}}),
                             ]}},
                             "usage": obj({"input_tokens": {"type": "integer"},
                                           "output_tokens": {"type": "integer"}})}),
    "TokenCount": obj({"input_tokens": {"type": "integer"}}),
    "ResponsesRequest": obj({"model": {"type": "string"}}, {"input": {}, "stream": {"type": "boolean"},
                                                            "metadata": METADATA_SCHEMA}),
    "ResponseObject": obj({"id": {"type": "string"}, "object": {"const": "response"},
                           "status": {"enum": ["completed", "incomplete", "failed", "in_progress"]},
                           "model": {"type": "string"}, "created_at": {"type": "integer"},
                           "output": {"type": "array", "items": obj({"type": {"type": "string"}})}}),
    "ResponsesTokenCount": obj({"object": {"type": "string"}, "input_tokens": {"type": "integer"}}),
    # `encoding_format` base64: each vector's little-endian float32 bytes (the openai SDK's default)
    "EmbeddingRequest": obj({"input": {"type": ["string", "array"], "maxItems": 64,
                                       "items": {"type": "string"}}},
                            {"model": {"type": "string"}, "encoding_format": {"enum": ["float", "base64"]},
                             "user": {"type": "string"}}),
    "EmbeddingList": obj({"object": {"const": "list"}, "model": {"type": "string"},
                          "data": {"type": "array", "items": obj({
                              "object": {"const": "embedding"}, "index": {"type": "integer"},
                              "embedding": {"oneOf": [{"type": "array", "items": {"type": "number"}},
                                                      {"type": "string", "contentEncoding": "base64"}]}},
                              closed=True)},
                          "usage": obj({"prompt_tokens": {"type": "integer"}, "total_tokens": {"type": "integer"}},
                                       closed=True)}, closed=True),
    # answered by the caller's group's guardrails (docs/guardrails.md): OpenAI's categories all false, one more
    # per kind of check; `findings` says what was found (never the text)
    "ModerationRequest": obj({"input": {"oneOf": [
        {"type": "string"},
        {"type": "array", "minItems": 1, "maxItems": 64, "items": {"type": "string"}},
        {"type": "array", "minItems": 1, "maxItems": 64, "items": {"oneOf": [
            obj({"type": {"const": "text"}, "text": {"type": "string"}}),
            obj({"type": {"const": "image_url"}, "image_url": ANY_OBJECT})]}}]}},
        {"model": {"type": "string"}}),
    "Moderation": obj({"id": {"type": "string", "pattern": "^modr-"}, "model": {"type": "string"},
                       "results": {"type": "array", "minItems": 1, "items": obj({
                           "flagged": {"type": "boolean"},
                           "categories": {"type": "object", "additionalProperties": {"type": "boolean"}},
                           "category_scores": {"type": "object", "additionalProperties": {"type": "number"}},
                           "category_applied_input_types": {"type": "object", "additionalProperties": {
                               "type": "array", "items": {"type": "string"}}},
                           "findings": {"type": "array", "items": obj({
                               "check": {"type": "string"}, "entity": {"type": "string"},
                               "action": {"enum": ["block", "redact", "log"]}, "index": {"type": "integer"},
                               "offset": {"type": "integer"}}, closed=True)}})}}, closed=True),
    "Transcription": obj({"text": {"type": "string"}}),
    # the audio as a file part; other fields (response_format, language, ...) go to the model server
    "AudioUpload": obj({"file": {"type": "string", "contentMediaType": "application/octet-stream"}},
                       {"model": {"type": "string"}}),
}

TAGS = ["compat"]


def _ok(schema, *, extra_content=None):
    response = json_response("OK", schema)
    response["headers"]["X-Inference-Request-Id"] = {"$ref": "#/components/headers/X-Inference-Request-Id"}
    if extra_content:
        response["content"].update(extra_content)
    return {"200": response}


def paths() -> dict:
    p = {}
    path = "/v1/models"
    p[path] = {"get": operation(path, "Models the caller may use", _ok(ref("ModelList")), tags=TAGS)}
    path = "/v1/chat/completions"
    p[path] = {"post": operation(path, "Chat completions", _ok(ref("ChatCompletion")),
                                 body=ref("ChatCompletionRequest"), tags=TAGS, stream=True,
                                 description="With `stream: true`, server-sent `data:` items; a failure once "
                                             "streaming is an `error` item; the stream ends with `[DONE]`.")}
    path = "/v1/messages"
    p[path] = {"post": operation(path, "Messages (stream: named events ending in message_stop)",
                                 _ok(ref("AnthropicMessage")), body=ref("MessagesRequest"), tags=TAGS, stream=True)}
    path = "/v1/messages/count_tokens"
    p[path] = {"post": operation(path, "Count a messages request's input tokens", _ok(ref("TokenCount")),
                                 body=ref("MessagesRequest"), tags=TAGS)}
    path = "/v1/responses"
    p[path] = {"post": operation(path, "Responses (stream ends in response.completed, .failed or .incomplete)",
                                 _ok(ref("ResponseObject")), body=ref("ResponsesRequest"), tags=TAGS, stream=True)}
    path = "/v1/responses/input_tokens"
    p[path] = {"post": operation(path, "Count a responses request's input tokens",
                                 _ok(ref("ResponsesTokenCount")), body=ref("ResponsesRequest"), tags=TAGS)}
    for name in ("transcriptions", "translations"):
        path = f"/v1/audio/{name}"
        p[path] = {"post": operation(path, f"Audio {name} (multipart upload)",
                                     _ok(ref("Transcription"),
                                         extra_content={"text/plain": {"schema": {"type": "string"}}}),
                                     body=ref("AudioUpload"), body_type="multipart/form-data", tags=TAGS)}
    path = "/v1/embeddings"
    p[path] = {"post": operation(path, "Embeddings (float vectors, or base64 float32 with encoding_format base64)",
                                 _ok(ref("EmbeddingList")), body=ref("EmbeddingRequest"), tags=TAGS)}
    path = "/v1/moderations"
    p[path] = {"post": operation(path, "Moderations, answered by the group's guardrails (no model unless a check "
                                       "names one)",
                                 {"200": json_response("OK", ref("Moderation"))}, body=ref("ModerationRequest"),
                                 tags=TAGS)}
    path = "/v1/audio/speech"
    p[path] = {"post": operation(path, "Speech synthesis: audio bytes",
                                 {"200": {"description": "Audio", "content": {"audio/*": {"schema": {
                                     "type": "string", "contentMediaType": "audio/*"}}}}},
                                 body=ANY_OBJECT, tags=TAGS)}
    return p
