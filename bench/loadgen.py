"""The load generator: a closed loop of `c` workers in this process, each on its own HTTP/1.1
keep-alive connection (raw asyncio sockets by default, httpx on request), and the statistics of a run."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import re
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field

MESSAGES = [{"role": "user", "content": "Say something short."}]
FIRST_TOKEN = re.compile(rb'"(?:content|text)":\s*"[^"]')  # the first delta that carries text (chat or messages)
STREAM_END = re.compile(rb'\[DONE\]|"message_stop"')  # the end of a chat stream, or of a messages stream


class HttpError(Exception):
    pass


class RawConnection:
    """HTTP/1.1 keep-alive over one asyncio socket: the thinnest client Python offers."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self.reader = self.writer = None
        self.headers: dict[bytes, bytes] = {}  # of the last reply, names lowercased

    async def _open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port, limit=1 << 20)
        sock = self.writer.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            with contextlib.suppress(Exception):
                await self.writer.wait_closed()
        self.reader = self.writer = None

    async def exchange(self, payload: bytes, stream: bool = False) -> tuple[int, bytes, float | None]:
        """Send one request; read the whole reply: (status, body, time of the first token in a stream)."""
        if self.writer is None:
            await self._open()
        self.writer.write(payload)
        head = await self.reader.readuntil(b"\r\n\r\n")
        status_line, _, header_block = head.partition(b"\r\n")
        status = int(status_line.split(b" ", 2)[1])
        headers = {}
        for line in header_block.split(b"\r\n"):
            if line:
                name, _, value = line.partition(b":")
                headers[name.strip().lower()] = value.strip().lower()
        first = None
        if b"content-length" in headers:
            body = await self.reader.readexactly(int(headers[b"content-length"]))
            if stream and FIRST_TOKEN.search(body):
                first = time.perf_counter()
        elif headers.get(b"transfer-encoding") == b"chunked":
            parts = []
            for _ in range(100_000):  # bounded
                size = int((await self.reader.readuntil(b"\r\n")).split(b";", 1)[0], 16)
                if size == 0:
                    await self.reader.readuntil(b"\r\n")
                    break
                chunk = (await self.reader.readexactly(size + 2))[:-2]
                if stream and first is None and FIRST_TOKEN.search(chunk):
                    first = time.perf_counter()
                parts.append(chunk)
            body = b"".join(parts)
        else:
            raise HttpError("reply without length")
        if headers.get(b"connection") == b"close":
            await self.close()
        self.headers = headers
        return status, body, first

    async def request(self, payload: bytes, stream: bool, require: tuple[str, str] | None = None) -> float | None:
        """A chat completion: checked whole (status 200, text, a stream's [DONE]; with `require`, a header
        the reply must carry: `X-Cache: hit` from the response cache, `Idempotent-Replayed: true` for a
        replay). Returns the first token's time."""
        status, body, first = await self.exchange(payload, stream)
        if status != 200:
            raise HttpError(f"status {status}: {body[:200]!r}")
        if require and self.headers.get(require[0].lower().encode()) != require[1].lower().encode():
            raise HttpError(f"not {require[0]}: {require[1]} but {self.headers.get(require[0].lower().encode())!r}")
        if stream and not STREAM_END.search(body[-64:]):
            raise HttpError(f"stream without its end: {body[-200:]!r}")
        if not stream and b'"content"' not in body:
            raise HttpError(f"no content: {body[:200]!r}")
        return first


def build_request(host: str, path: str, body: bytes, headers: dict) -> bytes:
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}", "Content-Type: application/json",
             f"Content-Length: {len(body)}", *[f"{k}: {v}" for k, v in headers.items()]]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


class RawClient:
    def __init__(self, base: str, concurrency: int):
        host, port = base.removeprefix("http://").split(":")
        self.free = [RawConnection(host, int(port)) for _ in range(concurrency)]
        self.host = f"{host}:{port}"

    def build(self, path: str, body: bytes, headers: dict) -> bytes:
        return build_request(self.host, path, body, headers)

    async def call(self, payload: bytes, stream: bool, require: tuple[str, str] | None = None) -> float | None:
        conn = self.free.pop()
        try:
            return await conn.request(payload, stream, require)
        except BaseException:
            await conn.close()  # a failed exchange leaves the socket in an unknown state
            raise
        finally:
            self.free.append(conn)

    async def aclose(self) -> None:
        for conn in self.free:
            await conn.close()


class HttpxClient:
    def __init__(self, base: str, concurrency: int):
        import httpx

        self.base = base
        self.client = httpx.AsyncClient(
            base_url=base, timeout=30,
            limits=httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency))

    def build(self, path: str, body: bytes, headers: dict):
        return path, body, {"Content-Type": "application/json", **headers}

    async def call(self, payload, stream: bool, require: tuple[str, str] | None = None) -> float | None:
        path, body, headers = payload
        if not stream:
            r = await self.client.post(path, content=body, headers=headers)
            if r.status_code != 200 or b'"content"' not in r.content:
                raise HttpError(f"status {r.status_code}: {r.content[:200]!r}")
            _check_header(r, require)
            return None
        first, tail = None, b""
        async with self.client.stream("POST", path, content=body, headers=headers) as r:
            async for chunk in r.aiter_raw():
                if first is None and FIRST_TOKEN.search(chunk):
                    first = time.perf_counter()
                tail = (tail + chunk)[-64:]
            if r.status_code != 200 or not STREAM_END.search(tail):
                raise HttpError(f"status {r.status_code}: {tail!r}")
        _check_header(r, require)
        return first

    async def aclose(self) -> None:
        await self.client.aclose()


def _check_header(response, require: tuple[str, str] | None) -> None:
    if require and response.headers.get(require[0], "").lower() != require[1].lower():
        raise HttpError(f"not {require[0]}: {require[1]} but {response.headers.get(require[0])!r}")


CLIENTS = {"raw": RawClient, "httpx": HttpxClient}


@dataclass
class RunResult:
    latencies: list = field(default_factory=list)  # seconds, time to the last byte
    ttft: list = field(default_factory=list)  # seconds, time to the first token (streams)
    errors: int = 0
    error_samples: list = field(default_factory=list)
    elapsed: float = 0.0
    warmup_requests: int = 0  # sent before the measured ones (also metered by the gateway)

    @property
    def throughput(self) -> float:
        return len(self.latencies) / self.elapsed if self.elapsed else 0.0

    @property
    def sent(self) -> int:
        return len(self.latencies) + self.errors + self.warmup_requests


async def closed_loop(call: Callable, concurrency: int, count: int, seconds: float) -> RunResult:
    """`concurrency` workers each awaiting `call(i)` (i = 0, 1, … across workers) until `count` calls were
    issued or `seconds` passed. `call` returns the first token's time or None; an exception is an error."""
    result = RunResult()
    issued = 0
    start = time.perf_counter()
    deadline = start + seconds

    async def worker() -> None:
        nonlocal issued
        for _ in range(count):  # bounded in count; and in time below
            if issued >= count or time.perf_counter() >= deadline:
                return
            i = issued
            issued += 1
            t0 = time.perf_counter()
            try:
                first = await asyncio.wait_for(call(i), timeout=30)
            except Exception as exc:  # noqa: BLE001 - counted and reported
                result.errors += 1
                if len(result.error_samples) < 3:
                    result.error_samples.append(repr(exc)[:300])
                continue
            t1 = time.perf_counter()
            result.latencies.append(t1 - t0)
            if first is not None:
                result.ttft.append(first - t0)

    tasks = [asyncio.create_task(worker()) for _ in range(concurrency)]
    try:
        _, pending = await asyncio.wait(tasks, timeout=seconds + 60)  # bounded in time
        if pending:
            raise RuntimeError(f"{len(pending)} load workers still running after {seconds + 60:.0f} s")
        for task in tasks:
            task.result()
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    result.elapsed = time.perf_counter() - start
    return result


SURFACES = {  # surface -> (path, the credential's header and prefix)
    "chat": ("/v1/chat/completions", "Authorization", "Bearer "),
    "messages": ("/v1/messages", "x-api-key", ""),
}


async def measure(kind: str, base: str, model: str, key: str, stream: bool, concurrency: int, count: int,
                  seconds: float, warmup_seconds: float, surface: str = "chat", require: tuple[str, str] | None = None,
                  headers: dict | None = None, messages: list | None = None) -> RunResult:
    """One measured run of chat completions (or Anthropic messages) against one target: warm-up
    (discarded), then the run, on one client. Every run sends one request over and over, with
    `headers` added; with `require` (bench/gateway_latency.py --cache, --replay) a measured reply that
    lacks that header (`X-Cache: hit`, `Idempotent-Replayed: true`) is an error: the warm-up's first call
    keeps the reply. `messages` replaces the one short user message (gateway_latency.py --prompt-bytes)."""
    client = CLIENTS[kind](base, concurrency)
    body = json.dumps({"model": model, "messages": messages or MESSAGES, "stream": stream, "max_tokens": 64}).encode()
    path, header, prefix = SURFACES[surface]
    payload = client.build(path, body, {header: prefix + key, **(headers or {})})

    def call(_i: int):
        return client.call(payload, stream)

    def hit(_i: int):
        return client.call(payload, stream, require)

    try:
        warm = await closed_loop(call, concurrency, max(20, 4 * concurrency), warmup_seconds)
        if warm.errors and not warm.latencies:
            raise RuntimeError(f"every warm-up request to {base} failed: {warm.error_samples}")
        gc.collect()
        gc.disable()
        try:
            run = await closed_loop(hit if require else call, concurrency, count, seconds)
            run.warmup_requests = len(warm.latencies) + warm.errors
            return run
        finally:
            gc.enable()
    finally:
        await client.aclose()


def pct(values: list, q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summarize(run: RunResult) -> dict:
    return {
        "n": len(run.latencies), "errors": run.errors, "req_s": run.throughput,
        "p50": pct(run.latencies, 0.5) * 1000, "p99": pct(run.latencies, 0.99) * 1000,
        "ttft_p50": pct(run.ttft, 0.5) * 1000 if run.ttft else None,
        "ttft_p99": pct(run.ttft, 0.99) * 1000 if run.ttft else None,
    }
