"""Requests through the project's ASGI application itself, in this process, as uvicorn makes them:
the request, then a client that stays connected until the reply is whole and then goes (uvicorn's
`receive` says http.disconnect)."""

from __future__ import annotations

import asyncio

from gateway.asgi import application


def scope_for(method: str, path: str, headers=(), *, client: str = "127.0.0.1") -> dict:
    """`path` may end in a query string (`?alt=sse`), which goes where uvicorn puts it."""
    path, _, query = path.partition("?")
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
            "path": path, "raw_path": path.encode(), "query_string": query.encode(), "root_path": "",
            "headers": [(b"host", b"testserver"), *headers], "client": (client, 50000),
            "server": ("127.0.0.1", 8000)}


async def exchange(method: str, path: str, *, body: bytes = b"", headers=(), client: str = "127.0.0.1") -> list[dict]:
    """The messages the application sent for one request."""
    sent: list[dict] = []
    messages = [{"type": "http.request", "body": body, "more_body": False}]
    replied = asyncio.Event()

    async def receive():
        if messages:
            return messages.pop(0)
        await replied.wait()
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            replied.set()

    await application(scope_for(method, path, headers, client=client), receive, send)
    return sent


def call(method: str, path: str, *, body: bytes = b"", headers=(), client: str = "127.0.0.1"
         ) -> tuple[int, dict[bytes, bytes], bytes]:
    """(status, headers as sent, body) of one request, in an event loop of its own."""
    sent = asyncio.run(exchange(method, path, body=body, headers=headers, client=client))
    start = next(m for m in sent if m["type"] == "http.response.start")
    content = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], dict(start["headers"]), content
