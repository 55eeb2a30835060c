"""gateway/upstream/http_client.py, the client of the model calls, against scripted raw HTTP/1.1 servers: its
failures (refused connections, connect / read / write timeouts, disconnects and malformed answers),
their mapping in gateway/upstream/providers/base.py, and the TLS context."""

import asyncio
import socket
import ssl
from unittest import mock

import pytest

from gateway.upstream import http_client as uh
from gateway.upstream.providers.base import UpstreamError, failure_from_transport
from tests.gateway.upstream import upstream_http_support
from tests.gateway.upstream.upstream_http_support import FAST, Script, get, run

_each_loop = upstream_http_support.each_loop  # the autouse fixture: every test on asyncio and on uvloop


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
