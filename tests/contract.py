"""Assertions against the spec's error shapes and header rules (SPEC 5.3, 7.1, 8.2, 8.3), and the
check of every test response against the OpenAPI document (`check_response`)."""

import json as _json
import re as _re
from functools import lru_cache as _lru_cache

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


# --- The OpenAPI document as a contract -------------------------------------------------------


RATE_LIMIT_HEADERS = ("X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset")


class ContractViolation(AssertionError):
    pass


@_lru_cache(maxsize=1)
def _routes():
    """(regex, template) for every documented path, literal paths before templated ones."""
    from gateway.openapi import cached_document

    doc = cached_document()
    routes = []
    for template, item in doc["paths"].items():
        kinds = {p["name"]: p["schema"].get("format", p["schema"].get("type")) for p in item.get("parameters", [])
                 if p.get("in") == "path"}

        def part(match):  # a `format: path` parameter may hold a `/` (Google's API: a model's `server/model` id)
            return {"integer": "([0-9]+)", "path": "(.+)"}.get(kinds.get(match.group(1)), "([^/]+)")

        pattern = _re.sub(r"\\\{(\w+)\\\}", part, _re.escape(template))
        routes.append((template.count("{"), _re.compile(pattern + r"\Z"), template))
    routes.sort(key=lambda r: r[0])
    return [(regex, template) for _n, regex, template in routes]


def documented_path(path):
    for regex, template in _routes():
        if regex.match(path):
            return template
    return None


@_lru_cache(maxsize=512)
def _validator(template, method, status_key, media):
    from jsonschema import Draft202012Validator

    from gateway.openapi import cached_document

    doc = cached_document()
    if method is None:  # a method the route does not take: its 4XX error bodies
        media_schema = doc["paths"][template][next(m for m in doc["paths"][template] if m != "parameters")]
        schema = media_schema["responses"]["4XX"]["content"][media]["schema"]
    else:
        schema = doc["paths"][template][method]["responses"][status_key]["content"][media]["schema"]
    schema = {**schema, "components": doc["components"]}
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def _response_for(operation, status):
    responses = operation["responses"]
    for key in (str(status), f"{str(status)[0]}XX", "default"):
        if key in responses:
            return key, responses[key]
    return None, None


def check_response(method, path, status, headers, body, *, streamed=False):
    """Raise ContractViolation when a response to `method path` is outside the document.
    `headers` is a case-insensitive mapping; `body` the raw bytes (None for a stream). Paths
    outside /api and /v1 are not the document's business."""
    from gateway.web.paths import is_api_path

    if not is_api_path(path):
        return
    from gateway.openapi import cached_document

    where = f"{method} {path} -> {status}"
    if "X-Request-Id" not in headers:
        raise ContractViolation(f"{where}: no X-Request-Id header")
    if not _re.fullmatch(r"[A-Za-z0-9_-]{1,64}", headers["X-Request-Id"]):
        raise ContractViolation(f"{where}: X-Request-Id {headers['X-Request-Id']!r} is not 1 to 64 of [A-Za-z0-9_-]")
    if status == 301 and (headers.get("Location") or "").startswith("https://"):
        return  # SECURE_SSL_REDIRECT answers before any route: the document says so once, not per route
    template = documented_path(path)
    if template is None:
        if status == 404:
            return  # an unknown route: the framework's 404 ({message} or HTML)
        raise ContractViolation(f"{where}: the path is not in the document")
    item = cached_document()["paths"][template]
    operation = item.get(method.lower())
    content_type = (headers.get("Content-Type") or "").split(";")[0].strip().lower()
    if operation is None:
        if method.upper() in ("HEAD", "OPTIONS") or status in (404, 405):
            if status in (404, 405) and content_type == "application/json" and body:
                _validate_json(where, _validator(template, None, "4XX", "application/json"), body)
            return
        raise ContractViolation(f"{where}: the method is not in the document for {template}")
    if status == 401 and operation.get("security", True) != []:  # a credential refused (spec 5.3.5, 8.2)
        present = [h for h in (*RATE_LIMIT_HEADERS, "Retry-After") if h in headers]
        if present:
            raise ContractViolation(f"{where}: rate-limit headers on a 401: {present}")
    if status == 429 and "Retry-After" not in headers:  # spec 7.2, 8.2
        raise ContractViolation(f"{where}: a 429 without Retry-After")
    key, response = _response_for(operation, status)
    if response is None:
        raise ContractViolation(f"{where}: status not documented for {method.upper()} {template} "
                                f"(documented: {sorted(operation['responses'])})")
    content = response.get("content") or {}
    if not content_type or not (body or streamed):
        return  # no body (204, 202)
    media = _media(content, content_type)
    if media is None:
        raise ContractViolation(f"{where}: content type {content_type!r} not documented "
                                f"(documented: {sorted(content)})")
    if streamed or media != "application/json":
        return  # streams and non-JSON bodies: the media type is all that is checked
    _validate_json(where, _validator(template, method.lower(), key, media), body)


def _media(content, content_type):
    if content_type in content:
        return content_type
    major = content_type.split("/")[0]
    if f"{major}/*" in content:
        return f"{major}/*"
    return "*/*" if "*/*" in content else None


def _validate_json(where, validator, body):
    try:
        data = _json.loads(body)
    except ValueError as exc:
        raise ContractViolation(f"{where}: the body is not JSON ({exc})") from None
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        detail = "; ".join(f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message[:300]}"
                           for e in errors[:5])
        raise ContractViolation(f"{where}: the body does not match the document: {detail}")


def check_django_response(response):
    """The Django test client's response (sync or async client)."""
    request = getattr(response, "wsgi_request", None) or getattr(response, "asgi_request", None)
    environ = getattr(response, "request", None) or {}
    method = environ.get("REQUEST_METHOD") or environ.get("method") or getattr(request, "method", "GET")
    path = environ.get("PATH_INFO") or environ.get("path") or getattr(request, "path", "")
    streamed = bool(getattr(response, "streaming", False))
    body = None if streamed else response.content
    check_response(method, path, response.status_code, response.headers, body, streamed=streamed)


def install_client_checks(skip=lambda path: False, record_to=None):
    """Wrap `django.test.Client.request` and `AsyncClient.request` so that every response a
    test receives is checked against the document. With `record_to` (a file name) a violation
    is appended there instead of failing the test (to survey the suite). Returns an undo function."""
    from django.test import AsyncClient, Client

    sync_request, async_request = Client.request, AsyncClient.request

    def checked(response):
        environ = getattr(response, "request", None) or {}
        path = environ.get("PATH_INFO") or environ.get("path") or ""
        if skip(path):
            return response
        try:
            check_django_response(response)
        except ContractViolation as exc:
            if record_to is None:
                raise
            with open(record_to, "a", encoding="utf-8") as out:
                out.write(f"{exc}\n")
        return response

    def request(self, **kwargs):
        return checked(sync_request(self, **kwargs))

    async def arequest(self, **kwargs):
        return checked(await async_request(self, **kwargs))

    Client.request, AsyncClient.request = request, arequest

    def undo():
        Client.request, AsyncClient.request = sync_request, async_request

    return undo


# --- httpx against the gateway processes that tests start (tests/servers.web_process) ----------

LIVE_BASES: set = set()


def _live_path(url):
    text = str(url)
    for base in LIVE_BASES:
        if text.startswith(base + "/"):
            return text[len(base):].split("?")[0]
    return None


def _check_httpx(request, response, body, streamed):
    path = _live_path(request.url)
    if path is not None:
        check_response(request.method, path, response.status_code, response.headers, body, streamed=streamed)


def install_httpx_checks(record_to=None):
    """Check the responses of `httpx` clients (the openai and anthropic SDKs use them) when they
    come from a gateway process started by `tests.servers.web_process`. Returns an undo function."""
    from contextlib import contextmanager

    import httpx

    from tests import servers

    original_web_process = servers.web_process

    @contextmanager
    def web_process(**extra_env):
        with original_web_process(**extra_env) as base:
            LIVE_BASES.add(base)
            try:
                yield base
            finally:
                LIVE_BASES.discard(base)

    def report(exc):
        if record_to is None:
            raise exc
        with open(record_to, "a", encoding="utf-8") as out:
            out.write(f"{exc} (live)\n")

    def wrap(sync_send, async_send):
        def send(self, request, *args, **kwargs):
            response = sync_send(self, request, *args, **kwargs)
            if _live_path(request.url) is not None:
                streamed = "text/event-stream" in response.headers.get("Content-Type", "")
                if not streamed:
                    response.read()
                try:
                    _check_httpx(request, response, None if streamed else response.content, streamed)
                except ContractViolation as exc:
                    report(exc)
            return response

        async def asend(self, request, *args, **kwargs):
            response = await async_send(self, request, *args, **kwargs)
            if _live_path(request.url) is not None:
                streamed = "text/event-stream" in response.headers.get("Content-Type", "")
                if not streamed:
                    await response.aread()
                try:
                    _check_httpx(request, response, None if streamed else response.content, streamed)
                except ContractViolation as exc:
                    report(exc)
            return response

        return send, asend

    # the openai and anthropic SDKs may ship their own fork of httpx (`httpx2`)
    modules = [httpx]
    try:
        import httpx2

        modules.append(httpx2)
    except ImportError:
        pass
    originals = [(m, m.Client.send, m.AsyncClient.send) for m in modules]
    for module, sync_send, async_send in originals:
        module.Client.send, module.AsyncClient.send = wrap(sync_send, async_send)
    servers.web_process = web_process

    def undo():
        servers.web_process = original_web_process
        for module, sync_send, async_send in originals:
            module.Client.send, module.AsyncClient.send = sync_send, async_send

    return undo
