"""Upstream HTTP clients side by side, in one process, against the reference upstream: what one
model call costs the gateway's process in the client alone (issue 13, "a leaner upstream client").

    .venv/bin/python bench/upstream_client.py            # about 2-3 minutes -> results/upstream_client.md
    .venv/bin/python bench/upstream_client.py --quick    # about 30 s, a sanity check

Clients (each keeps one pool for the whole run, as a gateway process does):
  httpx    httpx.AsyncClient configured as gateway/upstream/providers/base.py had it (send(stream=True),
           aiter_raw() into gateway.upstream.sse.sse_read)
  aiohttp  aiohttp.ClientSession (TCPConnector, C parser); skipped when aiohttp is not importable
           (it is not a dependency: `pip install --target DIR aiohttp==3.14.5`, then PYTHONPATH=DIR)
  own      gateway.upstream.http_client (asyncio protocol + httptools), the client the gateway uses now

Every call POSTs a chat completion to `/v1/chat/completions` and parses the answer as the gateway
does: streamed, the SSE events through gateway.upstream.sse.sse_read and each event's JSON; whole
(`stream: false`), the JSON body. Per round and per (client, mode): c=1 sequential calls (wall
latency of each call, p50 and p99; CPU of this process per call from time.process_time), then
c=16 concurrent callers (calls per second, CPU per call). Rounds interleave the clients, their
order rotating each round (A B C, B C A, C A B, ...); figures are medians over rounds. The
upstream runs in its own process (uvicorn, one worker), so at c=16 its CPU, not the client's,
bounds the throughput on a small machine: CPU per call is the figure that tells clients apart.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

import harness
from harness import PY, RESULTS, Proc, free_port, wait_http
from stack import REPLY

from gateway.upstream import http_client as upstream_http
from gateway.upstream.sse import sse_read

HEADERS = {"Authorization": "Bearer sk-bench-not-a-real-key"}
MESSAGES = [{"role": "user", "content": "Say something."}]


def payload(stream: bool) -> dict:
    body = {"model": "echo-1", "messages": MESSAGES, "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    return body


async def consume_sse(pieces) -> int:
    """What the gateway does with a streamed answer: split the events, parse each one's JSON."""
    count = 0
    async for _event, data in sse_read(pieces):
        if not data.startswith("[DONE]"):
            json.loads(data)
        count += 1
    return count


def consume_whole(body: bytes) -> int:
    reply = json.loads(body)
    return len(reply["choices"])


class HttpxClient:
    name = "httpx"

    def __init__(self, url: str):
        import httpx

        self.httpx, self.url = httpx, url
        self.client = httpx.AsyncClient(
            limits=httpx.Limits(max_connections=1000, max_keepalive_connections=200, keepalive_expiry=30),
            follow_redirects=False)
        self.timeout = httpx.Timeout(connect=5.0, read=120.0, write=30.0, pool=30.0)

    async def call(self, stream: bool) -> int:
        request = self.client.build_request("POST", self.url, json=payload(stream), headers=HEADERS,
                                            timeout=self.timeout)
        response = await self.client.send(request, stream=stream)
        try:
            assert response.status_code == 200, response.status_code
            return await consume_sse(response.aiter_raw()) if stream else consume_whole(response.content)
        finally:
            await response.aclose()

    async def aclose(self) -> None:
        await self.client.aclose()


class AiohttpClient:
    name = "aiohttp"

    def __init__(self, url: str):
        import aiohttp

        self.url = url
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=1000, limit_per_host=0, keepalive_timeout=30),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=5.0, sock_read=120.0))

    async def call(self, stream: bool) -> int:
        async with self.session.post(self.url, json=payload(stream), headers=HEADERS) as response:
            assert response.status == 200, response.status
            if stream:
                return await consume_sse(response.content.iter_any())
            return consume_whole(await response.read())

    async def aclose(self) -> None:
        await self.session.close()


class OwnClient:
    name = "own"

    def __init__(self, url: str):
        self.url = url
        self.client = upstream_http.Client()
        self.timeouts = upstream_http.Timeouts(connect=5.0, read=120.0, write=30.0)

    async def call(self, stream: bool) -> int:
        request = upstream_http.build_request("POST", self.url, json=payload(stream), headers=HEADERS,
                                              timeouts=self.timeouts)
        response = await self.client.send(request)
        try:
            assert response.status_code == 200, response.status_code
            return await consume_sse(response.aiter_raw()) if stream else consume_whole(await response.aread())
        finally:
            await response.aclose()

    async def aclose(self) -> None:
        await self.client.aclose()


def aiohttp_available() -> bool:
    try:
        import aiohttp  # noqa: F401
    except ImportError:
        return False
    return True


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


async def at_c1(client, stream: bool, calls: int) -> dict:
    latencies = []
    cpu0 = time.process_time()
    for _ in range(calls):
        start = time.perf_counter()
        await client.call(stream)
        latencies.append(time.perf_counter() - start)
    cpu = time.process_time() - cpu0
    return {"p50_ms": percentile(latencies, 50) * 1000, "p99_ms": percentile(latencies, 99) * 1000,
            "cpu_ms": cpu / calls * 1000}


async def at_cn(client, stream: bool, calls: int, concurrency: int, upstream_pid: int) -> dict:
    left = calls

    async def worker():
        nonlocal left
        while left > 0:
            left -= 1
            await client.call(stream)

    cpu0, up0 = time.process_time(), harness.proc_cpu_seconds(upstream_pid)
    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    wall = time.perf_counter() - start
    cpu, up = time.process_time() - cpu0, harness.proc_cpu_seconds(upstream_pid) - up0
    return {"rps": calls / wall, "cpu_ms": cpu / calls * 1000, "upstream_cpu_ms": up / calls * 1000,
            "client_busy": cpu / wall}


async def measure(args, url: str, upstream_pid: int) -> tuple[dict, list[str]]:
    makers = [HttpxClient, OwnClient]
    if aiohttp_available():
        makers.insert(1, AiohttpClient)
    clients = [make(url) for make in makers]
    names = [c.name for c in clients]
    modes = {"streamed": True, "whole": False}
    # sanity: every client gets the same answer (22 chunks of the reply, the usage chunk, [DONE])
    for client in clients:
        events = await client.call(True)
        assert events == 24, f"{client.name}: {events} SSE events, expected 24"
        assert await client.call(False) == 1
        for _ in range(args.warmup):
            await client.call(True)
            await client.call(False)
    samples: dict = {(name, mode): [] for name in names for mode in modes}
    loads = []
    for round_no in range(args.rounds):
        order = clients[round_no % len(clients):] + clients[:round_no % len(clients)]
        for mode, stream in modes.items():
            for client in order:
                c1 = await at_c1(client, stream, args.c1_calls)
                cn = await at_cn(client, stream, args.cn_calls, args.concurrency, upstream_pid)
                samples[(client.name, mode)].append({"c1": c1, "cn": cn})
        loads.append(os.getloadavg()[0])
        print(f"round {round_no + 1}/{args.rounds} done (load {loads[-1]:.2f})", flush=True)
    for client in clients:
        await client.aclose()
    return {"samples": {f"{n}/{m}": v for (n, m), v in samples.items()}, "loads": loads}, names


def median_of(rows: list[dict], part: str, key: str) -> float:
    return statistics.median(r[part][key] for r in rows)


def report(data: dict, names: list[str], args, versions: str) -> str:
    samples = data["samples"]
    fig = {}
    for name in names:
        for mode in ("streamed", "whole"):
            rows = samples[f"{name}/{mode}"]
            fig[(name, mode)] = {
                "p50": median_of(rows, "c1", "p50_ms"), "p99": median_of(rows, "c1", "p99_ms"),
                "cpu1": median_of(rows, "c1", "cpu_ms"), "rps": median_of(rows, "cn", "rps"),
                "cpun": median_of(rows, "cn", "cpu_ms"), "up": median_of(rows, "cn", "upstream_cpu_ms"),
            }
    lines = [
        "# Upstream HTTP clients side by side (`bench/upstream_client.py`)",
        "",
        (f"{time.strftime('%Y-%m-%d %H:%M')}, {platform.node()}, {os.cpu_count()} CPUs, "
        f"{harness.cpu_model()}; loop: {args.loop}; {versions}"),
        (f"Rounds: {args.rounds} (clients interleaved, order rotating); per round and per (client, mode): "
        f"{args.c1_calls} calls at c=1, {args.cn_calls} at c={args.concurrency}. Figures: medians over rounds."),
        (f"Load average (1 min) after each round: {', '.join(f'{x:.2f}' for x in data['loads'])} "
        "(other work was running on the machine: read the ratios, not the absolute figures)."),
        "",
        ("Streamed: the upstream's SSE (22 reply chunks, the usage chunk, `[DONE]`), every event parsed "
        "(sse_read + json.loads). "
        "Whole: `stream: false`, one JSON body. CPU = this process (client + parsing) per call; "
        "upstream CPU per call for scale."),
        "",
        (f"| client | mode | c=1 p50 ms | c=1 p99 ms | c=1 CPU ms/call | c={args.concurrency} calls/s "
        f"| c={args.concurrency} CPU ms/call | upstream CPU ms/call |"),
        "|---|---|---|---|---|---|---|---|",
    ]
    for mode in ("streamed", "whole"):
        for name in names:
            f = fig[(name, mode)]
            lines.append(f"| {name} | {mode} | {f['p50']:.3f} | {f['p99']:.3f} | {f['cpu1']:.3f} | {f['rps']:.0f} "
                         f"| {f['cpun']:.3f} | {f['up']:.3f} |")
    lines += ["", "Ratios to httpx in the same run (lower is better, except calls/s):", "",
              "| client | mode | c=1 p50 | c=1 CPU | calls/s | c=16 CPU |", "|---|---|---|---|---|---|"]
    for mode in ("streamed", "whole"):
        base = fig[("httpx", mode)]
        for name in names:
            if name == "httpx":
                continue
            f = fig[(name, mode)]
            lines.append(f"| {name} | {mode} | {f['p50'] / base['p50']:.2f} | {f['cpu1'] / base['cpu1']:.2f} "
                         f"| {f['rps'] / base['rps']:.2f} | {f['cpun'] / base['cpun']:.2f} |")
    lines += ["", "Whole (`stream: false`) against streamed, per client (what asking a whole reply whole would save):",
              "", "| client | c=1 p50 ms saved | c=1 CPU ms/call saved | c=16 CPU ms/call saved | whole/streamed CPU |",
              "|---|---|---|---|---|"]
    for name in names:
        s, w = fig[(name, "streamed")], fig[(name, "whole")]
        lines.append(f"| {name} | {s['p50'] - w['p50']:.3f} | {s['cpu1'] - w['cpu1']:.3f} "
                     f"| {s['cpun'] - w['cpun']:.3f} "
                     f"| {w['cpun'] / s['cpun']:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--c1-calls", type=int, default=300)
    p.add_argument("--cn-calls", type=int, default=1600)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop",
                   help="the gateway runs on uvloop (bench/README.md)")
    p.add_argument("--quick", action="store_true", help="3 rounds of 100 and 480 calls")
    p.add_argument("--tag", default="", help="suffix of the result files")
    args = p.parse_args()
    if args.quick:
        args.rounds, args.c1_calls, args.cn_calls, args.warmup = 3, 100, 480, 20
    harness.install_signal_handlers()
    tmp = Path(tempfile.mkdtemp(prefix="bench-upstream-client-"))
    port = free_port()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    upstream = Proc("upstream", [PY, "-m", "tests.upstream", "--port", str(port), "--no-record", "--reply", REPLY,
                                 "--tokens-per-second", "0"], env, tmp)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_http(base + "/_control", upstream)
        if args.loop == "uvloop":
            import uvloop

            uvloop.install()
        data, names = asyncio.run(measure(args, base + "/v1/chat/completions", upstream.popen.pid))
    finally:
        upstream.stop()
    import importlib.metadata as md

    wanted = ["httpx", "httpcore", "aiohttp", "httptools", "uvloop"]
    found = []
    for name in wanted:
        try:
            found.append(f"{name} {md.version(name)}")
        except md.PackageNotFoundError:
            pass
    text = report(data, names, args, ", ".join(found) + f", Python {platform.python_version()}")
    print(text)
    stem = "upstream_client" + (f"-{args.tag}" if args.tag else "") + ("-quick" if args.quick else "")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{stem}.md").write_text(text)
    (RESULTS / f"{stem}.json").write_text(json.dumps({"args": vars(args), **data}, indent=1))
    print(f"-> {RESULTS / (stem + '.md')}")


if __name__ == "__main__":
    main()
