"""Validating request bodies with DRF serializers, failing in the spec's 422 shape."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from gateway.web.errors import ApiError, ValidationFailed


class StrictCharField(serializers.CharField):
    """A JSON string only (DRF's CharField would take 5 as "5")."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


def validated(serializer_class: type[serializers.Serializer], data: dict[str, Any]) -> dict[str, Any]:
    serializer = serializer_class(data=data)
    valid = serializer.is_valid()
    result, found = serializer.validated_data, serializer.errors
    _unbind(serializer)
    if valid:
        return result
    errors = {field: [str(m) for m in _flatten(messages)] for field, messages in found.items()}
    total = sum(len(m) for m in errors.values())
    first = next(iter(errors.values()))[0]
    message = first if total == 1 else f"{first} (and {total - 1} more error{'s' if total > 2 else ''})"
    raise ValidationFailed(errors, message)


def _unbind(serializer: serializers.Serializer) -> None:
    """Undo the reference cycles DRF makes: each bound field points to its parent (and a list
    field to its child and back). Left alone, they keep every field of every request until the
    cyclic garbage collector runs, and its pauses were the p99 under load (bench/README.md)."""
    pending: list[Any] = [serializer]
    while pending:
        node = pending.pop()
        node.__dict__.pop("parent", None)
        fields = node.__dict__.pop("fields", None)  # Serializer.fields, a cached property
        if fields is not None:
            pending.extend(fields.values())
        child = node.__dict__.get("child")
        if child is not None:
            pending.append(child)


def _flatten(messages: Any) -> list[str]:
    if isinstance(messages, dict):
        return [f"{k}: {m}" for k, v in messages.items() for m in _flatten(v)]
    if isinstance(messages, list):
        return [m for item in messages for m in _flatten(item)]
    return [str(messages)]


# ---- the types of a /v1 body's fields ------------------------------------------------------------
#
# The /v1 translators are plain dict code on the hot path, so the fields the spec types are checked
# by this small table-driven function rather than by a serializer: `{"stream": "boolean",
# "stop": "string|array<string>", "stream_options": {"include_usage": "boolean"}}`. A null is
# taken as an absent field (the SDKs send nulls for unset options). A wrong type is a 400 naming
# the field in `param` (docs/decisions/0075-bad-input-at-the-edge.md).

_NAMES = {"string": "a string", "integer": "an integer", "number": "a number", "boolean": "a boolean",
          "object": "an object", "array": "an array"}


def _is(value: Any, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "object":
        return isinstance(value, dict)
    if kind.startswith("array"):
        if not isinstance(value, list):
            return False
        inner = kind[len("array<"):-1] if kind.startswith("array<") else None
        return inner is None or all(_is(item, inner) for item in value)
    raise ValueError(f"unknown kind {kind!r}")


def _described(kinds: list[str]) -> str:
    words = [_NAMES.get(k) or f"an array of {k[len('array<'):-1]}s" for k in kinds]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def _where(path: str, name: str | int, style: str) -> str:
    if isinstance(name, int):
        return f"{path}[{name}]" if style == "bracket" else f"{path}.{name}"
    return f"{path}.{name}" if path else name


def check_field_types(body: dict[str, Any], fields: dict[str, Any], *, style: str = "bracket",
                      path: str = "") -> None:
    """Raises a 400 `ApiError` (`param` = the field, `messages[0].role` or `messages.0.role` by
    `style`) for the first field of `body` whose value is not of the type `fields` gives it."""
    for name, spec in fields.items():
        value = body.get(name)
        if value is None:
            continue
        where = _where(path, name, style)
        if isinstance(spec, dict):
            if not isinstance(value, dict):
                raise _wrong_type(where, ["object"])
            check_field_types(value, spec, style=style, path=where)
            continue
        kinds = spec.split("|")
        if not any(_is(value, kind) for kind in kinds):
            raise _wrong_type(where, kinds)


def check_items(items: Any, fields: dict[str, Any], *, name: str, style: str = "bracket") -> None:
    """`check_field_types` on each object of the list `items` (others are left to the caller)."""
    if isinstance(items, list):
        for index, item in enumerate(items):
            if isinstance(item, dict):
                check_field_types(item, fields, style=style, path=_where(name, index, style))


def _wrong_type(where: str, kinds: list[str]) -> ApiError:
    return ApiError(400, f"{where}: must be {_described(kinds)}.", code="invalid_request_error", param=where)


# ---- a call's tags: OpenAI's `metadata` ------------------------------------------------------------
#
# OpenAI's `metadata` on chat completions and responses: up to 16 keys of at most 64 characters, each
# value a string of at most 512 (OpenAI's API reference). It annotates the call, it asks nothing of the
# model: the gateway keeps it with the call as its tags (the calls log, the usage records).

MAX_TAGS, MAX_TAG_KEY, MAX_TAG_VALUE = 16, 64, 512


def check_tags(value: Any, *, name: str = "metadata") -> dict[str, str]:
    """The tags of a request's `name` field (absent or null: none), or a 400 naming what is wrong."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _wrong_type(name, ["object"])
    if len(value) > MAX_TAGS:
        raise ApiError(400, f"{name}: at most {MAX_TAGS} keys, not {len(value)}.", code="invalid_request_error",
                       param=name)
    for key, text in value.items():
        if len(key) > MAX_TAG_KEY:
            raise ApiError(400, f"{name}: a key is at most {MAX_TAG_KEY} characters long, not {len(key)} "
                                f"({key[:MAX_TAG_KEY]!r}…).", code="invalid_request_error", param=name)
        where = f"{name}.{key}"
        if not isinstance(text, str):
            raise _wrong_type(where, ["string"])
        if len(text) > MAX_TAG_VALUE:
            raise ApiError(400, f"{where}: at most {MAX_TAG_VALUE} characters, not {len(text)}.",
                           code="invalid_request_error", param=where)
    return value
