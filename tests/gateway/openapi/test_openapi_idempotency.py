"""The OpenAPI document names `Idempotency-Key` on exactly the operations whose endpoint takes it
(`@endpoint(..., idempotent=True)`, accounts/endpoints.py), with `Idempotent-Replayed` on the answers they
may replay and the 409 and 422 the key adds (gateway/openapi/idempotency.py)."""

import re

from django.urls import get_resolver

from gateway.openapi import document
from gateway.openapi.idempotency import OPERATIONS

METHODS = {"get", "put", "post", "delete", "patch"}
# The POSTs that cost or create: the model calls, and what makes runs and batches (a retried create makes one)
TAKING_THE_KEY = {"/v1/chat/completions", "/v1/messages", "/v1/responses", "/v1/embeddings",
                  "/v1/audio/transcriptions", "/v1/audio/translations", "/v1/audio/speech", "/api/v1/chat",
                  "/api/v1/agent/chat", "/api/v1/agent/run", "/api/v1/routines",
                  "/api/v1/routines/{routine_id}/run-now", "/v1/batches", "/v1/messages/batches"}


def _endpoint(template: str, method: str):
    view = get_resolver().resolve(re.sub(r"\{\w+\}", "1", template)).func
    return getattr(view, "views", {}).get(method.upper(), view)  # a route of several methods (by_method)


def test_the_documented_operations_are_the_endpoints_that_take_the_key():
    doc = document()
    documented = {(path, method) for path, item in doc["paths"].items() for method, op in item.items()
                  if method in METHODS and any(p["name"] == "Idempotency-Key" for p in op.get("parameters", []))}
    assert documented == set(OPERATIONS)
    assert {path for path, _method in OPERATIONS} == TAKING_THE_KEY and all(m == "post" for _p, m in OPERATIONS)
    taking = {(path, method) for path, item in doc["paths"].items() for method in item
              if method in METHODS and getattr(_endpoint(path, method), "idempotent", False)}
    assert taking == set(OPERATIONS)


def test_each_operation_documents_the_header_the_replay_and_the_new_refusals():
    doc = document()
    assert doc["components"]["headers"]["Idempotent-Replayed"]["schema"] == {"type": "string", "enum": ["true"]}
    replayed = {"$ref": "#/components/headers/Idempotent-Replayed"}
    for path, method in OPERATIONS:
        op = doc["paths"][path][method]
        [parameter] = [p for p in op["parameters"] if p["name"] == "Idempotency-Key"]
        assert (parameter["in"], parameter["required"]) == ("header", False)
        assert re.fullmatch(parameter["schema"]["pattern"], "~ " + "k" * 253)
        assert not re.fullmatch(parameter["schema"]["pattern"], "k" * 256)
        success = [status for status in op["responses"] if status.startswith("2")]
        assert success and all(op["responses"][s]["headers"]["Idempotent-Replayed"] == replayed for s in success)
        assert op["responses"]["4XX"]["headers"]["Idempotent-Replayed"] == replayed  # a kept refusal, replayed
        assert op["responses"]["409"]["headers"]["Retry-After"] == {"$ref": "#/components/headers/Retry-After"}
        assert "Idempotency-Key" in op["responses"]["422"]["description"]
