"""`Idempotency-Key` in the document (accounts/idempotency.py): the request header on the
operations that take it, `Idempotent-Replayed` on the answers they may replay, and the 409 and 422 the
key adds. tests/gateway/openapi/test_openapi.py holds the list to the endpoints marked `idempotent`."""

from __future__ import annotations

from typing import Any

from gateway.openapi.components import error_schema

# The non-streamed POSTs that cost or create (a stream with a key is served anew each time)
OPERATIONS = (
    ("/v1/chat/completions", "post"),
    ("/v1/messages", "post"),
    ("/v1/responses", "post"),
    ("/v1/embeddings", "post"),
    ("/v1/audio/transcriptions", "post"),
    ("/v1/audio/translations", "post"),
    ("/v1/audio/speech", "post"),
    ("/api/v1/chat", "post"),
    ("/api/v1/agent/chat", "post"),
    ("/api/v1/agent/run", "post"),
    ("/api/v1/routines", "post"),
    ("/api/v1/routines/{routine_id}/run-now", "post"),
    ("/v1/batches", "post"),
    ("/v1/messages/batches", "post"),
)

HEADERS = {
    "Idempotent-Replayed": {
        "description": "`true` on the stored first answer to a request sent again with its Idempotency-Key: "
                       "no model was called and nothing was metered.",
        "schema": {"type": "string", "enum": ["true"]}},
}

PARAMETER = {
    "name": "Idempotency-Key", "in": "header", "required": False,
    "description": "1 to 255 printable ASCII characters, per account for 24 hours (IDEMPOTENCY_TTL_SECONDS). "
                   "The same key with the same method, path and body gets the first answer again "
                   "(`Idempotent-Replayed: true`); with another request it is a 422, and while the first is "
                   "being answered a 409 with Retry-After. A 5xx or 429 is not kept, nor a stream.",
    "schema": {"type": "string", "pattern": "^[\\x20-\\x7e]{1,255}$"},
}


def _header(name: str) -> dict[str, str]:
    return {"$ref": "#/components/headers/" + name}


def mark(paths: dict[str, Any]) -> None:
    """Add the key to each of OPERATIONS in `paths` (built by the other modules)."""
    for path, method in OPERATIONS:
        operation = paths[path][method]
        operation["parameters"] = [*operation.get("parameters", []), PARAMETER]
        for status, response in operation["responses"].items():
            if status.startswith(("2", "4")):
                response.setdefault("headers", {})["Idempotent-Replayed"] = _header("Idempotent-Replayed")
        body = {"application/json": {"schema": error_schema(path)}}
        limited = {name: _header(name) for name in ("X-Request-Id", "X-RateLimit-Limit", "X-RateLimit-Remaining")}
        operation["responses"]["409"] = {
            "description": "A request with this Idempotency-Key is still being answered: retry after Retry-After.",
            "headers": {**limited, "Retry-After": _header("Retry-After")}, "content": body}
        operation["responses"]["422"] = {
            "description": "Validation failed, or the Idempotency-Key was sent before with another request.",
            "headers": {**limited, "Idempotent-Replayed": _header("Idempotent-Replayed")}, "content": body}
