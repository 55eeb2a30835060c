"""What both fakes (fake_azure.py, fake_entra.py) do with an ASGI request: read its whole body, and send a
whole reply."""

from __future__ import annotations


async def read_body(receive) -> bytes:
    body, more = b"", True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    return body


async def reply(send, status: int, body: bytes, content_type: bytes = b"application/json", extra=()) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", content_type), (b"content-length", str(len(body)).encode()), *extra]})
    await send({"type": "http.response.body", "body": body})
