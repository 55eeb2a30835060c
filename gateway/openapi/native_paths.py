"""Paths of the native surface under /api/v1 (docs/decisions/README.md indexes the routes the spec leaves open)."""

from __future__ import annotations

from gateway.openapi.components import (
    ANY_OBJECT,
    MONEY,
    NULLABLE_MONEY,
    NULLABLE_STRING,
    TIMESTAMP,
    id_param,
    json_response,
    obj,
    operation,
    ref,
)

COLLECTION_FIELDS = {"id": {"type": "integer"}, "name": {"type": "string"}, "description": {"type": "string"},
                     "embedding_model": NULLABLE_STRING, "document_count": {"type": ["integer", "null"]},
                     "created_at": TIMESTAMP, "updated_at": TIMESTAMP}

CONVERSATION_FIELDS = {"id": {"type": "integer"}, "title": {"type": ["string", "null"]},
                       "profile": NULLABLE_STRING, "model": NULLABLE_STRING,
                       "created_at": TIMESTAMP, "updated_at": TIMESTAMP}

# The aliases a group may chat with, beside its profiles
ALIASES = {"type": "array", "items": obj({"name": {"type": "string"},
                                          "policy": {"enum": ["weighted", "least-busy", "latency"]},
                                          "available": {"type": "boolean"}}, closed=True)}

SCHEMAS = {
    "Version": obj({"service": {"type": "string"}, "version": {"type": "string"},
                    "api_version": {"type": "string"}}, closed=True),
    "ChatRequest": obj({"message": {"type": "string"}}, {"conversation_id": {"type": ["integer", "null"]},
                                                         "profile": NULLABLE_STRING, "model": NULLABLE_STRING}),
    "ChatWhole": obj({"request_id": {"type": "string"}, "conversation_id": {"type": ["integer", "null"]},
                      "model": NULLABLE_STRING, "message_id": {"type": ["integer", "null"]}, "text": {"type": "string"},
                      "citations": {"type": "array"}, "usage": {"type": ["object", "null"]}}, closed=True),
    "NativeChatEvent": obj({"event": {"enum": ["meta", "delta", "error", "done"]},
                            "data": {"type": "string", "contentMediaType": "application/json"}},
                           {"id": {"type": "string"}, "retry": {"type": "integer"}}, closed=True),
    "AgentRequest": ANY_OBJECT,
    "AgentUsage": obj({"prompt_tokens": {"type": "integer"}, "completion_tokens": {"type": "integer"},
                       "total_tokens": {"type": "integer"}}, closed=True),
    "AgentReply": obj({"request_id": {"type": "string"}, "reply": {"type": "string"},
                       "tool_calls": {"type": "array", "items": ANY_OBJECT}, "model": NULLABLE_STRING,
                       "usage": ref("AgentUsage"), "skipped_servers": {"type": "array"}}, closed=True),
    "AgentRunReply": obj({"request_id": {"type": "string"}, "result": {"type": "string"},
                          "steps": {"type": "array", "items": obj({"type": {"type": "string"}})},
                          "finished": {"type": "boolean"}, "stop_reason": {"type": "string"},
                          "model": NULLABLE_STRING, "usage": ref("AgentUsage"),
                          "skipped_servers": {"type": "array"}}, closed=True),
    "QuotaWindow": obj({"limit": {"type": "integer"}, "used": {"type": "integer", "minimum": 0},
                        "remaining": {"type": ["integer", "null"], "minimum": 0}, "resets_at": TIMESTAMP,
                        "spend": MONEY, "budget": NULLABLE_MONEY, "budget_remaining": NULLABLE_MONEY},
                       closed=True),
    "Usage": obj({"day": ref("QuotaWindow"), "week": ref("QuotaWindow"), "month": ref("QuotaWindow"),
                  "currency": {"type": "string", "pattern": "^[A-Z]{3}$",
                               "description": "ISO 4217 code of every amount"},
                  "month_by_model": {"type": "array", "items": obj({
                      "model": {"type": "string"}, "requests": {"type": "integer"},
                      "input_tokens": {"type": "integer"}, "output_tokens": {"type": "integer"},
                      "total_tokens": {"type": "integer"}, "spend": MONEY}, closed=True)}}, closed=True),
    "Embeddings": obj({"object": {"const": "list"}, "model": {"type": "string"},
                       "data": {"type": "array", "items": obj({
                           "object": {"const": "embedding"}, "index": {"type": "integer"},
                           "embedding": {"type": "array", "items": {"type": "number"}}}, closed=True)},
                       "usage": obj({"prompt_tokens": {"type": "integer"}, "total_tokens": {"type": "integer"}},
                                    closed=True)}, closed=True),
    "Profile": obj({"name": {"type": "string"}, "title": {"type": "string"}, "description": {"type": "string"},
                    "model": NULLABLE_STRING, "temperature": {"type": ["number", "null"]},
                    "tools": {"type": "array", "items": {"type": "string"}},
                    "collections": {"type": "array", "items": {"type": "integer"}},
                    "available": {"type": "boolean"}}, closed=True),
    "Profiles": obj({"profiles": {"type": "array", "items": ref("Profile")}, "aliases": ALIASES}, closed=True),
    "ProfilesRefreshed": obj({"profiles": {"type": "array", "items": ref("Profile")}, "aliases": ALIASES,
                              "servers": {"type": "array", "items": obj({
                                  "server": {"type": "string"}, "models": {"type": ["integer", "null"]},
                                  "added": {"type": "integer"}, "unlisted": {"type": "integer"},
                                  "error": NULLABLE_STRING}, closed=True)}}, closed=True),
    "EmbeddingsRequest": obj({"input": {"type": ["string", "array"], "maxItems": 64}}, {"model": {"type": "string"}}),
    "Conversation": obj(CONVERSATION_FIELDS, closed=True),
    "ConversationMessage": obj({"id": {"type": "integer"}, "role": {"enum": ["user", "assistant", "system"]},
                                "content": {"type": "string"}, "attachments": {"type": ["array", "null"]},
                                "citations": {"type": ["array", "null"]}, "model": NULLABLE_STRING,
                                "status": {"type": "string"}, "usage": {"type": ["object", "null"]},
                                "request_id": NULLABLE_STRING, "created_at": TIMESTAMP}, closed=True),
    "ConversationPage": obj({"status": {"const": "success"},
                             "data": {"type": "array", "items": ref("Conversation")},
                             "pagination": obj({"page": {"type": "integer"}, "per_page": {"type": "integer"},
                                                "total": {"type": "integer"}, "pages": {"type": "integer"}},
                                               closed=True)}, closed=True),
    "ConversationWithMessages": obj({"status": {"const": "success"}, "data": obj({
        **CONVERSATION_FIELDS, "messages": {"type": "array", "items": ref("ConversationMessage")}}, closed=True)},
        closed=True),
    "StatusMessageOk": obj({"status": {"const": "success"}, "message": {"type": "string"}}),
    "Collection": obj(COLLECTION_FIELDS, closed=True),
    "Collections": obj({"data": {"type": "array", "items": ref("Collection")}}, closed=True),
    "Reindexed": obj({**COLLECTION_FIELDS, "reindexed_chunks": {"type": "integer"}}, closed=True),
    "Document": obj({"id": {"type": "integer"}, "collection_id": {"type": "integer"}, "name": {"type": "string"},
                     "content_type": {"type": "string"}, "size": {"type": "integer"},
                     "chunk_count": {"type": ["integer", "null"]}, "created_at": TIMESTAMP}, closed=True),
    "Documents": obj({"data": {"type": "array", "items": ref("Document")}}, closed=True),
    "SearchResult": obj({"collection_id": {"type": "integer"}, "model": NULLABLE_STRING,
                         "results": {"type": "array", "items": obj({
                             "chunk_id": {"type": "integer"}, "document_id": {"type": "integer"},
                             "document_name": {"type": "string"}, "position": {"type": "integer"},
                             "text": {"type": "string"}, "score": {"type": "number"}}, closed=True)}},
                        closed=True),
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
    p[path] = {"get": operation(path, "Token quotas, budgets and usage of the caller", _ok(ref("Usage")), tags=TAGS)}
    path = "/api/v1/chat"
    p[path] = {"post": operation(path, "Native chat, streamed or whole",
                                 {"200": {"description": "Event stream", "headers": {
                                     "X-Request-Id": {"$ref": "#/components/headers/X-Request-Id"},
                                     "X-Inference-Request-Id": {"$ref": "#/components/headers/X-Inference-Request-Id"}},
                                     "content": {"text/event-stream": {"schema": ref("NativeChatEvent")},
                                                 "application/json": {"schema": ref("ChatWhole")}}}},
                                 body=ref("ChatRequest"), tags=TAGS,
                                 description="A `text/event-stream` whose events all carry `request_id`; a failure "
                                             "is an `error` event, then `done`. With `stream: false`, one JSON "
                                             "object.")}
    path = "/api/v1/conversations"
    p[path] = {"get": operation(path, "The caller's conversations", _ok(ref("ConversationPage")), tags=TAGS)}
    path = "/api/v1/conversations/{conversation_id}"
    p[path] = {"parameters": [id_param("conversation_id")],
               "get": operation(path, "One conversation with its messages",
                                   _ok(ref("ConversationWithMessages")), tags=TAGS),
               "delete": operation(path, "Move to the trash", _ok(ref("StatusMessageOk")), tags=TAGS)}
    path = "/api/v1/conversations/{conversation_id}/permanent"
    p[path] = {"parameters": [id_param("conversation_id")],
               "delete": operation(path, "Delete permanently", _ok(ref("StatusMessageOk")), tags=TAGS)}
    path = "/api/v1/embeddings"
    p[path] = {"post": operation(path, "Embeddings", _ok(ref("Embeddings")), body=ref("EmbeddingsRequest"), tags=TAGS)}
    path = "/api/v1/collections"
    p[path] = {"get": operation(path, "The caller's collections", _ok(ref("Collections")), tags=TAGS),
               "post": operation(path, "Create a collection", _ok(ref("Collection"), "201", "Created"),
                                 body=ref("CollectionInput"), tags=TAGS)}
    path = "/api/v1/collections/{collection_id}"
    p[path] = {"parameters": [id_param("collection_id")],
               "get": operation(path, "One collection", _ok(ref("Collection")), tags=TAGS),
               "delete": operation(path, "Delete a collection", _deleted(), tags=TAGS)}
    path = "/api/v1/collections/{collection_id}/documents"
    p[path] = {"parameters": [id_param("collection_id")],
               "get": operation(path, "The collection's documents", _ok(ref("Documents")), tags=TAGS),
               "post": operation(path, "Add a document (JSON text or multipart upload)",
                                 _ok(ref("Document"), "201", "Created"), body=ref("DocumentInput"), tags=TAGS)}
    path = "/api/v1/collections/{collection_id}/documents/{document_id}"
    p[path] = {"parameters": [id_param("collection_id"), id_param("document_id")],
               "delete": operation(path, "Delete a document", _deleted(), tags=TAGS)}
    path = "/api/v1/collections/{collection_id}/search"
    p[path] = {"parameters": [id_param("collection_id")],
               "post": operation(path, "Search a collection", _ok(ref("SearchResult")), body=ref("SearchInput"),
                                 tags=TAGS)}
    path = "/api/v1/collections/{collection_id}/reindex"
    p[path] = {"parameters": [id_param("collection_id")],
               "post": operation(path, "Reindex a collection", _ok(ref("Reindexed")), tags=TAGS)}
    path = "/api/v1/profiles"
    p[path] = {"get": operation(path, "Chat profiles", _ok(ref("Profiles")), tags=TAGS)}
    path = "/api/v1/profiles/refresh"
    p[path] = {"post": operation(path, "Refresh profiles", _ok(ref("ProfilesRefreshed")), tags=TAGS)}
    path = "/api/v1/agent/chat"
    p[path] = {"post": operation(path, "Agent chat (when every model fails: 503 with Retry-After and retry_after)",
                                 _ok(ref("AgentReply")), body=ref("AgentRequest"), tags=TAGS)}
    path = "/api/v1/agent/run"
    p[path] = {"post": operation(path, "Agent run", _ok(ref("AgentRunReply")), body=ref("AgentRequest"), tags=TAGS)}
    path = "/api/v1/mcp"
    p[path] = {"post": operation(path, "MCP (JSON-RPC 2.0; errors inside a 200; 202 for notifications only)",
                                 {"200": json_response("JSON-RPC answer(s)", ref("JsonRpcAnswer")),
                                  "202": {"description": "Notifications only: no body"}},
                                 body=ref("JsonRpcMessage"), tags=TAGS)}
    return p
