"""Egress through a proxy for the model calls' client (gateway/upstream/http_client.py), as curl,
requests and httpx read it from the environment: `https_proxy`/`HTTPS_PROXY` for https
model servers, `http_proxy`/`HTTP_PROXY` for plain-http ones, `all_proxy`/`ALL_PROXY` for either
when its own is not set (the lower-case form first), and `no_proxy`/`NO_PROXY`: a comma list of
host names (each also matching its subdomains; a leading `.` or `*.` is the same), `*` (no proxy at
all), IP addresses, CIDR blocks and `host:port`. Names are compared as written, never resolved.

A plain-http model server is asked through the proxy with absolute-form targets
(`POST http://host:port/path`); an https one through a CONNECT tunnel, inside which TLS is spoken
to the model server itself (its certificate and name checked as without a proxy). Only http://
proxies (also written without a scheme); `user:password@` in the proxy's URL becomes
`Proxy-Authorization: Basic`, sent to the proxy only. The proxy's URL is never logged nor put in
an error with its credentials: only its host and port are shown.

The environment is read once per process, at the first call (`environment()`); the route of each
origin is kept (`route()`). With no proxy set, `OFF` is true once it was read and the client does
not even ask. Tests change the environment, then call `reset()`."""

from __future__ import annotations

import asyncio
import base64
import functools
import ipaddress
import logging
import os
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

logger = logging.getLogger(__name__)

Origin = tuple[str, str, int]  # (scheme, host, port), as gateway/upstream/http_client.py keys its pool


class ProxyError(OSError):
    """The proxy could not be reached, refused the tunnel or is not usable: a connect failure."""


@dataclass(frozen=True, slots=True)
class Proxy:
    host: str
    port: int
    authorization: str | None  # the Proxy-Authorization header's value, or None
    problem: str | None = None  # a variable that names no usable proxy: every call through it fails so

    @property
    def shown(self) -> str:  # host and port only: what an error or a log line may say
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class Route:
    """How to reach one origin through a proxy. `key` keys the connection pool: (proxy, origin)."""

    proxy: Proxy
    tunnel: bool  # https: CONNECT, then TLS inside; http: absolute-form targets
    key: tuple
    prefix: str  # http: what goes before the path in the request line ("http://host:port")
    connect: bytes  # https: the CONNECT request


@dataclass(frozen=True, slots=True)
class Environment:
    proxies: dict[str, Proxy]  # by the model server's scheme
    no_proxy: tuple[tuple[str, object, int | None], ...]  # (kind, value, port or None)
    bypass_all: bool = False


def _value(names: tuple[str, ...], env) -> tuple[str, str] | None:
    for name in names:
        if value := env.get(name, "").strip():
            return name, value
    return None


def parse_proxy(name: str, value: str) -> Proxy:
    """The proxy a variable names; one with `problem` set when it names none usable (the value is
    not repeated in the problem: it may hold a password)."""
    if "://" not in value:
        value = "http://" + value  # as curl: a bare host:port is an http proxy
    try:
        parts = urlsplit(value)
        port = parts.port or 80
    except ValueError:
        return Proxy("", 0, None, f"{name} is not a proxy URL")
    if not parts.hostname:
        return Proxy("", 0, None, f"{name} is not a proxy URL")
    if parts.scheme.lower() != "http":
        return Proxy(parts.hostname, port, None,
                     f"{name} names a {parts.scheme}:// proxy; only http:// proxies are supported")
    authorization = None
    if parts.username is not None:
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
        authorization = "Basic " + base64.b64encode(pair.encode()).decode("ascii")
    return Proxy(parts.hostname.lower(), port, authorization)


def parse_no_proxy(value: str) -> tuple[bool, tuple[tuple[str, object, int | None], ...]]:
    entries = []
    for raw in value.replace(" ", ",").split(","):
        entry = raw.strip().lower()
        if "://" in entry:
            entry = entry.split("://", 1)[1]
        entry = entry.rstrip("/")
        if not entry:
            continue
        if entry == "*":
            return True, ()
        host, port = entry, None
        if entry.startswith("["):  # [v6] or [v6]:port
            host, _, rest = entry[1:].partition("]")
            port = int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else None
        elif entry.count(":") == 1:
            name, _, number = entry.partition(":")
            if number.isdigit():
                host, port = name, int(number)
        try:
            entries.append(("net", ipaddress.ip_network(host, strict=False), port))
            continue
        except ValueError:
            pass
        host = host.removeprefix("*").lstrip(".")
        if host:
            entries.append(("name", host, port))
    return False, tuple(entries)


def read_environment(env=None) -> Environment:
    env = os.environ if env is None else env
    proxies = {}
    for scheme in ("http", "https"):
        found = (_value((f"{scheme}_proxy", f"{scheme.upper()}_PROXY"), env)
                 or _value(("all_proxy", "ALL_PROXY"), env))
        if found:
            proxies[scheme] = parse_proxy(*found)
    bypass_all, entries = parse_no_proxy((_value(("no_proxy", "NO_PROXY"), env) or ("", ""))[1])
    return Environment(proxies, entries, bypass_all)


OFF = False  # True once the environment was read and names no proxy: the client skips route()


@functools.cache
def environment() -> Environment:
    """The environment's proxies, read once per process."""
    global OFF
    found = read_environment()
    OFF = not found.proxies
    for scheme, proxy in sorted(found.proxies.items()):
        if proxy.problem:
            logger.warning("Model calls to %s servers will fail: %s.", scheme, proxy.problem)
        elif not found.bypass_all:
            logger.info("Model calls to %s servers go through the proxy %s%s.", scheme, proxy.shown,
                        " (with credentials)" if proxy.authorization else "")
    return found


def bypassed(env: Environment, host: str, port: int) -> bool:
    """Whether NO_PROXY leaves (host, port) out of the proxy."""
    if env.bypass_all:
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = None
    for kind, value, only_port in env.no_proxy:
        if only_port is not None and only_port != port:
            continue
        if kind == "net":
            if address is not None and address in value:
                return True
        elif host == value or host.endswith("." + value):
            return True
    return False


@functools.lru_cache(maxsize=1024)
def route(origin: Origin | None) -> Route | None:
    """How to reach `origin`: None to connect to it directly."""
    if origin is None:
        return None
    env = environment()
    scheme, host, port = origin
    proxy = env.proxies.get(scheme)
    if proxy is None or bypassed(env, host.lower(), port):
        return None
    shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    connect = f"CONNECT {shown} HTTP/1.1\r\nHost: {shown}\r\n"
    if proxy.authorization:
        connect += f"Proxy-Authorization: {proxy.authorization}\r\n"
    return Route(proxy, scheme == "https", (origin, proxy), f"http://{shown}",
                 (connect + "\r\n").encode("latin-1"))


def kept_alive(headers: dict[str, str]) -> bool:
    """Whether a proxy's answer to a plain-http request lets its connection be used again: only when it
    says so (tinyproxy, for one, closes it after every answer without saying)."""
    return "keep-alive" in (headers.get("connection", "") + headers.get("proxy-connection", "")).lower()


def asked_credentials(proxy: Proxy) -> str:
    return (f"The proxy {proxy.shown} asked for credentials (407): "
            f"{'they were refused' if proxy.authorization else 'the proxy URL holds none'}.")


def reset() -> None:
    """Read the environment again at the next call (tests)."""
    global OFF
    OFF = False
    environment.cache_clear()
    route.cache_clear()


class _TunnelHead(asyncio.Protocol):
    """The proxy's answer to CONNECT: its head, up to the blank line."""

    def __init__(self) -> None:
        self.buffer = b""
        self.head: asyncio.Future = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if b"\r\n\r\n" in self.buffer and not self.head.done():
            self.head.set_result(self.buffer.split(b"\r\n", 1)[0].decode("latin-1"))
        elif len(self.buffer) > 65536 and not self.head.done():
            self.head.set_exception(ProxyError("The proxy's answer to CONNECT has no end."))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.head.done():
            self.head.set_exception(ProxyError("The proxy closed the connection without answering CONNECT."))


async def open_connection(route: Route, factory, context, host: str):
    """A connection through the proxy, for `factory()`'s protocol: to the proxy itself (http), or a
    tunnel with TLS inside (https). Failures are OSError (ProxyError, ssl.SSLError); the caller
    bounds the whole with its connect timeout."""
    proxy = route.proxy
    if proxy.problem:
        raise ProxyError(f"{proxy.problem}.")
    loop = asyncio.get_running_loop()
    try:
        transport, protocol = await loop.create_connection(
            _TunnelHead if route.tunnel else factory, proxy.host, proxy.port)
    except OSError as exc:
        reason = os.strerror(exc.errno) if exc.errno else type(exc).__name__  # not the message: it repeats the address
        raise ProxyError(f"The proxy {proxy.shown} could not be reached ({reason}).") from None
    if not route.tunnel:
        return protocol
    try:
        transport.write(route.connect)
        status_line = await protocol.head
        status = status_line.split(" ", 2)
        if len(status) < 2 or not status[1].startswith("2"):
            if len(status) > 1 and status[1] == "407":
                raise ProxyError(asked_credentials(proxy))
            raise ProxyError(f"The proxy {proxy.shown} refused the tunnel: {status_line[:100]!r}.")
        conn = factory()
        tls = await loop.start_tls(transport, conn, context, server_hostname=host)
        conn.connection_made(tls)
        return conn
    except BaseException:
        transport.close()
        raise
