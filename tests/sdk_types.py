"""Validating what the gateway produces against the official SDKs' own types."""

from openai.types.chat import CompletionCreateParams
from pydantic import TypeAdapter

CHAT_REQUEST = TypeAdapter(CompletionCreateParams)


def deep(value):
    """Param TypedDicts validate lists lazily (ValidatorIterator): walk everything to force validation."""
    if isinstance(value, dict):
        return {k: deep(v) for k, v in value.items()}
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        return value
    return [deep(v) for v in value]
