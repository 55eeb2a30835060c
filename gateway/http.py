"""Reading request bodies without ever answering 500 (spec 7.4's robustness rules), and writing
timestamps in answers."""

from __future__ import annotations

import json
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest

from gateway.errors import ApiError


def read_body(request: HttpRequest) -> bytes:
    try:
        return request.body
    except RequestDataTooBig:
        raise ApiError(413, "The request body is too large.", code="request_too_large") from None


def read_json_object(request: HttpRequest) -> dict[str, Any]:
    """The body as a JSON object. An empty body is an empty object; anything that is not a JSON
    object in UTF-8, or is sent with a content type other than JSON, is a 400 or 415."""
    body = read_body(request)
    content_type = request.content_type or ""
    if body.strip() == b"":
        return {}
    if content_type and "json" not in content_type and content_type != "text/plain":
        raise ApiError(415, "The request body must be JSON (Content-Type: application/json).", code="unsupported_media_type")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise ApiError(400, "The request body is not valid UTF-8.", code="invalid_encoding") from None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):  # ValueError: also an integer of more than 4300 digits
        raise ApiError(400, "The request body is not valid JSON.", code="invalid_json") from None
    if not isinstance(data, dict):
        raise ApiError(400, "The request body must be a JSON object.", code="invalid_json")
    return data


def timestamp(moment) -> str | None:
    """An aware datetime in ISO 8601 with `Z` for UTC (None stays None)."""
    return moment.isoformat().replace("+00:00", "Z") if moment is not None else None
