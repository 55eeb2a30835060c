"""The OpenAPI 3.1 document of /api/v1 and /v1 (issue 12, item 5), built from small modules.

`document()` returns the dict (built once per process); `views.openapi_json` serves it at
`GET /api/v1/openapi.json`. tests/contract.py validates every response a test receives against it.

May import: every other part of the gateway but `console` and `ops` (it describes, never calls).
"""

from __future__ import annotations

import copy
from functools import lru_cache
from typing import Any

from gateway.openapi import components, idempotency, native_paths, routines_paths, v1_paths


@lru_cache(maxsize=1)
def _build() -> dict[str, Any]:
    from django.conf import settings

    paths: dict[str, Any] = {}
    for module in (routines_paths, native_paths, v1_paths):
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
            "description": "The native surface (/api/v1) and the compatibility surfaces (/v1). Error bodies "
                           "follow spec 7.1 per surface; `X-Request-Id` is on every response; limited "
                           "endpoints carry `X-RateLimit-Limit`/`-Remaining`, and on 429 `Retry-After` and "
                           "`X-RateLimit-Reset`. Streams are `text/event-stream`.",
        },
        "servers": [{"url": "/"}],
        "security": components.CREDENTIAL,
        "tags": [{"name": name} for name in ("account", "routines", "channels", "native", "compat", "meta")],
        "paths": paths,
        "components": {
            "schemas": {**components.SCHEMAS, **routines_paths.SCHEMAS, **native_paths.SCHEMAS, **v1_paths.SCHEMAS},
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
