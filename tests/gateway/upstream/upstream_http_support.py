"""For the tests of gateway/upstream/http_client.py: scripted raw HTTP/1.1 loopback servers, and the autouse
fixture `each_loop` that runs every test on asyncio's loop and on uvloop. A test module takes the
fixture in as `_each_loop = upstream_http_support.each_loop`."""

import asyncio

import pytest
import uvloop

from gateway.upstream import http_client as uh

OK_LENGTH = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\":true}"
FAST = uh.Timeouts(connect=2.0, read=2.0, write=2.0)


class Script:
    """A loopback server: each connection runs `handler(reader, writer, state)`. Counts connections."""

    def __init__(self, handler):
        self.handler = handler
        self.connections = 0
        self.requests: list[bytes] = []
        self.closed_by_client = asyncio.Event()

    async def __aenter__(self):
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/v1/x"
        return self

    async def __aexit__(self, *exc):
        self.server.close()

    async def _serve(self, reader, writer):
        self.connections += 1
        try:
            await self.handler(self, reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def read_request(self, reader) -> bytes | None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n"):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        body = await reader.readexactly(length)
        self.requests.append(head + body)
        return head + body

    async def wait_client_close(self, reader):
        if await reader.read(1) == b"":
            self.closed_by_client.set()


async def answer_forever(script, reader, writer, response=OK_LENGTH):
    while True:
        try:
            await script.read_request(reader)
        except asyncio.IncompleteReadError:
            return
        writer.write(response)
        await writer.drain()


_loop_kind = "asyncio"


@pytest.fixture(autouse=True, params=["asyncio", "uvloop"])
def each_loop(request):
    """Every test on asyncio's loop and on uvloop (the web processes run on uvloop)."""
    global _loop_kind
    _loop_kind = request.param


def run(coro):
    return uvloop.run(coro) if _loop_kind == "uvloop" else asyncio.run(coro)


async def get(client, url, **kwargs):
    response = await client.send(uh.build_request("POST", url, json={"a": 1}, timeouts=FAST, **kwargs))
    return response, await response.aread()
