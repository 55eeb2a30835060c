"""The HTTP/1.1 client of the model calls: kept-alive connections pooled per origin (scheme, host,
port; and proxy), an asyncio protocol with httptools (llhttp) parsing the answers. Chosen over httpx by the
figures of bench/upstream_client.py (docs/decisions/0098-leaner-upstream-client.md).

It does what a model call needs and no more: one request at a time per connection, bodies sent
whole, answers framed by Content-Length, chunked or by the end of the connection (gzip and
deflate decoded), TLS with certificate and hostname checks (`tls_context`), HTTP_PROXY, HTTPS_PROXY
and NO_PROXY as curl reads them (gateway/upstream/egress.py), no redirects, no cookies. With traces on,
a request carries the `traceparent` of the span it is sent in (gateway/telemetry/tracing.py). Timeouts:
connect (TCP and TLS, through a proxy the tunnel too), read (between any two reads, before the head as
in the body) and write. A connection goes back to the pool only once its answer was read to the end;
one given up earlier is closed.

Failures are the exceptions below; gateway/upstream/providers/base.py turns them into UpstreamError and
StreamCut."""

from __future__ import annotations

import asyncio
import collections
import json as _json
import os
import ssl
import time
import zlib
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlsplit

import httptools

from gateway.telemetry import tracing
from gateway.upstream import egress


class HTTPError(Exception):
    """A request that got no complete answer."""


class ConnectError(HTTPError):
    """The server could not be reached: refused, unknown host, TLS handshake failed."""


class Timeout(HTTPError):
    """ConnectTimeout, ReadTimeout (nothing for `Timeouts.read` seconds, before the head or within
    the body) or WriteTimeout."""


class ConnectTimeout(Timeout): ...
class ReadTimeout(Timeout): ...
class WriteTimeout(Timeout): ...


class ProtocolError(HTTPError):
    """The server closed the connection before the end of its answer, or did not speak HTTP/1.1;
    or the request could not be written (not an http(s) URL, a header with a line break)."""


@dataclass(frozen=True, slots=True)
class Timeouts:
    connect: float = 10.0
    read: float = 60.0
    write: float = 30.0


@dataclass(slots=True)
class Request:
    method: str
    url: str
    headers: dict[str, str]  # every header as sent, Host and Content-Length included
    body: bytes
    timeouts: Timeouts
    origin: tuple[str, str, int] | None  # None: not an http(s) URL (refused by Client.send)
    target: str  # path and query


USER_AGENT = "model-gateway"
_JSON_DUMPS = _json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


@lru_cache(maxsize=1024)
def _split(url: str) -> tuple[tuple[str, str, int], str, str]:
    parts = urlsplit(url)
    scheme, host = parts.scheme.lower(), parts.hostname
    if scheme not in ("http", "https") or not host:
        raise ValueError(f"not an http(s) URL: {url!r}")
    port = parts.port or (443 if scheme == "https" else 80)
    shown = f"[{host}]" if ":" in host else host
    host_header = shown if port == (443 if scheme == "https" else 80) else f"{shown}:{port}"
    return (scheme, host, port), host_header, (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def build_request(method: str, url: str, *, headers: dict[str, str] | None = None, json: object = None,
                  content: bytes | None = None, timeouts: Timeouts = Timeouts()) -> Request:
    try:
        origin, host, target = _split(url)
    except ValueError:
        origin, host, target = None, "", url
    sent = {"Host": host, "User-Agent": USER_AGENT, "Accept-Encoding": "gzip, deflate"}
    if json is not None:
        content = _JSON_DUMPS(json).encode()
        sent["Content-Type"] = "application/json"
    sent.update(headers or ())
    if tracing.ENABLED:  # the model server continues the trace (W3C trace context)
        tracing.inject(sent)
    if content is not None or method in ("POST", "PUT", "PATCH"):
        sent["Content-Length"] = str(len(content or b""))
    return Request(method, url, sent, content or b"", timeouts, origin, target)


def _encode(request: Request, route: egress.Route | None = None) -> bytes:
    if request.origin is None:
        raise ProtocolError(f"Not an http(s) URL: {request.url!r}.")
    lines = [f"{request.method} {request.target} HTTP/1.1"]
    if route is not None and not route.tunnel:  # through a proxy: absolute-form, its credentials for it
        lines[0] = f"{request.method} {route.prefix}{request.target} HTTP/1.1"
        if route.proxy.authorization:
            lines.append(f"Proxy-Authorization: {route.proxy.authorization}")
    for name, value in request.headers.items():
        if "\n" in value or "\r" in value:
            raise ProtocolError(f"The request header {name} holds a line break.")
        lines.append(f"{name}: {value}")
    try:
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + request.body
    except UnicodeEncodeError:
        raise ProtocolError("A request header holds characters HTTP/1.1 cannot carry.") from None


HIGH_WATER = 256 * 1024  # unread body bytes beyond which the socket is not read


def _settle(future: asyncio.Future, value: bool) -> None:
    if not future.done():
        future.set_result(value)


class _Connection(asyncio.Protocol):
    """One TCP (or TLS) connection and the answer being read on it. The parser's callbacks fill
    `head_done`, `status`, `headers`, `body`, `done`; `error` ends it; `_wake` tells the reader."""

    def __init__(self) -> None:
        self.origin: tuple[str, str, int] | None = None
        self.transport: asyncio.Transport | None = None
        self.closed = self.proxied = False  # proxied: a plain-http request through a proxy
        self.idle_since = 0.0
        self._parser: httptools.HttpResponseParser | None = None
        self._waiter: asyncio.Future | None = None
        self._write_paused: asyncio.Future | None = None

    def begin(self, data: bytes) -> None:
        """Send one request; its answer starts from nothing."""
        self._parser = httptools.HttpResponseParser(self)
        self.status, self.headers, self.body, self.buffered = 0, {}, [], 0
        self.head_done = self.done = self.keep_alive = self.framed = self.reading_paused = False
        self.error: HTTPError | None = None
        self.transport.write(data)

    async def wait(self, timeout: float) -> bool:
        """Until the parser has news (True) or `timeout` seconds went by without any (False)."""
        loop = asyncio.get_running_loop()
        self._waiter = future = loop.create_future()
        timer = loop.call_later(timeout, _settle, future, False)
        try:
            return await future
        finally:
            timer.cancel()
            self._waiter = None

    async def drain(self, timeout: float) -> None:
        if self._write_paused is not None and not self.closed:
            try:
                await asyncio.wait_for(asyncio.shield(self._write_paused), timeout)
            except TimeoutError:
                raise WriteTimeout("The model server did not take the request in time.") from None

    def take_body(self) -> bytes:
        chunk = self.body[0] if len(self.body) == 1 else b"".join(self.body)
        self.body.clear()
        self.buffered = 0
        if self.reading_paused and not self.closed:
            self.reading_paused = False
            self.transport.resume_reading()
        return chunk

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _wake(self) -> None:
        if self._waiter is not None:
            _settle(self._waiter, True)

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.Transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self._parser is None or self.done:  # nothing was asked: a connection in an unknown state
            self.close()
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self.error = ProtocolError(f"The model server sent a malformed answer ({exc}).")
            self.close()
        if self.buffered > HIGH_WATER and not self.reading_paused and not self.closed:
            self.reading_paused = True
            self.transport.pause_reading()
        self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._parser is not None and not self.done and self.error is None:
            if self.head_done and not self.framed:
                self.done = True  # a body that ends with the connection
            else:
                self.error = ProtocolError(
                    "The model server closed the connection before the end of its answer." if self.head_done
                    else "The model server closed the connection without answering.")
        if self._write_paused is not None:
            _settle(self._write_paused, True)
        self._wake()

    def pause_writing(self) -> None:
        self._write_paused = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._write_paused is not None:
            _settle(self._write_paused, True)
            self._write_paused = None

    # httptools callbacks

    def on_header(self, name: bytes, value: bytes) -> None:
        key, text = name.decode("latin-1").lower(), value.decode("latin-1")
        self.headers[key] = f"{self.headers[key]}, {text}" if key in self.headers else text

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if status < 200:  # 100 Continue and the like: the answer follows
            self.headers = {}
            return
        self.status, self.head_done = status, True
        self.framed = "content-length" in self.headers or "chunked" in self.headers.get("transfer-encoding", "")

    def on_body(self, body: bytes) -> None:
        self.body.append(body)
        self.buffered += len(body)

    def on_message_complete(self) -> None:
        if self.head_done:
            self.done, self.keep_alive = True, self._parser.should_keep_alive()


class Response:
    """An answer whose head has arrived. Read its body with `aiter_raw()` or `aread()`; `aclose()`
    gives the connection back if the body was read to the end, else closes it."""

    def __init__(self, client: Client, conn: _Connection, request: Request) -> None:
        self.status_code, self.headers, self.request = conn.status, conn.headers, request
        self._client, self._conn = client, conn
        self._released = False
        self.content = b""
        encoding = conn.headers.get("content-encoding", "").strip().lower()
        self._decoder = zlib.decompressobj(47) if encoding in ("gzip", "deflate", "x-gzip") else None

    async def aiter_raw(self):
        """The body as it arrives (decoded when the server compressed it)."""
        conn, timeout = self._conn, self.request.timeouts.read
        while True:
            if conn.body:
                yield conn.take_body() if self._decoder is None else self._decode(conn.take_body())
            elif conn.error is not None:
                raise conn.error
            elif conn.done:
                break
            elif not await conn.wait(timeout):
                raise ReadTimeout("The model server stopped sending.")
        if self._decoder is not None and (rest := self._decoder.flush()):
            yield rest
        await self.aclose()

    async def aread(self) -> bytes:
        self.content = b"".join([chunk async for chunk in self.aiter_raw()])
        return self.content

    @property
    def text(self) -> str:  # model servers answer in UTF-8
        return self.content.decode("utf-8", errors="replace")

    async def aclose(self) -> None:
        if not self._released:
            self._released = True
            self._client._release(self._conn)

    def _decode(self, chunk: bytes) -> bytes:
        try:
            return self._decoder.decompress(chunk)
        except zlib.error:
            raise ProtocolError("The model server sent a body that does not decompress.") from None


def tls_context() -> ssl.SSLContext:
    """Certificates checked, hostname too (SNI), trusting what httpx trusted: the file or directory
    of SSL_CERT_FILE or SSL_CERT_DIR (OpenSSL reads them), else certifi's bundle when installed."""
    if not (os.environ.get("SSL_CERT_FILE") or os.environ.get("SSL_CERT_DIR")):
        try:
            import certifi

            return ssl.create_default_context(cafile=certifi.where())
        except ImportError:
            pass
    return ssl.create_default_context()


class Client:
    """Idle connections per origin: at most `max_idle` each, closed after `idle_expiry` seconds
    unused. Connections in use are not capped. One client per event loop."""

    def __init__(self, max_idle: int = 100, idle_expiry: float = 30.0) -> None:
        self.max_idle, self.idle_expiry = max_idle, idle_expiry
        self._idle: dict[tuple[str, str, int], collections.deque[_Connection]] = {}
        self._ssl: ssl.SSLContext | None = None

    async def send(self, request: Request) -> Response:
        """Send `request`; return once the answer's head has arrived."""
        route = None if egress.OFF else egress.route(request.origin)  # None unless a proxy is set for it
        data = _encode(request, route)
        key = request.origin if route is None else route.key  # pooled per (proxy, origin)
        conn = self._take(key) or await self._connect(request.origin, route, request.timeouts.connect)
        try:
            conn.begin(data)
            await conn.drain(request.timeouts.write)
            while not conn.head_done:
                if conn.error is not None:
                    raise conn.error
                if not await conn.wait(request.timeouts.read):
                    raise ReadTimeout("The model server did not answer in time.")
            if conn.status == 407 and conn.proxied:  # the proxy's own refusal
                raise ConnectError(egress.asked_credentials(route.proxy))
        except BaseException:
            conn.close()
            raise
        return Response(self, conn, request)

    def _take(self, key: tuple) -> _Connection | None:
        idle = self._idle.get(key)
        while idle:
            conn = idle.pop()  # the most recently used: the least likely to be closed by the server
            if not conn.closed and time.monotonic() - conn.idle_since < self.idle_expiry:
                return conn
            conn.close()
        return None

    def _release(self, conn: _Connection) -> None:
        if (conn.closed or not conn.done or conn.error is not None or not conn.keep_alive or conn.body
                or conn.proxied and not egress.kept_alive(conn.headers)):
            conn.close()
            return
        conn._parser = None
        conn.idle_since = time.monotonic()
        idle = self._idle.setdefault(conn.origin, collections.deque())
        while len(idle) >= self.max_idle or (idle and conn.idle_since - idle[0].idle_since > self.idle_expiry):
            idle.popleft().close()
        idle.append(conn)

    async def _connect(self, origin: tuple[str, str, int], route: egress.Route | None, timeout: float) -> _Connection:
        scheme, host, port = origin
        context = None
        if scheme == "https":
            context = self._ssl = self._ssl or tls_context()
        loop = asyncio.get_running_loop()
        try:
            if route is None:
                _, conn = await asyncio.wait_for(loop.create_connection(
                    _Connection, host, port, ssl=context, server_hostname=host if context else None), timeout)
            else:
                conn = await asyncio.wait_for(egress.open_connection(route, _Connection, context, host), timeout)
        except TimeoutError:
            through = f" through the proxy {route.proxy.shown}" if route else ""
            raise ConnectTimeout(f"No connection to {host}:{port}{through} within {timeout} s.") from None
        except OSError as exc:  # refused, unreachable, unknown host, TLS failures (ssl.SSLError), the proxy's
            raise ConnectError(str(exc) or type(exc).__name__) from None
        conn.origin, conn.proxied = (origin, False) if route is None else (route.key, not route.tunnel)
        return conn

    async def aclose(self) -> None:
        for idle in self._idle.values():
            while idle:
                idle.pop().close()


