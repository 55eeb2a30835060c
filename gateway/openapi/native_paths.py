"""Paths of the native surface under /api/v1 (docs/decisions.md gives the routes the spec leaves open)."""

from __future__ import annotations

from gateway.openapi.components import (ANY_OBJECT, NULLABLE_STRING, TIMESTAMP, id_param, json_response, obj,
                                        operation, ref)

SCHEMAS = {
    "Version": obj({"service": {"type": "string"}, "version": {"type": "string"},
                    "api_version": {"type": "string"}}, closed=True),
    "ChatRequest": obj({"message": {"type": "string"}}, {"conversation_id": {"type": ["integer", "null"]},
                                                         "profile": NULLABLE_STRING, "model": NULLABLE_STRING}),
    "ChatWhole": obj({"request_id": {"type": "string"}, "conversation_id": {"type": ["integer", "null"]},
                      "model": NULLABLE_STRING, "message_id": {"type": ["integer", "null"]}, "text": {"type": "string"},
                      "citations": {"type": "array"}, "usage": {"type": ["object", "null"]}}, closed=True),
    "AgentRequest": ANY_OBJECT,
    "AgentReply": obj({"request_id": {"type": "string"}}),
    "EmbeddingsRequest": obj({"input": {"type": ["string", "array"], "maxItems": 64}}, {"model": {"type": "string"}}),
    "Conversation": obj({"id": {"type": "integer"}, "title": {"type": ["string", "null"]},
                         "created_at": TIMESTAMP, "updated_at": TIMESTAMP},
                        {"profile": NULLABLE_STRING, "model": NULLABLE_STRING}),
    "StatusData": obj({"status": {"const": "success"}, "data": {}}),
    "StatusMessageOk": obj({"status": {"const": "success"}, "message": {"type": "string"}}),
    "Collection": obj({"id": {"type": "integer"}, "name": {"type": "string"}}),
    "CollectionInput": obj({"name": {"type": "string", "maxLength": 120}},
                           {"description": {"type": "string", "maxLength": 4000}}),
    "DocumentInput": obj({"name": {"type": "string", "maxLength": 255}, "text": {"type": "string"}},
                         {"content_type": {"type": "string", "maxLength": 100}}),
    "SearchInput": obj({"query": {"type": "string"}}, {"k": {"type": "integer", "minimum": 1}}),
}

TAGS = ["native"]


def _ok(schema, status="200", description="OK", *, stream=False):
    return {status: json_response(description, schema)}


def _deleted():
    return {"204": {"description": "Deleted"}}


def paths() -> dict:
    p = {}
    path = "/api/v1/version"
    p[path] = {"get": operation(path, "Service and API version", _ok(ref("Version")), tags=TAGS)}
    path = "/api/v1/usage"
    p[path] = {"get": operation(path, "Token quotas and usage (spec 8.4)", _ok(ANY_OBJECT), tags=TAGS)}
    path = "/api/v1/chat"
    p[path] = {"post": operation(path, "Native chat: a text/event-stream whose events carry request_id; "
                                 "failures are an `error` event then `done`; with `stream: false` one JSON object",
                                 {"200": {"description": "Event stream", "headers": {
                                     "X-Request-Id": {"$ref": "#/components/headers/X-Request-Id"},
                                     "X-Inference-Request-Id": {"$ref": "#/components/headers/X-Inference-Request-Id"}},
                                     "content": {"text/event-stream": {"schema": {"type": "string"}},
                                                 "application/json": {"schema": ref("ChatWhole")}}}},
                                 body=ref("ChatRequest"), tags=TAGS)}
    path = "/api/v1/conversations"
    p[path] = {"get": operation(path, "The caller's conversations", _ok(ref("StatusData")), tags=TAGS)}
    path = "/api/v1/conversations/{conversation_id}"
    p[path] = {"parameters": [id_param("conversation_id")],
               "get": operation(path, "One conversation with its messages", _ok(ref("StatusData")), tags=TAGS),
               "delete": operation(path, "Move to the trash", _ok(ref("StatusMessageOk")), tags=TAGS)}
    path = "/api/v1/conversations/{conversation_id}/permanent"
    p[path] = {"parameters": [id_param("conversation_id")],
               "delete": operation(path, "Delete permanently", _ok(ref("StatusMessageOk")), tags=TAGS)}
    path = "/api/v1/embeddings"
    p[path] = {"post": operation(path, "Embeddings", _ok(ANY_OBJECT), body=ref("EmbeddingsRequest"), tags=TAGS)}
    path = "/api/v1/collections"
    p[path] = {"get": operation(path, "The caller's collections", _ok(ANY_OBJECT), tags=TAGS),
               "post": operation(path, "Create a collection", _ok(ref("Collection"), "201", "Created"),
                                 body=ref("CollectionInput"), tags=TAGS)}
    path = "/api/v1/collections/{collection_id}"
    p[path] = {"parameters": [id_param("collection_id")],
               "get": operation(path, "One collection", _ok(ANY_OBJECT), tags=TAGS),
               "delete": operation(path, "Delete a collection", _deleted(), tags=TAGS)}
    path = "/api/v1/collections/{collection_id}/documents"
    p[path] = {"parameters": [id_param("collection_id")],
               "get": operation(path, "The collection's documents", _ok(ANY_OBJECT), tags=TAGS),
               "post": operation(path, "Add a document (JSON text or multipart upload)",
                                 _ok(ANY_OBJECT, "201", "Created"), body=ref("DocumentInput"), tags=TAGS)}
    path = "/api/v1/collections/{collection_id}/documents/{document_id}"
    p[path] = {"parameters": [id_param("collection_id"), id_param("document_id")],
               "delete": operation(path, "Delete a document", _deleted(), tags=TAGS)}
    path = "/api/v1/collections/{collection_id}/search"
    p[path] = {"parameters": [id_param("collection_id")],
               "post": operation(path, "Search a collection", _ok(ANY_OBJECT), body=ref("SearchInput"), tags=TAGS)}
    path = "/api/v1/collections/{collection_id}/reindex"
    p[path] = {"parameters": [id_param("collection_id")],
               "post": operation(path, "Reindex a collection", _ok(ANY_OBJECT), tags=TAGS)}
    path = "/api/v1/profiles"
    p[path] = {"get": operation(path, "Chat profiles", _ok(ANY_OBJECT), tags=TAGS)}
    path = "/api/v1/profiles/refresh"
    p[path] = {"post": operation(path, "Refresh profiles", _ok(ANY_OBJECT), tags=TAGS)}
    path = "/api/v1/agent/chat"
    p[path] = {"post": operation(path, "Agent chat (spec 7.3: 503 with Retry-After and retry_after)",
                                 _ok(ref("AgentReply")), body=ref("AgentRequest"), tags=TAGS)}
    path = "/api/v1/agent/run"
    p[path] = {"post": operation(path, "Agent run", _ok(ANY_OBJECT), body=ref("AgentRequest"), tags=TAGS)}
    path = "/api/v1/mcp"
    p[path] = {"post": operation(path, "MCP (JSON-RPC 2.0; errors inside a 200; 202 for notifications only)",
                                 {"200": json_response("JSON-RPC answer(s)", ref("JsonRpcAnswer")),
                                  "202": {"description": "Notifications only: no body"}},
                                 body=ref("JsonRpcMessage"), tags=TAGS)}
    return p
