"""Paths of Google's Gemini API (compat/gemini.py), beyond the spec: `models/{model}:{method}` on /v1
and /v1beta, and on /v1beta the model list and its entries; the model's id may hold a `/`
(`server/model`), so the parameter takes one (`format: path`)."""

from __future__ import annotations

from gateway.openapi.components import ANY_OBJECT, json_response, obj, operation, ref

SCHEMAS = {
    "GenerateContentResponse": obj({}, {"candidates": {"type": "array", "items": ANY_OBJECT},
                                        "usageMetadata": ANY_OBJECT, "modelVersion": {"type": "string"},
                                        "responseId": {"type": "string"}, "totalTokens": {"type": "integer"},
                                        "embedding": ANY_OBJECT, "embeddings": {"type": "array"}}),
    "GoogleModel": obj({"name": {"type": "string"}, "supportedGenerationMethods": {
        "type": "array", "items": {"type": "string"}}}, {"displayName": {"type": "string"},
                                                         "inputTokenLimit": {"type": "integer"}}),
    "GoogleModelList": obj({"models": {"type": "array", "items": ref("GoogleModel")}}),
}

TAGS = ["compat"]
MODEL = {"name": "model", "in": "path", "required": True, "description": "a model's id, `models/` before it or not",
         "schema": {"type": "string", "format": "path"}}
METHODS = {"generateContent": "Generate content", "streamGenerateContent": "Generate content, streamed "
           "(`alt=sse`: server-sent events; else one JSON array)", "countTokens": "Count a request's tokens",
           "embedContent": "Embed a content", "batchEmbedContents": "Embed several contents"}


def _ok(schema):
    response = json_response("OK", schema)
    response["headers"]["X-Inference-Request-Id"] = {"$ref": "#/components/headers/X-Inference-Request-Id"}
    return {"200": response}


def _method(path: str, summary: str, errors: str) -> dict:
    reply = ref("GenerateContentResponse")  # or, streamed without alt=sse, an array of them
    return operation(path, f"Google's Gemini API: {summary}",
                     _ok({"anyOf": [reply, {"type": "array", "items": reply}]}), body=ANY_OBJECT, tags=TAGS,
                     stream=path.endswith(":streamGenerateContent"), description=errors)


def paths() -> dict:
    p = {}
    for version, errors in (("v1", "Errors in Google's shape, but a 401 and a 429 as on every /v1 path."),
                            ("v1beta", "Errors in Google's shape.")):
        for method, summary in METHODS.items():
            path = f"/{version}/models/{{model}}:{method}"
            p[path] = {"parameters": [MODEL], "post": _method(path, summary, errors)}
    path = "/v1beta/models"
    p[path] = {"get": operation(path, "Google's Gemini API: the models the caller may use",
                                _ok(ref("GoogleModelList")), tags=TAGS)}
    path = "/v1beta/models/{model}"
    p[path] = {"parameters": [MODEL],
               "get": operation(path, "Google's Gemini API: one model", _ok(ref("GoogleModel")), tags=TAGS)}
    return p
