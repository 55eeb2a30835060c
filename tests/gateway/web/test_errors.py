"""Error shapes per surface (7.1), request ids (7.4), and bodies that must never cause a 500."""

import pytest
from django.test import RequestFactory

from gateway.web.errors import ApiError, Unauthenticated, render_error
from tests.contract import assert_auth_failure, assert_openai_error
from tests.factories import PASSWORD, api_key_for, bearer

LOGIN = "/api/v1/auth/login"


def test_a_client_request_id_is_returned_unchanged(client, owner):
    rid = "A" * 30 + "-_" + "9" * 32  # 64 characters
    r = client.get("/api/v1/version", headers={**bearer(api_key_for(owner)), "X-Request-Id": rid})
    assert r["X-Request-Id"] == rid


@pytest.mark.parametrize("sent", ["A" * 65, "has space", "semi;colon", "ünï", ""])
def test_an_unfit_request_id_is_replaced(client, db, sent):
    r = client.get("/api/v1/version", headers={"X-Request-Id": sent})
    assert r["X-Request-Id"] != sent
    assert 1 <= len(r["X-Request-Id"]) <= 64


@pytest.mark.parametrize("path", ["/api/v1/version", "/v1/models", "/nowhere", "/v1/nowhere", "/admin/login/"])
def test_every_response_has_a_request_id(client, db, path):
    assert client.get(path)["X-Request-Id"]


def test_an_unknown_v1_route_is_json_only_with_accept_json(client, db):
    r = client.get("/v1/nowhere", headers={"Accept": "application/json"})
    assert r.status_code == 404
    assert r.json() == {"message": "Not Found."}
    html = client.get("/v1/nowhere", headers={"Accept": "text/html"})
    assert html.status_code == 404
    assert html["Content-Type"].startswith("text/html")
    assert b"Not Found." in html.content


def test_an_unknown_api_route_is_json(client, db):
    r = client.get("/api/v1/nowhere", headers={"Accept": "text/html"})
    assert r.status_code == 404
    assert r.json() == {"message": "Not Found."}


def test_a_wrong_method_is_405_with_allow(client, db):
    r = client.delete("/api/v1/version")
    assert r.status_code == 405
    assert r["Allow"] == "GET"
    assert r.json() == {"message": "Method Not Allowed."}
    assert client.post("/v1/models", headers={"Accept": "application/json"}).status_code == 405


def test_malformed_json_is_400(client, owner):
    assert_auth_failure(client.post(LOGIN, b"{nope", content_type="application/json"), 400)


def test_a_json_array_is_400(client, owner):
    assert_auth_failure(client.post(LOGIN, b"[1, 2]", content_type="application/json"), 400)


def test_invalid_utf8_is_400(client, owner):
    assert_auth_failure(client.post(LOGIN, b'{"email": "\xff\xfe"}', content_type="application/json"), 400)


def test_a_wrong_content_type_is_415(client, owner):
    r = client.post(LOGIN, f"email={owner.email}&password={PASSWORD}", content_type="application/x-www-form-urlencoded")
    assert_auth_failure(r, 415)


def test_an_oversized_body_is_413(client, owner, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    r = client.post(LOGIN, b'{"email": "' + b"a" * 2000 + b'"}', content_type="application/json")
    assert_auth_failure(r, 413)


def test_a_deeply_nested_body_is_400_not_500(client, owner):
    r = client.post(LOGIN, b"[" * 100000 + b"]" * 100000, content_type="application/json")
    assert_auth_failure(r, 400)


@pytest.mark.parametrize(
    "path, expected",
    [
        ("/v1/chat/completions", {"error": {"message": "Unauthenticated.", "type": "invalid_request_error",
                                            "param": None, "code": "invalid_api_key"}}),
        ("/v1/messages", {"error": {"message": "Unauthenticated.", "type": "invalid_request_error",
                                    "param": None, "code": "invalid_api_key"}}),
        ("/api/v1/chat", {"message": "Unauthenticated."}),
        ("/api/v1/collections", {"message": "Unauthenticated."}),
    ],
)
def test_a_401_has_one_shape_per_surface(path, expected):
    """Rule 7.1.1: on /v1 a 401 uses the chat-completions shape, /v1/messages included."""
    response = render_error(RequestFactory().post(path), Unauthenticated())
    assert response.status_code == 401
    assert __import__("json").loads(response.content) == expected


@pytest.mark.parametrize(
    "path, expected",
    [
        ("/v1/chat/completions", {"error": {"message": "m", "type": "permission_error", "param": None,
                                            "code": "permission_denied"}}),
        ("/v1/messages", {"type": "error", "error": {"type": "permission_error", "message": "m"}, "request_id": "r-1"}),
        ("/api/v1/agent/chat", {"detail": "m"}),
        ("/api/v1/conversations/3", {"status": "error", "message": "m"}),
        ("/api/v1/collections/3", {"status": "error", "code": "permission_denied", "message": "m"}),
        ("/api/v1/auth/verify", {"status": "error", "message": "m", "errors": {}}),
    ],
)
def test_other_errors_take_the_shape_of_their_surface(path, expected):
    request = RequestFactory().post(path)
    request.request_id = "r-1"  # as gateway/web/middleware.py sets it
    response = render_error(request, ApiError(403, "m", code="permission_denied"))
    assert response.status_code == 403
    assert __import__("json").loads(response.content) == expected


def test_the_openai_error_helper_matches_a_real_refusal(client, db):
    assert_openai_error(client.get("/v1/models"), 401, type="invalid_request_error", code="invalid_api_key")


@pytest.mark.parametrize(
    "path, expected",
    [
        ("/api/v1/auth/verify", {"status": "error", "message": "Server Error.", "errors": {}}),
        ("/api/v1/version", {"detail": "Server Error."}),
        ("/v1/models", {"error": {"message": "Server Error.", "type": "server_error", "param": None,
                                  "code": "server_error"}}),
    ],
)
def test_an_unexpected_failure_is_a_json_500_without_a_trace(client, owner, monkeypatch, path, expected):
    def explode(*args, **kwargs):
        raise RuntimeError("secret internals")

    monkeypatch.setattr("accounts.views.account_identity", explode)
    monkeypatch.setattr("native.views.settings", None)
    monkeypatch.setattr("compat.views.usable_targets", explode)
    client.raise_request_exception = False
    r = client.get(path, headers={**bearer(api_key_for(owner)), "X-Request-Id": "trace-me"})
    assert r.status_code == 500
    assert r.json() == expected
    assert b"secret internals" not in r.content and b"Traceback" not in r.content
    assert r["X-Request-Id"] == "trace-me"
