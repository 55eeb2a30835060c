"""The OpenAPI 3.1 document: well-formed, complete against the URLconf, served,
rendered in the admin, and used by tests/contract.py to check every test client response."""

import re

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from jsonschema import Draft202012Validator

from gateway.openapi import document
from tests.contract import ContractViolation, check_response, documented_path
from tests.factories import AccountFactory

METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}
DOCUMENTED_PREFIXES = ("api/", "v1/", "v1beta/")


def _url_paths(patterns, prefix=""):
    for entry in patterns:
        if isinstance(entry, URLResolver):
            yield from _url_paths(entry.url_patterns, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            yield prefix + str(entry.pattern)


def _as_template(route):
    return "/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route)


def _schemas(node):
    """Every schema object of the document (components, parameters, bodies, responses, headers)."""
    if isinstance(node, dict):
        if "schema" in node and isinstance(node["schema"], dict):
            yield node["schema"]
        for value in node.values():
            yield from _schemas(value)
    elif isinstance(node, list):
        for value in node:
            yield from _schemas(value)


def test_the_document_is_openapi_3_1_with_the_required_structure():
    doc = document()
    assert doc["openapi"].startswith("3.1.")
    assert {"title", "version"} <= set(doc["info"])
    assert doc["jsonSchemaDialect"] == "https://json-schema.org/draft/2020-12/schema"
    for path, item in doc["paths"].items():
        assert path.startswith("/"), path
        names = set(re.findall(r"\{(\w+)\}", path))
        declared = {p["name"] for p in item.get("parameters", []) if p["in"] == "path"}
        assert names == declared, (path, names, declared)
        for p in item.get("parameters", []):
            assert p["required"] is True
        operations = {k: v for k, v in item.items() if k in METHODS}
        assert operations and set(item) <= METHODS | {"parameters"}, path
        for method, op in operations.items():
            assert op["responses"], (method, path)
            for status, response in op["responses"].items():
                assert re.fullmatch(r"[1-5](\d\d|XX)|default", status), (path, status)
                assert response["description"]
                for header in response.get("headers", {}).values():
                    assert header["$ref"].startswith("#/components/headers/")
            assert any(s.startswith("2") for s in op["responses"]), (method, path)
            assert {"4XX", "5XX"} <= set(op["responses"]), (method, path)
    for scheme in doc["components"]["securitySchemes"].values():
        assert scheme["type"] in {"http", "apiKey"}


def test_every_schema_is_valid_json_schema_2020_12_and_every_ref_resolves():
    doc = document()
    for name, schema in doc["components"]["schemas"].items():
        Draft202012Validator.check_schema(schema)
    count = 0
    for schema in _schemas(doc):
        Draft202012Validator.check_schema(schema)
        count += 1
    assert count > 100
    text = repr(doc)
    for ref in set(re.findall(r"'\$ref': '#/components/(\w+)/([\w-]+)'", text)):
        assert ref[1] in doc["components"][ref[0]], ref


def test_every_route_of_the_urlconf_is_documented_and_every_documented_path_is_a_route():
    routes = {_as_template(r) for r in _url_paths(get_resolver().url_patterns) if r.startswith(DOCUMENTED_PREFIXES)}
    documented = set(document()["paths"])
    assert routes - documented == set(), "routes missing from the document"
    assert documented - routes == set(), "documented paths that are no route"


def _concrete(template):
    return re.sub(r"\{(\w+)\}", lambda m: "0" * 48 if m.group(1) in ("token", "secret") else "1", template)


@pytest.mark.django_db
def test_the_documented_methods_are_the_methods_each_route_takes(client):
    """A method the document omits answers 405 with an `Allow` naming exactly the documented ones."""
    for template, item in document()["paths"].items():
        documented = {m.upper() for m in item if m in METHODS}
        omitted = "PATCH" if "PATCH" not in documented else "PUT"  # the administration API's items take PATCH
        response = client.generic(omitted, _concrete(template), HTTP_ACCEPT="application/json")
        assert response.status_code == 405, (template, response.status_code)
        allowed = {m.strip() for m in response["Allow"].split(",")} - {"HEAD", "OPTIONS"}
        assert allowed == documented - {"HEAD"}, (template, allowed, documented)


@pytest.mark.django_db
def test_the_document_is_served_without_a_credential(client):
    response = client.get("/api/v1/openapi.json")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/json")
    assert response.json() == document()
    assert "X-Request-Id" in response.headers
    assert client.post("/api/v1/openapi.json").status_code == 405


@pytest.mark.django_db
def test_the_admin_renders_the_routes_for_staff_only(client):
    assert client.get("/admin/api-contract/").status_code == 302  # to the login
    client.force_login(AccountFactory(is_staff=True, is_superuser=True, email="op@example.test"))
    page = client.get("/admin/api-contract/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="swagger-ui" data-url="/api/v1/openapi.json"' in html  # Swagger UI draws the served document
    assert not re.search(r"""(src|href)=["'](https?:)?//""", html)  # nothing loaded from elsewhere
    assert "/admin/api-contract/" in client.get("/admin/").content.decode()  # linked from the index


# --- the contract checker itself -------------------------------------------------------------

HEADERS = {"X-Request-Id": "abc", "Content-Type": "application/json"}


def test_paths_resolve_to_their_templates_literal_before_templated():
    assert documented_path("/api/v1/routines/blueprints") == "/api/v1/routines/blueprints"
    assert documented_path("/api/v1/routines/12") == "/api/v1/routines/{routine_id}"
    assert documented_path("/api/v1/routines/x") is None
    assert documented_path("/v1/messages/count_tokens") == "/v1/messages/count_tokens"


def test_the_checker_accepts_the_spec_shapes():
    check_response("GET", "/v1/models", 401, HEADERS,
                   b'{"error":{"message":"Unauthenticated.","type":"invalid_request_error","param":null,'
                   b'"code":"invalid_api_key"}}')
    check_response("POST", "/v1/messages", 400, HEADERS,
                   b'{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}')
    check_response("POST", "/api/v1/routines", 422, HEADERS, b'{"message":"m","errors":{"name":["m"]}}')
    check_response("GET", "/api/v1/version", 200, HEADERS,
                   b'{"service":"model-gateway","version":"1","api_version":"v1"}')
    check_response("DELETE", "/api/v1/routines/3", 204, {"X-Request-Id": "a"}, b"")
    check_response("POST", "/v1/chat/completions", 200, {**HEADERS, "Content-Type": "text/event-stream"},
                   None, streamed=True)
    check_response("GET", "/admin/", 200, {}, b"<html>")  # not the document's business


@pytest.mark.parametrize("call, needle", [
    (("GET", "/v1/models", 401, HEADERS, b'{"detail":"x"}'), "does not match"),
    (("POST", "/v1/messages", 400, HEADERS, b'{"type":"error","error":{"type":"x","message":"m","extra":1}}'),
     "does not match"),
    (("GET", "/api/v1/version", 200, HEADERS, b'{"service":"s","version":"1"}'), "does not match"),
    (("GET", "/api/v1/version", 201, HEADERS, b"{}"), "status not documented"),
    (("GET", "/api/v1/version", 200, {"Content-Type": "application/json"}, b"{}"), "X-Request-Id"),
    (("GET", "/api/v1/version", 401, {**HEADERS, "X-RateLimit-Limit": "60"}, b'{"message":"Unauthenticated."}'),
     "rate-limit headers"),
    (("GET", "/api/v1/nowhere", 200, HEADERS, b"{}"), "not in the document"),
    (("GET", "/api/v1/version", 429, HEADERS, b'{"message":"Too Many Attempts."}'), "without Retry-After"),
    (("POST", "/api/v1/version", 200, HEADERS, b"{}"), "method is not in the document"),
    (("GET", "/api/v1/version", 200, {**HEADERS, "Content-Type": "text/plain"}, b"x"), "content type"),
])
def test_the_checker_refuses_what_the_document_does_not_allow(call, needle):
    with pytest.raises(ContractViolation, match=needle):
        check_response(*call)
