"""Paths of the compatibility surfaces under /v1 (chat completions, responses, messages, audio, models)."""

from __future__ import annotations

from gateway.openapi.components import ANY_OBJECT, json_response, obj, operation, ref

SCHEMAS = {
    "ModelList": obj({"object": {"const": "list"},
                      "data": {"type": "array", "items": obj({"id": {"type": "string"},
                                                              "object": {"const": "model"}})}}),
    "ChatCompletionRequest": obj({"model": {"type": "string"}, "messages": {"type": "array", "maxItems": 200}},
                                 {"stream": {"type": "boolean"}, "stream_options": ANY_OBJECT}),
    "ChatCompletion": obj({"id": {"type": "string"}, "object": {"const": "chat.completion"},
                           "choices": {"type": "array", "items": ANY_OBJECT}}),
    "MessagesRequest": obj({"model": {"type": "string"}, "messages": {"type": "array", "maxItems": 200}},
                           {"max_tokens": {"type": "integer"}, "stream": {"type": "boolean"}}),
    "AnthropicMessage": obj({"id": {"type": "string"}, "type": {"const": "message"}, "role": {"const": "assistant"},
                             "content": {"type": "array", "items": ANY_OBJECT}}),
    "TokenCount": obj({"input_tokens": {"type": "integer"}}),
    "ResponsesRequest": obj({"model": {"type": "string"}}, {"input": {}, "stream": {"type": "boolean"}}),
    "ResponseObject": obj({"id": {"type": "string"}, "object": {"const": "response"}, "status": {"type": "string"},
                           "output": {"type": "array", "items": ANY_OBJECT}}),
    "ResponsesTokenCount": obj({"object": {"type": "string"}, "input_tokens": {"type": "integer"}}),
    "Transcription": obj({"text": {"type": "string"}}),
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
    p[path] = {"post": operation(path, "Chat completions (stream: data items, an `error` item, then [DONE])",
                                 _ok(ref("ChatCompletion")), body=ref("ChatCompletionRequest"), tags=TAGS,
                                 stream=True)}
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
                                     body={"type": "object"}, body_type="multipart/form-data", tags=TAGS)}
    path = "/v1/audio/speech"
    p[path] = {"post": operation(path, "Speech synthesis: audio bytes",
                                 {"200": {"description": "Audio", "content": {"audio/*": {"schema": {
                                     "type": "string", "contentMediaType": "audio/*"}}}}},
                                 body=ANY_OBJECT, tags=TAGS)}
    return p
