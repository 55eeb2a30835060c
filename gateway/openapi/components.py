"""Shared pieces of the OpenAPI document: error bodies per surface, headers, small builders.

The error bodies follow gateway/web/errors.py (spec 7.1): the fixed inner objects are closed
(`additionalProperties: false`); the top level stays open because `ApiError.extra` may add fields
(`partial`, `retry_after`, `request_id`).
"""

from __future__ import annotations

from typing import Any

from gateway.web import paths

REF = "#/components/schemas/"

NULLABLE_STRING = {"type": ["string", "null"]}
# Every timestamp has the one shape gateway/web/output.py writes (verify's `checked_at` is the spec's exception).
TIMESTAMP_PATTERN = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$"
TIMESTAMP = {"type": "string", "format": "date-time", "pattern": TIMESTAMP_PATTERN}
# An amount of money as exact decimal text in the installation's currency, "0.004200" (a float would
# not round-trip).
MONEY = {"type": "string", "pattern": r"^\d+\.\d+$"}
NULLABLE_MONEY = {"type": ["string", "null"], "pattern": r"^\d+\.\d+$"}
NULLABLE_TIMESTAMP = {"type": ["string", "null"], "format": "date-time", "pattern": TIMESTAMP_PATTERN}


def ref(name: str) -> dict[str, str]:
    return {"$ref": REF + name}


def obj(required: dict[str, Any], optional: dict[str, Any] | None = None, *, closed: bool = False) -> dict[str, Any]:
    """An object schema: `required` fields must be present; `closed` forbids any other."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {**required, **(optional or {})},
        "required": list(required),
    }
    if closed:
        schema["additionalProperties"] = False
    return schema


ANY_OBJECT: dict[str, Any] = {"type": "object"}

SCHEMAS: dict[str, Any] = {
    # --- errors ---------------------------------------------------------------------------
    "OpenAIError": obj({"error": obj({
        "message": {"type": "string"},
        "type": {"type": "string"},
        "param": NULLABLE_STRING,
        "code": NULLABLE_STRING,
    }, closed=True)}),
    # Google's error body (the Gemini API's surface), the spec's `partial` or `retry_after` beside it
    "GoogleError": obj({"error": obj({"code": {"type": "integer"}, "message": {"type": "string"},
                                      "status": {"type": "string"}}, closed=True)}),
    "AnthropicError": obj({
        "type": {"const": "error"},
        "error": obj({"type": {"type": "string"}, "message": {"type": "string"}}, closed=True),
    }, {"request_id": NULLABLE_STRING}),
    "AuthError": obj({
        "status": {"const": "error"},
        "message": {"type": "string"},
        "errors": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}},
    }),
    "StatusError": obj({"status": {"const": "error"}, "message": {"type": "string"}}),
    "CollectionError": obj({"status": {"const": "error"}, "code": {"type": "string"}, "message": {"type": "string"}}),
    "Detail": obj({"detail": {"type": "string"}}),
    "ValidationError": obj({
        "message": {"type": "string"},
        "errors": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}},
    }),
    "Message": obj({"message": {"type": "string"}}, closed=True),
    "GeneralLimit": obj({"codigo": {"const": "limite_de_requisicoes"}, "detail": {"type": "string"}}, closed=True),
    "HookError": obj({"error": {"type": "string"}}),
    "HookAnswer": obj({"ok": {"const": True}}, {
        "ignored": {"enum": ["disabled", "disabled_routine", "duplicate", "rate_limited"]},
        "queued": {"type": "boolean"},
        "event_id": {"type": "string"},
    }),
    "JsonRpcMessage": {"type": ["object", "array"]},
    "JsonRpcResponse": {
        **obj({"jsonrpc": {"const": "2.0"}, "id": {"type": ["string", "integer", "null"]}},
              {"result": {}, "error": obj({"code": {"type": "integer"}, "message": {"type": "string"}},
                                          {"data": {}}, closed=True)}, closed=True),
        "oneOf": [{"required": ["result"]}, {"required": ["error"]}],
    },
    "JsonRpcAnswer": {"anyOf": [{"$ref": REF + "JsonRpcResponse"},
                                {"type": "array", "minItems": 1, "items": {"$ref": REF + "JsonRpcResponse"}}]},
    # The schema of a text/event-stream body describes each of its events (OpenAPI 3.1 leaves streams
    # open; 3.2 names this `itemSchema`, and schemathesis reads 3.1 documents so): the event's name
    # (`message` when the frame gives none) and its `data` lines joined.
    "ServerSentEvent": {**obj({"event": {"type": "string"}, "data": {"type": "string"}},
                              {"id": {"type": "string"}, "retry": {"type": "integer", "minimum": 0}}, closed=True),
                        "description": "One event of a text/event-stream reply."},
}

HEADERS: dict[str, Any] = {
    "X-Request-Id": {"required": True,
                     "description": "On every response; a client's own id (up to 64 of letters, digits, - and _) "
                     "is returned unchanged.", "schema": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"}},
    "X-RateLimit-Limit": {"description": "Ceiling of this endpoint.", "schema": {"type": "string",
                                                                              "pattern": "^[0-9]+$"}},
    "X-RateLimit-Remaining": {"description": "Requests left in the window.",
                              "schema": {"type": "string", "pattern": "^[0-9]+$"}},
    "X-RateLimit-Reset": {"description": "On 429: the window's end as Unix time.",
                          "schema": {"type": "string", "pattern": "^[0-9]+$"}},
    "Retry-After": {"description": "On 429 and some 503: seconds to wait.",
                    "schema": {"type": "string", "pattern": "^[0-9]+$"}},
    "X-Inference-Request-Id": {"description": "On /v1 endpoints and on the chat stream.", "schema": {"type": "string"}},
}

SECURITY_SCHEMES = {
    "bearer": {"type": "http", "scheme": "bearer",
               "description": "An API key (`svc_usr_<id>_<secret>`) or a session token from login."},
    "apiKeyHeader": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
    "session": {"type": "http", "scheme": "bearer", "description": "A session token from login only."},
}

CREDENTIAL = [{"bearer": []}, {"apiKeyHeader": []}]
SESSION = [{"session": []}]
NO_CREDENTIAL: list = []


# The error bodies of each surface (gateway/web/paths.py says which surface a path speaks)
SHAPES = {
    paths.ANTHROPIC: ["AnthropicError", "OpenAIError", "Message"],  # a 401 takes OpenAI's shape (spec 7.1.1)
    paths.OPENAI: ["OpenAIError", "Message"],
    paths.GEMINI_V1: ["GoogleError", "OpenAIError", "Message"],  # a 401 takes OpenAI's shape (spec 7.1.1)
    paths.GEMINI: ["GoogleError"],
    paths.NATIVE_AUTH: ["AuthError", "Message", "ValidationError", "GeneralLimit"],
    paths.NATIVE_STATUS: ["StatusError", "Message", "ValidationError", "GeneralLimit"],
    paths.NATIVE_COLLECTIONS: ["CollectionError", "Message", "ValidationError", "GeneralLimit"],
    paths.NATIVE: ["Detail", "Message", "ValidationError", "GeneralLimit"],
}


def error_schema(path: str) -> dict[str, Any]:
    """Every JSON error body a route of `path` may answer (surface shape, auth, validation, framework)."""
    if path == "/api/v1/mcp":  # transport refusals are JSON-RPC errors with an HTTP status
        shapes = ["JsonRpcResponse", "Detail", "Message", "ValidationError", "GeneralLimit"]
    elif path.startswith("/api/v1/hooks/"):  # the webhook's own refusals (spec 4.7)
        shapes = ["HookError", "Message", "Detail"]
    else:
        shapes = SHAPES[paths.surface_of(path)]
    return {"anyOf": [ref(name) for name in shapes]}


def _headers(*names: str) -> dict[str, Any]:
    return {name: {"$ref": "#/components/headers/" + name} for name in ("X-Request-Id", *names)}


def json_response(description: str, schema: dict[str, Any], *, limited: bool = True) -> dict[str, Any]:
    return {
        "description": description,
        "headers": _headers(*(("X-RateLimit-Limit", "X-RateLimit-Remaining") if limited else ())),
        "content": {"application/json": {"schema": schema}},
    }


def error_responses(path: str) -> dict[str, Any]:
    html = {"text/html": {"schema": {"type": "string"}}} if paths.surface_of(path) in paths.V1_SURFACES else {}
    body = {"application/json": {"schema": error_schema(path)}, **html}
    # No 301 here: the https redirect (SECURE_SSL_REDIRECT) answers before any route, so the document
    # says so once, in its description, rather than on every operation.
    return {
        "4XX": {"description": "Refused, in the error shape of the route's surface; a 401 carries no "
                               "rate-limit headers.",
                "headers": _headers("X-RateLimit-Limit", "X-RateLimit-Remaining", "Retry-After",
                                    "X-RateLimit-Reset"),
                "content": body},
        "5XX": {"description": "Upstream or service failure; 503 may carry Retry-After.",
                "headers": _headers("Retry-After"),
                "content": body},
    }


def operation(path: str, summary: str, responses: dict[str, Any], *, security=CREDENTIAL,
              body: dict[str, Any] | None = None, body_type: str = "application/json",
              tags: list[str] | None = None, stream: bool = False, description: str | None = None) -> dict[str, Any]:
    """One operation; `stream` adds `text/event-stream` to the 200. The summary is plain text (one line in
    the console's Swagger UI); the description may be Markdown."""
    op: dict[str, Any] = {"summary": summary, "security": security,
                          "responses": {**responses, **error_responses(path)}}
    if description:
        op["description"] = description
    if tags:
        op["tags"] = tags
    if body is not None:
        op["requestBody"] = {"required": True, "content": {body_type: {"schema": body}}}
    if stream:
        ok = op["responses"].setdefault("200", {"description": "Streamed reply", "content": {}})
        ok.setdefault("content", {})["text/event-stream"] = {"schema": ref("ServerSentEvent")}
    return op


def id_param(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "integer", "minimum": 0}}


def str_param(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
