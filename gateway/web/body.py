"""Reading request bodies without ever answering 500 (spec 7.4's robustness rules), and writing
timestamps in answers.

A JSON body is refused at the edge, with the field named, when it holds what Python's `json`
accepts but nothing after it can carry (docs/decisions/0075-bad-input-at-the-edge.md):
`NaN`, `Infinity`, `-Infinity` and numbers too large for a float (`1e400`), which no JSON
encoder downstream writes (httpx refuses them, PostgreSQL's jsonb too); lone surrogates
(`"\\ud800"`), which cannot be encoded as UTF-8 for the model server, the tokenizer or the
database; and, on `/api` where text is stored in PostgreSQL, the NUL character. On `/v1` the
answer is a 400 in the surface's shape with `param` naming the field; on `/api` a 422
`{message, errors: {<field>: [...]}}`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest

from gateway.web.errors import ApiError, ValidationFailed
from gateway.web.paths import COMPAT_SURFACES, OPENAI, surface_of

# Only these escapes can put a lone surrogate or a NUL into a parsed string: a body that is valid
# UTF-8 holds neither as raw characters (and JSON refuses raw control characters in strings).
_SUSPECT_ESCAPE = re.compile(r"\\u(?:0000|[dD][89a-fA-F])")


class _NonFinite:
    """What `NaN`, `Infinity` and an overflowing number parse to, until they are refused."""

    __slots__ = ("literal",)

    def __init__(self, literal: str) -> None:
        self.literal = literal

    def __repr__(self) -> str:
        return self.literal


class BadJsonValue(ValueError):
    """A value the gateway cannot carry, at `path` (a list of keys and indexes)."""

    def __init__(self, path: list[str | int], problem: str) -> None:
        super().__init__(problem)
        self.path, self.problem = path, problem

    def where(self, style: str = "dot") -> str:
        """`messages.0.content` (`dot`, the Anthropic and native style) or `messages[0].content`
        (`bracket`, the OpenAI style); `body` for the body itself."""
        out = ""
        for part in self.path:
            if isinstance(part, int):
                out += f"[{part}]" if style == "bracket" else f".{part}"
            else:  # a key that is itself the bad value is shown escaped
                part = part.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\u0000")
                out += f".{part}" if out else part
        return out.lstrip(".") or "body"


def loads_lenient(text: str) -> tuple[Any, bool]:
    """The parsed JSON, and whether it may hold a value `check_values` refuses (a non-finite
    number was met, or the text has an escape that can make a lone surrogate or a NUL). Raises
    ValueError (or RecursionError) for text that is not JSON."""
    seen: list[bool] = []

    def constant(literal: str) -> _NonFinite:
        seen.append(True)
        return _NonFinite(literal)

    def number(literal: str) -> float | _NonFinite:
        value = float(literal)
        if value in (float("inf"), float("-inf")):
            seen.append(True)
            return _NonFinite(literal)
        return value

    data = json.loads(text, parse_constant=constant, parse_float=number)
    return data, bool(seen) or ("\\u" in text and _SUSPECT_ESCAPE.search(text) is not None)


def check_values(value: Any, *, nul_allowed: bool = False, path: list[str | int] | None = None) -> None:
    """Raises BadJsonValue for the first non-finite number, string (or key) that is not valid
    Unicode (a lone surrogate), or NUL (unless allowed) in `value`."""
    path = [] if path is None else path
    if isinstance(value, str):
        _check_text(value, path, nul_allowed)
    elif isinstance(value, _NonFinite):
        raise BadJsonValue(path, f"{value.literal} is not a number JSON can carry: send a finite number.")
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_text(key, [*path, key], nul_allowed)
            check_values(item, nul_allowed=nul_allowed, path=[*path, key])
    elif isinstance(value, list):
        for index, item in enumerate(value):
            check_values(item, nul_allowed=nul_allowed, path=[*path, index])


def _check_text(text: str, path: list[str | int], nul_allowed: bool) -> None:
    if text.isascii():
        if not nul_allowed and "\x00" in text:
            raise BadJsonValue(path, "The text holds a NUL character (\\u0000), which cannot be stored.")
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise BadJsonValue(path, "The text holds a lone surrogate (such as \\ud800): "
                                 "it is not valid Unicode.") from None
    if not nul_allowed and "\x00" in text:
        raise BadJsonValue(path, "The text holds a NUL character (\\u0000), which cannot be stored.")


def loads_strict(text: str, *, nul_allowed: bool = False) -> Any:
    """JSON text parsed, every value checked (`check_values`): raises ValueError for text that is
    not JSON, BadJsonValue (a ValueError too) for a value the gateway cannot carry."""
    data, suspect = loads_lenient(text)
    if suspect:
        check_values(data, nul_allowed=nul_allowed)
    return data


def bad_value_error(request: HttpRequest, bad: BadJsonValue) -> ApiError:
    """The refusal of a bad value in the surface's shape: 400 with `param` on `/v1`, 422 with the
    field in `errors` on `/api`."""
    surface = surface_of(request.path)
    if surface in COMPAT_SURFACES:
        where = bad.where("bracket" if surface == OPENAI else "dot")
        return ApiError(400, f"{where}: {bad.problem}", code="invalid_value", param=where)
    where = bad.where()
    return ValidationFailed({where: [bad.problem]}, f"{where}: {bad.problem}")


def read_body(request: HttpRequest) -> bytes:
    try:
        return request.body
    except RequestDataTooBig:
        raise ApiError(413, "The request body is too large.", code="request_too_large") from None


def read_json_object(request: HttpRequest) -> dict[str, Any]:
    """The body as a JSON object. An empty body is an empty object; anything that is not a JSON
    object in UTF-8, or is sent with a content type other than JSON, is a 400 or 415; a value the
    gateway cannot carry is refused as the module says. NUL is allowed on `/v1` only, where text
    goes to the model server and is not stored."""
    body = read_body(request)
    content_type = request.content_type or ""
    if body.strip() == b"":
        return {}
    if content_type and "json" not in content_type and content_type != "text/plain":
        raise ApiError(415, "The request body must be JSON (Content-Type: application/json).",
                       code="unsupported_media_type")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(400, "The request body is not valid UTF-8.", code="invalid_encoding") from None
    try:
        data, suspect = loads_lenient(text)
    except (ValueError, RecursionError):  # ValueError: also an integer of more than 4300 digits
        raise ApiError(400, "The request body is not valid JSON.", code="invalid_json") from None
    if not isinstance(data, dict):
        raise ApiError(400, "The request body must be a JSON object.", code="invalid_json")
    if suspect:
        try:
            check_values(data, nul_allowed=surface_of(request.path) in COMPAT_SURFACES)
        except BadJsonValue as bad:
            raise bad_value_error(request, bad) from None
        except RecursionError:
            raise ApiError(400, "The request body is nested too deeply.", code="invalid_json") from None
    return data

