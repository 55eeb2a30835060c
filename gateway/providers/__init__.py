"""One provider interface: `chat_stream(target, body)` yields chat-completion chunks."""

from gateway.providers import anthropic, openai
from gateway.routing import Target

_BY_KIND = {"openai": openai, "anthropic": anthropic}


def chat_stream(target: Target, body: dict):
    return _BY_KIND[target.server.kind].chat_stream(target, body)
