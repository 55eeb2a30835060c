"""gateway/upstream_http.py, the client of the model calls, against scripted raw HTTP/1.1 servers:
keep-alive pooling, Content-Length / chunked / close-delimited bodies, timeouts, early close,
and the mapping of its failures in gateway/providers/base.py."""

import asyncio
import gzip
import socket
import ssl
from unittest import mock

import pytest
import uvloop

from gateway import upstream_http as uh
from gateway.providers.base import UpstreamError, failure_from_transport, secrets_of
from gateway.routing import Server

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
def _each_loop(request):
    """Every test on asyncio's loop and on uvloop (the web processes run on uvloop)."""
    global _loop_kind
    _loop_kind = request.param


def run(coro):
    return uvloop.run(coro) if _loop_kind == "uvloop" else asyncio.run(coro)


async def get(client, url, **kwargs):
    response = await client.send(uh.build_request("POST", url, json={"a": 1}, timeouts=FAST, **kwargs))
    return response, await response.aread()


def test_sequential_calls_reuse_one_connection():
    async def main():
        async with Script(answer_forever) as server:
            client = uh.Client()
            for _ in range(3):
                response, body = await get(client, server.url)
                assert (response.status_code, body) == (200, b'{"ok":true}')
            assert server.connections == 1
            assert len(client._idle[("http", "127.0.0.1", server.port)]) == 1
            await client.aclose()

    run(main())


def test_concurrent_calls_open_connections_that_all_return_to_the_pool():
    async def slow(script, reader, writer):
        while True:
            await script.read_request(reader)
            await asyncio.sleep(0.05)
            writer.write(OK_LENGTH)

    async def main():
        async with Script(slow) as server:
            client = uh.Client()
            await asyncio.gather(*(get(client, server.url) for _ in range(4)))
            assert server.connections == 4
            await asyncio.gather(*(get(client, server.url) for _ in range(4)))
            assert server.connections == 4  # the second wave found them idle

    run(main())


def test_the_idle_connections_are_capped_and_expire():
    async def main():
        async with Script(answer_forever) as server:
            client = uh.Client(max_idle=2, idle_expiry=0.1)
            await asyncio.gather(*(get(client, server.url) for _ in range(3)))
            origin = ("http", "127.0.0.1", server.port)
            assert len(client._idle[origin]) == 2
            await asyncio.sleep(0.15)
            await get(client, server.url)
            assert server.connections == 4  # the expired ones were not used

    run(main())


def test_the_request_as_sent():
    async def main():
        async with Script(answer_forever) as server:
            client = uh.Client()
            request = uh.build_request("POST", server.url + "?q=1", json={"text": "é"},
                                       headers={"Authorization": "Bearer sk-secret"}, timeouts=FAST)
            await (await client.send(request)).aread()
            sent = server.requests[0]
            assert sent.startswith(b"POST /v1/x?q=1 HTTP/1.1\r\n")
            assert f"Host: 127.0.0.1:{server.port}\r\n".encode() in sent
            assert b"Content-Length: 13\r\n" in sent and sent.endswith('{"text":"é"}'.encode())
            server_row = Server(id=1, name="s", kind="openai", base_url=server.url, api_key="sk-key", is_remote=False,
                                connect_timeout=1, read_timeout=1)
            assert "Bearer sk-secret" in secrets_of(request, server_row)
            assert "sk-secret" in secrets_of(request, server_row)

    run(main())


def test_a_chunked_body_in_pieces_then_the_connection_is_reused():
    async def chunked(script, reader, writer):
        while True:
            await script.read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
            for piece in (b"data: 1\n\n", b"data: 2\n\n"):
                writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                await writer.drain()
                await asyncio.sleep(0.01)
            writer.write(b"0\r\n\r\n")

    async def main():
        async with Script(chunked) as server:
            client = uh.Client()
            for _ in range(2):
                response = await client.send(uh.build_request("POST", server.url, json={}, timeouts=FAST))
                pieces = [piece async for piece in response.aiter_raw()]
                assert b"".join(pieces) == b"data: 1\n\ndata: 2\n\n" and len(pieces) >= 2
            assert server.connections == 1

    run(main())


def test_a_body_ended_by_the_connection_is_read_whole_and_not_pooled():
    async def close_delimited(script, reader, writer):
        await script.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nall of it")

    async def main():
        async with Script(close_delimited) as server:
            client = uh.Client()
            assert (await get(client, server.url))[1] == b"all of it"
            assert (await get(client, server.url))[1] == b"all of it"
            assert server.connections == 2

    run(main())


def test_a_gzipped_body_is_decoded():
    async def gzipped(script, reader, writer):
        await script.read_request(reader)
        body = gzip.compress(b'{"ok":true}')
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))

    async def main():
        async with Script(gzipped) as server:
            assert (await get(uh.Client(), server.url))[1] == b'{"ok":true}'

    run(main())


def test_an_error_status_and_its_headers():
    async def refusing(script, reader, writer):
        await script.read_request(reader)
        writer.write(b"HTTP/1.1 429 Too Many\r\nRetry-After: 7\r\nX-A: 1\r\nx-a: 2\r\nContent-Length: 2\r\n\r\n{}")

    async def main():
        async with Script(refusing) as server:
            response, body = await get(uh.Client(), server.url)
            assert (response.status_code, response.headers["retry-after"], response.headers["x-a"], body) == (
                429, "7", "1, 2", b"{}")

    run(main())


def test_closing_a_response_early_drops_its_connection():
    async def streaming(script, reader, writer):
        await script.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n")
        await writer.drain()
        await script.wait_client_close(reader)

    async def main():
        async with Script(streaming) as server:
            client = uh.Client()
            response = await client.send(uh.build_request("POST", server.url, json={}, timeouts=FAST))
            async for piece in response.aiter_raw():
                assert piece == b"first"
                break
            await response.aclose()
            await asyncio.wait_for(server.closed_by_client.wait(), 2)
            assert not client._idle.get(("http", "127.0.0.1", server.port))

    run(main())


def test_a_body_read_to_the_end_returns_the_connection_even_before_aclose():
    async def main():
        async with Script(answer_forever) as server:
            client = uh.Client()
            response = await client.send(uh.build_request("POST", server.url, json={}, timeouts=FAST))
            assert [piece async for piece in response.aiter_raw()] == [b'{"ok":true}']
            assert len(client._idle[("http", "127.0.0.1", server.port)]) == 1
            await response.aclose()  # no effect now
            await get(client, server.url)
            assert server.connections == 1

    run(main())


def test_a_connection_the_server_closed_while_idle_is_not_used():
    async def one_then_close(script, reader, writer):
        await script.read_request(reader)
        writer.write(OK_LENGTH)
        await writer.drain()
        await asyncio.sleep(0.05)  # as a server's keep-alive timeout: closes the idle connection

    async def main():
        async with Script(one_then_close) as server:
            client = uh.Client()
            await get(client, server.url)
            await asyncio.sleep(0.2)
            assert (await get(client, server.url))[0].status_code == 200
            assert server.connections == 2

    run(main())


def test_a_refused_connection_is_a_connect_error():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]

        async def main():
            with pytest.raises(uh.ConnectError):
                await get(uh.Client(), f"http://127.0.0.1:{port}/v1")

        run(main())


def test_the_connect_timeout():
    async def never(*args, **kwargs):
        await asyncio.sleep(10)

    async def main():
        loop = asyncio.get_running_loop()
        with mock.patch.object(loop, "create_connection", never), pytest.raises(uh.ConnectTimeout):
            await uh.Client().send(uh.build_request("GET", "http://127.0.0.1:9/", timeouts=uh.Timeouts(connect=0.1)))

    run(main())


def test_the_read_timeout_before_the_head():
    async def silent(script, reader, writer):
        await script.read_request(reader)
        await asyncio.sleep(5)

    async def main():
        async with Script(silent) as server:
            loop = asyncio.get_running_loop()
            started = loop.time()
            with pytest.raises(uh.ReadTimeout):
                await uh.Client().send(uh.build_request("POST", server.url, json={},
                                                        timeouts=uh.Timeouts(read=0.2)))
            assert 0.19 <= loop.time() - started < 1  # a timer may fire up to the clock's resolution early

    run(main())


def test_the_read_timeout_between_bytes_mid_body():
    async def stalls(script, reader, writer):
        await script.read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n")
        await writer.drain()
        await asyncio.sleep(0.15)
        writer.write(b"6\r\nsecond\r\n")  # within the read timeout of the one before
        await writer.drain()
        await asyncio.sleep(5)

    async def main():
        async with Script(stalls) as server:
            client = uh.Client()
            response = await client.send(uh.build_request("POST", server.url, json={}, timeouts=uh.Timeouts(read=0.3)))
            got = []
            with pytest.raises(uh.ReadTimeout):
                async for piece in response.aiter_raw():
                    got.append(piece)
            assert got == [b"first", b"second"]
            await response.aclose()
            assert not client._idle.get(("http", "127.0.0.1", server.port))

    run(main())


def test_the_write_timeout():
    async def never_reads(script, reader, writer):
        await asyncio.sleep(5)

    async def main():
        async with Script(never_reads) as server:
            request = uh.build_request("POST", server.url, content=b"x" * (64 << 20),
                                       timeouts=uh.Timeouts(write=0.3))
            with pytest.raises(uh.WriteTimeout):
                await uh.Client().send(request)

    run(main())


@pytest.mark.parametrize("after_head", [False, True])
def test_a_disconnect_is_a_protocol_error(after_head):
    async def hangs_up(script, reader, writer):
        await script.read_request(reader)
        if after_head:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npart")
            await writer.drain()

    async def main():
        async with Script(hangs_up) as server:
            client = uh.Client()
            if not after_head:
                with pytest.raises(uh.ProtocolError):
                    await client.send(uh.build_request("POST", server.url, json={}, timeouts=FAST))
                return
            response = await client.send(uh.build_request("POST", server.url, json={}, timeouts=FAST))
            got = []
            with pytest.raises(uh.ProtocolError):
                async for piece in response.aiter_raw():
                    got.append(piece)
            assert got == [b"part"]

    run(main())


def test_a_malformed_answer_is_a_protocol_error():
    async def garbage(script, reader, writer):
        await script.read_request(reader)
        writer.write(b"SMTP ready\r\n\r\n")

    async def main():
        async with Script(garbage) as server:
            with pytest.raises(uh.ProtocolError):
                await get(uh.Client(), server.url)

    run(main())


def test_the_failures_map_as_httpxs_did():
    connect = failure_from_transport(uh.ConnectError("[Errno 111] Connection refused"))
    assert (connect.status, connect.cooldown_cause) == (503, "connect failed ([Errno 111] Connection refused)")
    assert failure_from_transport(uh.ConnectTimeout()).cooldown_cause == "connect timeout"
    read = failure_from_transport(uh.ReadTimeout())
    assert (read.status, read.cooldown_cause) == (504, "read timeout before the first byte")
    write = failure_from_transport(uh.WriteTimeout())
    assert (write.status, write.cooldown_cause) == (504, None)
    closed = failure_from_transport(uh.ProtocolError("closed"))
    assert isinstance(closed, UpstreamError) and (closed.status, closed.cooldown_cause) == (503, None)


def test_tls_checks_certificates_and_hostnames():
    context = uh.tls_context()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert context.get_ca_certs()
