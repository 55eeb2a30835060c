"""One application error type, rendered in the shape of the surface that was called (spec 7.1).

Views and services raise `ApiError` (or one of its named subclasses); `render_error` turns it
into the body the spec gives for the path of the request. The path decides the surface (the
table of paths: gateway/web/paths.py), and the surface the body:

- `anthropic`               `{type: 'error', error: {type, message}, request_id}` (the id Anthropic's
                            schema requires beside the spec's fields: the request's `X-Request-Id`)
- `openai`                  `{error: {message, type, param, code}}`
- `native-auth`             `{status: 'error', message, errors}`
- `native-status`           `{status: 'error', message}`
- `native-collections`      `{status: 'error', code, message}`
- `native`                  `{detail}`
- `gemini`, `gemini-v1`     Google's `{error: {code, message, status}}` (the Gemini API: /v1beta/ and
                            `/v1/models/{model}:{method}`); on the latter a 401 and the framework's
                            errors are every /v1 path's (rules 7.1.1, 7.1.2), on /v1beta/ Google's too

Some errors have one shape whatever the endpoint: an authentication failure (401
`Unauthenticated.` on `/api`, the OpenAI `invalid_api_key` object on all of `/v1`, rule 7.1.1),
a validation failure on `/api` (422 `{message, errors}`), and the framework-level errors (an
endpoint's own request ceiling, an unknown route, a wrong method), which are `{message}` JSON on
`/api` and on `/v1` only when the client accepts JSON, an HTML page otherwise (rule 7.1.2).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string

from gateway.telemetry import call_facts
from gateway.web.paths import (
    ANTHROPIC,
    GEMINI,
    GEMINI_V1,
    NATIVE_AUTH,
    NATIVE_COLLECTIONS,
    NATIVE_STATUS,
    OPENAI,
    V1_SURFACES,
    surface_of,
)

OPENAI_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}
ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    409: "invalid_request_error",  # an Idempotency-Key still being answered (accounts/idempotency.py)
    413: "request_too_large",
    415: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    504: "timeout_error",
    529: "overloaded_error",
}
# Google's canonical codes (google.rpc.Code) by HTTP status, as the Gemini API names them.
GOOGLE_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    405: "INVALID_ARGUMENT",
    409: "ABORTED",
    413: "INVALID_ARGUMENT",
    415: "INVALID_ARGUMENT",
    422: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


@dataclass(eq=False)
class ApiError(Exception):
    """An error the client is meant to see. `code` is a short machine word for the OpenAI
    `code` field and the collections `code` field; `errors` holds validation messages per field;
    `extra` adds fields to the body (for instance `retry_after` or `partial`)."""

    status: int
    message: str
    code: str | None = None
    param: str | None = None
    errors: dict[str, list[str]] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.status} {self.message}"


class Unauthenticated(ApiError):
    def __init__(self) -> None:
        super().__init__(401, "Unauthenticated.", code="invalid_api_key")


class ValidationFailed(ApiError):
    def __init__(self, errors: dict[str, list[str]], message: str | None = None) -> None:
        first = next(iter(errors.values()))[0] if errors else "The given data was invalid."
        super().__init__(422, message or first, code="validation_failed", errors=errors)


class FrameworkError(ApiError):
    """Errors raised below the endpoints: an endpoint's own ceiling, an unknown route, a method
    the route does not take. `{message}` JSON, or HTML on `/v1` without `Accept: application/json`."""


class TooManyAttempts(FrameworkError):
    def __init__(self, headers: dict[str, str]) -> None:
        super().__init__(429, "Too Many Attempts.", code="rate_limit_exceeded", headers=headers)


class GeneralLimitReached(ApiError):
    """The separate 300-per-minute counter (spec 8.3): `{codigo, detail}` on `/api`."""

    def __init__(self, headers: dict[str, str]) -> None:
        super().__init__(
            429,
            "Limite de requisições atingido. Tente novamente em instantes.",
            code="limite_de_requisicoes",
            headers=headers,
        )


class ServiceUnavailable(ApiError):
    """PostgreSQL, Redis or the task queue cannot be reached: 503 with Retry-After."""

    def __init__(self, what: str, retry_after: int) -> None:
        super().__init__(
            503,
            f"The service is briefly unavailable ({what} cannot be reached); retry in {retry_after} seconds.",
            code="service_unavailable",
            headers={"Retry-After": str(retry_after)},
        )


def outage_of(exc: BaseException) -> str | None:
    """What an exception says cannot be reached ('the database', 'the cache', 'the task queue'),
    or None when it is not an outage: a connection refused, lost or timed out, a pool that
    could not hand out a connection (psycopg_pool's PoolTimeout is an OperationalError), a Redis
    still loading its data."""
    for what, types in _outage_types():
        if isinstance(exc, types):
            return what
    return None


_OUTAGE_TYPES: tuple[tuple[str, tuple[type[BaseException], ...]], ...] | None = None


def _outage_types() -> tuple[tuple[str, tuple[type[BaseException], ...]], ...]:
    global _OUTAGE_TYPES
    if _OUTAGE_TYPES is None:
        from django.db import InterfaceError, OperationalError

        database: list[type[BaseException]] = [OperationalError, InterfaceError]
        cache: list[type[BaseException]] = []
        queue: list[type[BaseException]] = []
        try:
            import psycopg

            database += [psycopg.OperationalError, psycopg.InterfaceError]
        except ImportError:
            pass
        try:
            from redis import exceptions as redis_exceptions

            # with Sentinel, a failover: MasterNotFoundError is a ConnectionError; ReadOnlyError, a demoted primary
            cache += [redis_exceptions.ConnectionError, redis_exceptions.TimeoutError,
                      redis_exceptions.BusyLoadingError, redis_exceptions.ReadOnlyError]
        except ImportError:
            pass
        try:
            from kombu.exceptions import OperationalError as BrokerError

            queue.append(BrokerError)
        except ImportError:
            pass
        _OUTAGE_TYPES = (("the database", tuple(database)), ("the cache", tuple(cache)),
                         ("the task queue", tuple(queue)))
    return _OUTAGE_TYPES


def accepts_json(request: HttpRequest) -> bool:
    accept = request.headers.get("Accept", "").lower()
    return "/json" in accept or "+json" in accept


def render_error(request: HttpRequest, exc: ApiError) -> HttpResponse:
    call_facts.error_given(exc.code or OPENAI_TYPES.get(exc.status, "server_error" if exc.status >= 500 else "error"))
    surface = surface_of(request.path)
    response = _render_body(request, exc, surface)
    for name, value in exc.headers.items():
        response[name] = value
    return response


def _render_body(request: HttpRequest, exc: ApiError, surface: str) -> HttpResponse:
    status = exc.status
    on_v1 = surface in V1_SURFACES

    if surface == GEMINI or (surface == GEMINI_V1 and not isinstance(exc, (FrameworkError, Unauthenticated))):
        return JsonResponse(google_body(exc), status=status)

    if isinstance(exc, FrameworkError):
        if on_v1 and not accepts_json(request):
            html = render_to_string("errors/framework.html", {"status": status, "message": exc.message})
            return HttpResponse(html, status=status, content_type="text/html; charset=utf-8")
        return JsonResponse({"message": exc.message}, status=status)

    if isinstance(exc, Unauthenticated):
        if on_v1:
            return JsonResponse(_openai_body(exc, status, error_type="invalid_request_error"), status=status)
        return JsonResponse({"message": "Unauthenticated."}, status=status)

    if surface == OPENAI:
        return JsonResponse(_openai_body(exc, status), status=status)
    if surface == ANTHROPIC:  # Anthropic's schema requires the request's id beside the error
        body = {"type": "error", "error": {"type": ANTHROPIC_TYPES.get(status, "api_error"), "message": exc.message},
                "request_id": getattr(request, "request_id", None)}
        body.update(exc.extra)
        return JsonResponse(body, status=status)

    if isinstance(exc, GeneralLimitReached):
        return JsonResponse({"codigo": exc.code, "detail": exc.message}, status=status)

    if surface == NATIVE_AUTH:
        body = {"status": "error", "message": exc.message, "errors": exc.errors or {}}
    elif isinstance(exc, ValidationFailed):
        body = {"message": exc.message, "errors": exc.errors}
    elif surface == NATIVE_STATUS:
        body = {"status": "error", "message": exc.message}
    elif surface == NATIVE_COLLECTIONS:
        body = {"status": "error", "code": exc.code or _default_code(status), "message": exc.message}
    else:
        body = {"detail": exc.message}
    body.update(exc.extra)
    return JsonResponse(body, status=status)


def google_body(exc: ApiError) -> dict[str, Any]:
    """Google's error body; the spec's extra fields (`partial`, `retry_after`) beside `error`."""
    status = GOOGLE_STATUS.get(exc.status, "INTERNAL" if exc.status >= 500 else "FAILED_PRECONDITION")
    body: dict[str, Any] = {"error": {"code": exc.status, "message": exc.message, "status": status}}
    body.update(exc.extra)
    return body


def _openai_body(exc: ApiError, status: int, error_type: str | None = None) -> dict[str, Any]:
    fallback_type = "server_error" if status >= 500 else "invalid_request_error"
    body: dict[str, Any] = {
        "error": {
            "message": exc.message,
            "type": error_type or OPENAI_TYPES.get(status, fallback_type),
            "param": exc.param,
            "code": exc.code,
        }
    }
    body.update(exc.extra)
    return body


def _default_code(status: int) -> str:
    return {
        400: "bad_request",
        401: "unauthenticated",
        403: "forbidden",
        404: "not_found",
        413: "payload_too_large",
        422: "validation_failed",
        429: "rate_limited",
    }.get(status, "server_error" if status >= 500 else "error")
