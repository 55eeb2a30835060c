"""Paths of the batch surfaces: OpenAI's Batch API under /v1/batches and Anthropic's Message Batches API under
/v1/messages/batches (docs/batches.md), in the shapes of their SDKs."""

from __future__ import annotations

from gateway.openapi.components import (
    NULLABLE_STRING,
    NULLABLE_TIMESTAMP,
    TIMESTAMP,
    json_response,
    obj,
    operation,
    ref,
    str_param,
)
from gateway.openapi.v1_paths import METADATA_SCHEMA

TAGS = ["compat"]
UNIX = {"type": "integer"}
NULLABLE_UNIX = {"type": ["integer", "null"]}
COUNT = {"type": "integer", "minimum": 0}
STATUSES = ["validating", "failed", "in_progress", "finalizing", "completed", "expired", "cancelling", "cancelled"]
ENDPOINTS = ["/v1/chat/completions", "/v1/responses", "/v1/embeddings"]
BATCH_ERRORS = {"type": ["object", "null"], "properties": {
    "object": {"const": "list"},
    "data": {"type": "array", "items": obj({"code": {"type": "string"}, "message": {"type": "string"},
                                            "param": NULLABLE_STRING, "line": {"type": ["integer", "null"]}},
                                           closed=True)}}}

SCHEMAS = {
    "BatchCreate": obj({"input_file_id": {"type": "string"}, "endpoint": {"enum": ENDPOINTS},
                        "completion_window": {"const": "24h"}}, {"metadata": METADATA_SCHEMA}),
    "Batch": obj({"id": {"type": "string", "pattern": "^batch_"}, "object": {"const": "batch"},
                  "endpoint": {"enum": ENDPOINTS}, "errors": BATCH_ERRORS, "input_file_id": {"type": "string"},
                  "completion_window": {"const": "24h"}, "status": {"enum": STATUSES},
                  "output_file_id": NULLABLE_STRING, "error_file_id": NULLABLE_STRING, "created_at": UNIX,
                  "in_progress_at": NULLABLE_UNIX, "expires_at": UNIX, "finalizing_at": NULLABLE_UNIX,
                  "completed_at": NULLABLE_UNIX, "failed_at": NULLABLE_UNIX, "expired_at": NULLABLE_UNIX,
                  "cancelling_at": NULLABLE_UNIX, "cancelled_at": NULLABLE_UNIX,
                  "request_counts": obj({"total": COUNT, "completed": COUNT, "failed": COUNT}, closed=True),
                  "metadata": {**METADATA_SCHEMA, "type": ["object", "null"]}}, closed=True),
    "BatchList": obj({"object": {"const": "list"}, "data": {"type": "array", "items": ref("Batch")},
                      "first_id": NULLABLE_STRING, "last_id": NULLABLE_STRING, "has_more": {"type": "boolean"}},
                     closed=True),
    "MessageBatchCreate": obj({"requests": {"type": "array", "minItems": 1, "items": obj(
        {"custom_id": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,64}$"}, "params": ref("MessagesRequest")})}}),
    "MessageBatch": obj({"id": {"type": "string", "pattern": "^msgbatch_"}, "type": {"const": "message_batch"},
                         "processing_status": {"enum": ["in_progress", "canceling", "ended"]},
                         "request_counts": obj({name: COUNT for name in ("processing", "succeeded", "errored",
                                                                         "canceled", "expired")}, closed=True),
                         "ended_at": NULLABLE_TIMESTAMP, "created_at": TIMESTAMP, "expires_at": TIMESTAMP,
                         "cancel_initiated_at": NULLABLE_TIMESTAMP, "archived_at": {"type": "null"},
                         "results_url": {"type": ["string", "null"], "format": "uri"}}, closed=True),
    "MessageBatchList": obj({"data": {"type": "array", "items": ref("MessageBatch")},
                             "has_more": {"type": "boolean"}, "first_id": NULLABLE_STRING,
                             "last_id": NULLABLE_STRING}, closed=True),
    "MessageBatchDeleted": obj({"id": {"type": "string"}, "type": {"const": "message_batch_deleted"}}, closed=True),
}


def _query(name: str, schema: dict, description: str) -> dict:
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": description}


def _ok(description: str, schema: str) -> dict:
    return {"200": json_response(description, ref(schema))}


def openai_paths() -> dict:
    p = {}
    path = "/v1/batches"
    p[path] = {
        "post": operation(path, "Create a batch of the requests of an uploaded input file", _ok("The batch", "Batch"),
                          body=ref("BatchCreate"), tags=TAGS,
                          description="The batch starts `validating`: its file is read line by line by the batch "
                                      "queue's worker, and a batch with a bad line ends `failed` with `errors` "
                                      "naming each line, nothing run."),
        "get": {**operation(path, "The caller's batches, newest first", _ok("A page of batches", "BatchList"),
                            tags=TAGS),
                "parameters": [_query("after", {"type": "string"}, "the id of the last batch of the page before"),
                               _query("limit", {"type": "integer", "minimum": 1, "maximum": 100},
                                      "batches per page (20 unless given)")]},
    }
    path = "/v1/batches/{batch_id}"
    p[path] = {"parameters": [str_param("batch_id")],
               "get": operation(path, "A batch of the caller's", _ok("The batch", "Batch"), tags=TAGS)}
    path = "/v1/batches/{batch_id}/cancel"
    p[path] = {"parameters": [str_param("batch_id")],
               "post": operation(path, "Cancel a batch", _ok("The batch, cancelling", "Batch"), tags=TAGS,
                                 description="A batch that has ended is a 400 naming its status.")}
    return p


def anthropic_paths() -> dict:
    p = {}
    path = "/v1/messages/batches"
    p[path] = {
        "post": operation(path, "Create a message batch", _ok("The message batch", "MessageBatch"),
                          body=ref("MessageBatchCreate"), tags=TAGS,
                          description="Every request is checked first; the first that cannot run is a 400 naming "
                                      "it (`requests.3.custom_id: ...`), and no batch is made."),
        "get": {**operation(path, "The caller's message batches, newest first",
                            _ok("A page of message batches", "MessageBatchList"), tags=TAGS),
                "parameters": [_query("before_id", {"type": "string"}, "the page just newer than this batch"),
                               _query("after_id", {"type": "string"}, "the page just older than this batch"),
                               _query("limit", {"type": "integer", "minimum": 1, "maximum": 1000},
                                      "batches per page (20 unless given)")]},
    }
    path = "/v1/messages/batches/{batch_id}"
    p[path] = {"parameters": [str_param("batch_id")],
               "get": operation(path, "A message batch of the caller's", _ok("The message batch", "MessageBatch"),
                                tags=TAGS),
               "delete": operation(path, "Delete an ended message batch and its results",
                                   _ok("Deleted", "MessageBatchDeleted"), tags=TAGS)}
    path = "/v1/messages/batches/{batch_id}/cancel"
    p[path] = {"parameters": [str_param("batch_id")],
               "post": operation(path, "Cancel a message batch", _ok("The message batch, canceling", "MessageBatch"),
                                 tags=TAGS)}
    path = "/v1/messages/batches/{batch_id}/results"
    p[path] = {"parameters": [str_param("batch_id")],
               "get": operation(path, "An ended message batch's results, a JSON line per request in its order",
                                {"200": {"description": "JSON Lines: {custom_id, result}",
                                         "content": {"application/x-jsonl": {"schema": {"type": "string"}}}}},
                                tags=TAGS)}
    return p


def paths() -> dict:
    return {**openai_paths(), **anthropic_paths()}
