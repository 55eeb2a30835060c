"""Validating request bodies with DRF serializers, failing in the spec's 422 shape."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from gateway.errors import ValidationFailed


def validated(serializer_class: type[serializers.Serializer], data: dict[str, Any]) -> dict[str, Any]:
    serializer = serializer_class(data=data)
    if serializer.is_valid():
        return serializer.validated_data
    errors = {field: [str(m) for m in _flatten(messages)] for field, messages in serializer.errors.items()}
    total = sum(len(m) for m in errors.values())
    first = next(iter(errors.values()))[0]
    message = first if total == 1 else f"{first} (and {total - 1} more error{'s' if total > 2 else ''})"
    raise ValidationFailed(errors, message)


def _flatten(messages: Any) -> list[str]:
    if isinstance(messages, dict):
        return [f"{k}: {m}" for k, v in messages.items() for m in _flatten(v)]
    if isinstance(messages, list):
        return [m for item in messages for m in _flatten(item)]
    return [str(messages)]
