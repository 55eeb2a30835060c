"""The OpenAPI 3.1 document of /api/v1 and /v1, built from small modules.

`document()` returns the dict (built once per process); `views.openapi_json` serves it at
`GET /api/v1/openapi.json`. tests/contract.py validates every response a test receives against it.

May import: every other part of the gateway but `console` and `ops` (it describes, never calls).
"""

from __future__ import annotations

import copy
from functools import lru_cache
from typing import Any

from gateway.openapi import (
    admin_paths,
    batches_paths,
    components,
    files_paths,
    gemini_paths,
    idempotency,
    native_paths,
    routines_paths,
    v1_paths,
)

# Markdown (Swagger UI in the console renders it). No section numbers of documents a reader does not have.
DESCRIPTION = """\
Two kinds of surface behind one credential:

- **`/v1`**: the OpenAI-compatible routes (chat completions, responses, embeddings, audio, models, files, batches)
  and the Anthropic-compatible `/v1/messages` and its batches, for the official SDKs and the tools built on them.
- **`/api/v1`**: the native API (chat, agent, conversations, collections, profiles, usage, routines, MCP), and
  the administration API under `/api/v1/admin/` (staff session tokens only; an API key is refused with 401).

**Credential.** An API key (`svc_usr_<id>_<secret>`) as `Authorization: Bearer <key>` or `X-API-Key: <key>`;
a few account routes take only a session token from `POST /api/v1/auth/login`. In the console, **Authorize**
takes a key, and **Try it out** sends real requests with it: they are metered like any other call.

**Errors** have the shape of their surface, given by each route's `4XX` and `5XX` schemas:
`{"error": {"message", "type", "param", "code"}}` on the OpenAI routes, `{"type": "error", "error": {...}}` on
`/v1/messages`, and `{"detail"}`, `{"message"}` or `{"status": "error", "message"}` on the native routes.

**Headers.** `X-Request-Id` is on every response (a client's own id of up to 64 letters, digits, `-` and `_`
is returned unchanged). Limited routes carry `X-RateLimit-Limit` and `X-RateLimit-Remaining`; a 429 adds
`Retry-After` and `X-RateLimit-Reset`. Streams are `text/event-stream`.

**https.** When the gateway is set to redirect plain http (`SECURE_SSL_REDIRECT`), a request over http is
answered `301` with the https address in `Location` before it reaches any route below.
"""


@lru_cache(maxsize=1)
def _build() -> dict[str, Any]:
    from django.conf import settings

    paths: dict[str, Any] = {}
    for module in (routines_paths, native_paths, v1_paths, files_paths, batches_paths, gemini_paths, admin_paths):
        paths.update(module.paths())
    idempotency.mark(paths)
    paths["/api/v1/openapi.json"] = {"get": {
        "summary": "This document",
        "security": [],
        "tags": ["meta"],
        "responses": {"200": {"description": "The OpenAPI 3.1 document",
                              "content": {"application/json": {"schema": {"type": "object",
                                                                          "required": ["openapi", "paths"]}}}},
                      **components.error_responses("/api/v1/openapi.json")},
    }}
    return {
        "openapi": "3.1.0",
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "info": {
            "title": "Model Gateway",
            "version": str(getattr(settings, "SERVICE_VERSION", "0")),
            "description": DESCRIPTION,
        },
        "servers": [{"url": "/"}],
        "security": components.CREDENTIAL,
        "tags": [{"name": name} for name in ("account", "routines", "channels", "native", "compat", "admin", "meta")],
        "paths": paths,
        "components": {
            "schemas": {**components.SCHEMAS, **routines_paths.SCHEMAS, **native_paths.SCHEMAS, **v1_paths.SCHEMAS,
                        **files_paths.SCHEMAS, **batches_paths.SCHEMAS,
                        **gemini_paths.SCHEMAS, **admin_paths.SCHEMAS},
            "headers": {**components.HEADERS, **idempotency.HEADERS},
            "securitySchemes": components.SECURITY_SCHEMES,
        },
    }


def document() -> dict[str, Any]:
    """A copy of the document: callers may not change the cached one."""
    return copy.deepcopy(_build())


def cached_document() -> dict[str, Any]:
    """The shared document itself, read-only (the contract checks in the tests use it)."""
    return _build()
