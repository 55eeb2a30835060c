"""Assertions against the spec's error shapes and header rules (SPEC 5.3, 7.1, 8.2, 8.3)."""

RATE_HEADERS = ("X-RateLimit-Limit", "X-RateLimit-Remaining", "Retry-After", "X-RateLimit-Reset")


def assert_no_rate_headers(response):
    present = [h for h in RATE_HEADERS if h in response.headers]
    assert not present, f"rate-limit headers on a request that failed authentication: {present}"


def assert_native_unauthenticated(response):
    assert response.status_code == 401
    assert response.json() == {"message": "Unauthenticated."}
    assert_no_rate_headers(response)


def assert_v1_unauthenticated(response):
    assert response.status_code == 401
    assert response.json() == {
        "error": {
            "message": "Unauthenticated.",
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_api_key",
        }
    }
    assert_no_rate_headers(response)


def assert_openai_error(response, status, *, type=None, code=None):
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    if type is not None:
        assert body["error"]["type"] == type
    if code is not None:
        assert body["error"]["code"] == code
    return body["error"]


def assert_detail(response, status):
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"detail"}, body
    assert isinstance(body["detail"], str) and body["detail"]
    return body["detail"]


def assert_auth_failure(response, status):
    """The `{status: 'error', message, errors}` shape of the auth endpoints."""
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"status", "message", "errors"}, body
    assert body["status"] == "error"
    assert isinstance(body["message"], str) and body["message"]
    return body


def assert_too_many_attempts(response, ceiling, *, now):
    """An endpoint's own ceiling reached: 429 `{message: 'Too Many Attempts.'}` and all four headers."""
    assert response.status_code == 429
    assert response.json() == {"message": "Too Many Attempts."}
    assert_limit_headers_on_429(response, ceiling, now=now)


def assert_limit_headers_on_429(response, ceiling, *, now):
    assert response["X-RateLimit-Limit"] == str(ceiling)
    assert response["X-RateLimit-Remaining"] == "0"
    retry_after = int(response["Retry-After"])
    reset = int(response["X-RateLimit-Reset"])
    assert 1 <= retry_after <= 60
    assert now < reset <= now + 61


def assert_limit_headers(response, ceiling, remaining):
    assert response["X-RateLimit-Limit"] == str(ceiling)
    assert response["X-RateLimit-Remaining"] == str(remaining)
    assert "Retry-After" not in response.headers
    assert "X-RateLimit-Reset" not in response.headers
