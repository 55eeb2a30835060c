"""gateway/upstream/http_client.py, the client of the model calls, against scripted raw HTTP/1.1 servers:
keep-alive pooling, Content-Length / chunked / close-delimited / gzipped bodies, error statuses and
early close. Its failures (refused connections, timeouts, protocol errors) are in
test_upstream_http_failures.py."""

import asyncio
import gzip

from gateway.registry.snapshot import Server
from gateway.upstream import http_client as uh
from gateway.upstream.providers.base import secrets_of
from tests.gateway.upstream import upstream_http_support
from tests.gateway.upstream.upstream_http_support import FAST, OK_LENGTH, Script, answer_forever, get, run

_each_loop = upstream_http_support.each_loop  # the autouse fixture: every test on asyncio and on uvloop


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
