"""Paths of Google's Gemini API (compat/gemini.py), beyond the spec: `{target}` is `<model>:<method>`
on /v1 and /v1beta, or on /v1beta a model's id alone (its entry in the model list); the model's id
may hold a `/` (`server/model`), so the parameter takes one (`format: path`)."""

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
TARGET = {"name": "target", "in": "path", "required": True, "description": "`<model>:<method>`, or a model's id",
          "schema": {"type": "string", "format": "path"}}
METHODS = ("The methods generateContent, streamGenerateContent (`alt=sse`: server-sent events; else a JSON "
           "array), countTokens, embedContent and batchEmbedContents, in Google's shapes.")


def _ok(schema):
    response = json_response("OK", schema)
    response["headers"]["X-Inference-Request-Id"] = {"$ref": "#/components/headers/X-Inference-Request-Id"}
    return {"200": response}


def _method(path: str, errors: str) -> dict:
    reply = ref("GenerateContentResponse")  # or, streamed without alt=sse, an array of them
    return operation(path, "Google's Gemini API: a model's method", _ok({"anyOf": [reply, {"type": "array",
                                                                                          "items": reply}]}),
                     body=ANY_OBJECT, tags=TAGS, stream=True, description=f"{METHODS} {errors}")


def paths() -> dict:
    p = {}
    path = "/v1/models/{target}"
    p[path] = {"parameters": [TARGET],
               "post": _method(path, "Errors in Google's shape, but a 401 and a 429 as on every /v1 path.")}
    path = "/v1beta/models"
    p[path] = {"get": operation(path, "Google's Gemini API: the models the caller may use",
                                _ok(ref("GoogleModelList")), tags=TAGS)}
    path = "/v1beta/models/{target}"
    p[path] = {"parameters": [TARGET],
               "get": operation(path, "Google's Gemini API: one model", _ok(ref("GoogleModel")), tags=TAGS),
               "post": _method(path, "Errors in Google's shape.")}
    return p
