"""The gateway's added latency and throughput on /v1/chat/completions, against the reference upstream.

    .venv/bin/python bench/gateway_latency.py            # full run (about 4 minutes)
    .venv/bin/python bench/gateway_latency.py --quick    # small sanity run (under a minute)
    .venv/bin/python bench/gateway_latency.py --profile  # c=1 non-stream under py-spy -> results/profile.txt
    .venv/bin/python bench/gateway_latency.py --help     # --stream, --client httpx, --env NAME=VALUE, --tag, --rounds

Everything runs on loopback and stops itself: a fresh PostgreSQL database (dropped at the end), Redis
database 12 (its gw:* keys flushed), the reference upstream (`python -m tests.upstream`) and ONE gateway
web process (uvicorn, one worker). The load generator is this process. See bench/README.md for the method.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import gc
import json
import os
import platform
import re
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
APP_ROOT = ROOT  # the code under test: this working tree, or an export of one commit (--commit)
PY = sys.executable

PG_ADMIN_URL = os.environ.get("BENCH_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
PG_URL_TEMPLATE = "postgres://postgres@127.0.0.1:5432/{name}"
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/12")
HUGE = 100_000_000  # request ceilings per minute: counted, never reached
TOKEN_CEILING = 10**12  # token quotas: checked and counted, never reached

REPLY = ("The quick brown fox jumps over the lazy dog while seven bright stars keep watch over "
         "the quiet sleeping town tonight")  # 20 words
MESSAGES = [{"role": "user", "content": "Say something short."}]
FIRST_TOKEN = re.compile(rb'"content":\s*"[^"]')  # the first delta that carries text


# ---------------------------------------------------------------------------------------------
# Plans


@dataclass(frozen=True)
class Plan:
    name: str
    rounds: int
    seconds: float  # ceiling on one measured run (one target, one round)
    warmup_seconds: float
    counts: dict  # concurrency -> requests in one measured run (whichever of count/time comes first)
    concurrencies: tuple = (1, 16, 64)
    modes: tuple = ("non-stream", "stream")


FULL = Plan("full", rounds=3, seconds=8.0, warmup_seconds=1.0, counts={1: 2000, 16: 6000, 64: 8000})
QUICK = Plan("quick", rounds=1, seconds=1.5, warmup_seconds=0.3, counts={1: 300, 16: 1000, 64: 1500})


# ---------------------------------------------------------------------------------------------
# Processes and clean-up


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:
    """Children get SIGTERM if this process dies without cleaning up (Linux prctl PR_SET_PDEATHSIG)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)


class Proc:
    def __init__(self, name: str, argv: list[str], env: dict, log_dir: Path):
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.popen = subprocess.Popen(argv, cwd=APP_ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_die_with_parent)

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, chars: int = 3000) -> str:
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")[-chars:]
        return ""

    def stop(self, timeout: float = 10) -> None:
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                self.popen.terminate()
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    self.popen.kill()
                self.popen.wait(timeout=5)
        self._log.close()


def wait_http(url: str, proc: Proc, timeout: float = 30, headers: dict | None = None, expect: int = 200) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if not proc.alive():
            raise RuntimeError(f"{proc.name} exited during start-up:\n{proc.log_tail()}")
        try:
            r = httpx.get(url, headers=headers or {}, timeout=2)
            if r.status_code == expect:
                return
            last = f"status {r.status_code}: {r.text[:300]}"
        except httpx.TransportError as exc:
            last = repr(exc)
        time.sleep(0.1)
    raise RuntimeError(f"{proc.name} not ready at {url} after {timeout}s ({last}):\n{proc.log_tail()}")


def run_checked(argv: list[str], env: dict, stdin: str | None = None, timeout: float = 120) -> str:
    done = subprocess.run(argv, cwd=APP_ROOT, env=env, input=stdin, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return done.stdout


# ---------------------------------------------------------------------------------------------
# PostgreSQL and Redis


def pg_admin():
    import psycopg

    return psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=5)


def drop_stale_databases() -> list[str]:
    """Drop bench_gateway_<pid> databases whose benchmark process no longer exists."""
    dropped = []
    with pg_admin() as conn:
        names = [r[0] for r in conn.execute("SELECT datname FROM pg_database WHERE datname LIKE 'bench_gateway_%'")]
        for name in names[:50]:
            pid = name.rsplit("_", 1)[-1]
            if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                dropped.append(name)
    return dropped


_redis = None


def redis_client():
    """One connection for the whole benchmark, so its own look-ups open no connections during runs."""
    global _redis
    if _redis is None:
        import redis

        _redis = redis.Redis.from_url(REDIS_URL, socket_timeout=5, socket_connect_timeout=5)
    return _redis


_stats_conn = None


def stats_connection():
    """One PostgreSQL session for the statistics, opened before the runs (a new one would fork a backend
    and show up in the PostgreSQL CPU time)."""
    global _stats_conn
    if _stats_conn is None or _stats_conn.closed:
        _stats_conn = pg_admin()
    return _stats_conn


def redis_flush_gw() -> int:
    """Delete the gw:* keys of the benchmark's Redis database (only those, only that database)."""
    r = redis_client()
    deleted, cursor = 0, 0
    for _ in range(10_000):  # bounded
        cursor, keys = r.scan(cursor=cursor, match="gw:*", count=1000)
        if keys:
            deleted += r.delete(*keys)
        if cursor == 0:
            break
    return deleted


def backend_snapshot(db_name: str) -> dict:
    """Counters of PostgreSQL (this database) and Redis, to tell the backend work per gateway request."""
    snap: dict = {}
    with contextlib.suppress(Exception):
        conn = stats_connection()
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            "SELECT sessions, xact_commit, xact_rollback, tup_inserted, tup_fetched, tup_returned "
            "FROM pg_stat_database WHERE datname = %s", (db_name,)).fetchone()
        snap.update(zip(("pg_sessions", "pg_commits", "pg_rollbacks", "pg_inserted", "pg_fetched", "pg_returned"),
                        row))
    with contextlib.suppress(Exception):
        r = redis_client()
        stats = r.info("commandstats")
        for name, value in stats.items():
            snap["redis_" + name.removeprefix("cmdstat_")] = value["calls"]
        snap["redis_connections"] = r.info("stats")["total_connections_received"]
    return snap


def snapshot_delta(before: dict, after: dict) -> dict:
    return {k: after[k] - before.get(k, 0) for k in after if isinstance(after[k], (int, float))}


def backend_costs(db_url: str) -> dict:
    """Medians of the round trips the gateway makes: a new PostgreSQL connection, a query, a Redis command."""
    import psycopg

    out = {}
    url = db_url.replace("postgres://", "postgresql://", 1)
    times = []
    for _ in range(30):
        t = time.perf_counter()
        psycopg.connect(url, connect_timeout=5).close()
        times.append(time.perf_counter() - t)
    out["pg_connect_ms"] = statistics.median(times) * 1000
    with psycopg.connect(url, connect_timeout=5, autocommit=True) as conn:
        times = []
        for _ in range(200):
            t = time.perf_counter()
            conn.execute("SELECT 1").fetchone()
            times.append(time.perf_counter() - t)
    out["pg_query_ms"] = statistics.median(times) * 1000
    r = redis_client()
    times = []
    for _ in range(200):
        t = time.perf_counter()
        r.ping()
        times.append(time.perf_counter() - t)
    out["redis_rtt_ms"] = statistics.median(times) * 1000
    return out


def proc_cpu_seconds(pid: int, children: bool = False) -> float:
    """utime + stime of a process (all its threads); with `children`, plus that of its reaped children."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = int(fields[11]) + int(fields[12]) + ((int(fields[13]) + int(fields[14])) if children else 0)
        return ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def postgres_backends_cpu(db_name: str) -> dict[int, float]:
    """CPU seconds of each live PostgreSQL backend connected to the benchmark's database (other
    databases on the same server, e.g. other people's tests, are left out)."""
    out: dict[int, float] = {}
    with contextlib.suppress(Exception):
        pids = [r[0] for r in stats_connection().execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s", (db_name,)).fetchall()]
        for pid in pids[:1000]:
            cpu = proc_cpu_seconds(pid)
            if cpu == cpu:  # not NaN: the backend still exists
                out[pid] = cpu
    return out


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine spent busy (all cores, all processes), from /proc/stat."""
    with contextlib.suppress(OSError, ValueError):
        fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
        user, nice, system, idle, iowait, irq, softirq, steal = fields
        return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")
    return float("nan")


def redis_cpu_seconds() -> float:
    with contextlib.suppress(Exception):
        info = redis_client().info("cpu")
        return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])
    return float("nan")


# ---------------------------------------------------------------------------------------------
# The stack: database, upstream, gateway


def have(module: str, env: dict | None = None) -> bool:
    """Whether the gateway's interpreter (with the gateway's environment) can import `module`."""
    return subprocess.run([PY, "-c", f"import {module}"], capture_output=True, env=env, cwd=APP_ROOT).returncode == 0


def find_pyspy() -> str | None:
    """py-spy on PATH, in BENCH_PYSPY, or installed into a throwaway venv under /tmp (never into .venv)."""
    for candidate in (os.environ.get("BENCH_PYSPY"), shutil.which("py-spy"), "/tmp/bench-pyspy/bin/py-spy"):
        if candidate and Path(candidate).exists():
            return candidate
    print("bench: installing py-spy into /tmp/bench-pyspy (a throwaway venv)", flush=True)
    try:
        subprocess.run([PY, "-m", "venv", "/tmp/bench-pyspy"], check=True, capture_output=True, timeout=120)
        subprocess.run(["/tmp/bench-pyspy/bin/pip", "install", "-q", "py-spy"], check=True, capture_output=True,
                       timeout=300)
    except (subprocess.SubprocessError, OSError) as exc:
        print(f"bench: py-spy unavailable ({exc}); falling back to cProfile", flush=True)
        return None
    return "/tmp/bench-pyspy/bin/py-spy"


class Stack:
    """Everything the benchmark runs; `close()` undoes it all and is safe to call twice."""

    def __init__(self, extra_env: dict[str, str]):
        self.pid = os.getpid()
        self.db_name = f"bench_gateway_{self.pid}"
        self.db_url = PG_URL_TEMPLATE.format(name=self.db_name)
        self.tmp = Path(tempfile.mkdtemp(prefix="bench-gateway-"))
        self.procs: list[Proc] = []
        self.db_created = False
        self.api_key = ""
        self.extra_env = extra_env
        self.settings_line = ""
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("RATE_LIMIT_", "DJANGO_"))},
            "DJANGO_SETTINGS_MODULE": "gateway.settings",
            "DATABASE_URL": self.db_url,
            "REDIS_URL": REDIS_URL,
            "GATEWAY_VAR_DIR": str(self.tmp / "var"),
            "SECRET_KEY": secrets.token_urlsafe(40),
            "DEBUG": "false",
        }
        # Every request ceiling stays on (counted in Redis), with a ceiling the run never reaches.
        self.gateway_env = {**self.env, "RATE_LIMIT_V1": str(HUGE), "RATE_LIMIT_GENERAL": str(HUGE),
                            "RATE_LIMIT_CHAT": str(HUGE), **extra_env}
        self.refresh_server_flags()

    def refresh_server_flags(self) -> None:
        """uvloop and httptools only when the gateway's interpreter has them (they are not dependencies)."""
        self.server_flags = ["--no-access-log"]
        if have("uvloop", self.gateway_env):
            self.server_flags += ["--loop", "uvloop"]
        if have("httptools", self.gateway_env):
            self.server_flags += ["--http", "httptools"]

    # -- set up ----------------------------------------------------------------------------
    def setup_database(self) -> None:
        stale = drop_stale_databases()
        if stale:
            print(f"bench: dropped stale databases {', '.join(stale)}", flush=True)
        with pg_admin() as conn:
            conn.execute(f'CREATE DATABASE "{self.db_name}"')
        self.db_created = True
        flushed = redis_flush_gw()
        print(f"bench: database {self.db_name} created; {flushed} gw:* keys flushed from {REDIS_URL}", flush=True)
        manage = [PY, "manage.py"]
        run_checked([*manage, "migrate", "--noinput", "-v", "0"], self.env, timeout=300)
        run_checked([*manage, "createcachetable"], self.env)

    def start_upstream(self) -> None:
        self.upstream_port = free_port()
        up = Proc("upstream", [PY, "-m", "tests.upstream", "--port", str(self.upstream_port), "--no-record",
                               "--reply", REPLY, "--tokens-per-second", "0"], self.env, self.tmp)
        self.procs.append(up)
        self.upstream = f"http://127.0.0.1:{self.upstream_port}"
        wait_http(self.upstream + "/_control", up)
        import httpx

        httpx.post(self.upstream + "/_control", json={"reply": REPLY, "tokens_per_second": 0, "latency_ms": 0},
                   timeout=5).raise_for_status()

    def configure(self) -> None:
        config = self.tmp / "bench.yaml"
        config.write_text(
            "servers:\n"
            "  - name: bench\n"
            "    kind: openai\n"
            f"    base_url: http://127.0.0.1:{self.upstream_port}/v1\n"
            "    models:\n"
            "      - name: echo-1\n"
            "default_model: bench/echo-1\n"
            "groups:\n"
            "  - name: bench\n"
            "    api_access: true\n"
            f"    daily_tokens: {TOKEN_CEILING}\n"
            f"    weekly_tokens: {TOKEN_CEILING}\n"
            f"    monthly_tokens: {TOKEN_CEILING}\n"
        )
        manage = [PY, "manage.py"]
        run_checked([*manage, "applyconfig", str(config)], self.env)
        password = secrets.token_urlsafe(18)
        run_checked([*manage, "createaccount", "--email", "bench@example.com", "--name", "Bench", "--group", "bench",
                     "--api-access", "--password-stdin"], self.env, stdin=password + "\n")
        out = run_checked([*manage, "shell", "-c",
                           "from accounts.models import Account; from accounts.keys import api_key_generate; "
                           "print(api_key_generate(account=Account.objects.get(email='bench@example.com')).key)"],
                          self.env)
        keys = [line for line in out.split() if line.startswith("svc_usr_")]
        if not keys:
            raise RuntimeError(f"no API key in the output of api_key_generate: {out!r}")
        self.api_key = keys[-1]

    def effective_settings(self) -> str:
        """The gateway's settings that matter here, as its own process sees them."""
        code = ("from django.conf import settings as s; d = s.DATABASES['default']; "
                "print(f\"CONN_MAX_AGE={d['CONN_MAX_AGE']}, DB pool={d.get('OPTIONS', {}).get('pool', 'off')}, "
                "REGISTRY_TTL_SECONDS={s.REGISTRY_TTL_SECONDS}, DEBUG={s.DEBUG}, "
                "USAGE_BATCHED={getattr(s, 'USAGE_BATCHED', 'n/a')}, "
                "RATE_LIMITS v1={s.RATE_LIMITS['v1']} general={s.RATE_LIMITS['general']}\")")
        try:
            return run_checked([PY, "manage.py", "shell", "-c", code], self.gateway_env).strip().splitlines()[-1]
        except (RuntimeError, IndexError, subprocess.SubprocessError) as exc:
            return f"unknown ({exc})"

    def start_gateway(self, wrap: list[str] | None = None, name: str = "gateway") -> Proc:
        self.gateway_port = free_port()
        argv = [PY, "-m", "uvicorn", "gateway.asgi:application", "--host", "127.0.0.1", "--port",
                str(self.gateway_port), "--workers", "1", "--log-level", "warning", *self.server_flags]
        proc = Proc(name, [*(wrap or []), *argv], self.gateway_env, self.tmp)
        self.procs.append(proc)
        self.gateway = f"http://127.0.0.1:{self.gateway_port}"
        wait_http(self.gateway + "/v1/models", proc, timeout=60, headers={"Authorization": f"Bearer {self.api_key}"})
        return proc

    def cpu_snapshot(self) -> dict:
        procs = {p.name: p.popen.pid for p in self.procs}
        return {"client": time.process_time(),
                "upstream": proc_cpu_seconds(procs["upstream"]) if "upstream" in procs else float("nan"),
                "gateway": proc_cpu_seconds(procs["gateway"]) if "gateway" in procs else float("nan"),
                "postgres": postgres_backends_cpu(self.db_name), "redis": redis_cpu_seconds(),
                "machine": machine_busy_seconds(), "wall": time.monotonic()}

    @staticmethod
    def cpu_delta(before: dict, after: dict, requests: int) -> dict:
        """ms of CPU per request for each process, and the cores that other processes kept busy."""
        pg = sum(cpu - before["postgres"].get(pid, 0.0) for pid, cpu in after["postgres"].items())
        out = {k: (after[k] - before[k]) / max(requests, 1) * 1000
               for k in ("client", "upstream", "gateway", "redis")}
        out["postgres"] = pg / max(requests, 1) * 1000
        ours = sum(after[k] - before[k] for k in ("client", "upstream", "gateway", "redis") if after[k] == after[k]) + pg
        wall = after["wall"] - before["wall"]
        out["others_cores"] = max(after["machine"] - before["machine"] - ours, 0.0) / wall if wall > 0 else 0.0
        return out

    def usage_records(self) -> int:
        import psycopg

        with psycopg.connect(self.db_url.replace("postgres://", "postgresql://", 1), connect_timeout=5) as conn:
            return conn.execute("SELECT count(*) FROM gateway_usagerecord").fetchone()[0]

    # -- tear down -------------------------------------------------------------------------
    def close(self) -> None:
        for proc in reversed(self.procs):
            with contextlib.suppress(Exception):
                proc.stop()
        self.procs = []
        global _stats_conn
        if _stats_conn is not None:
            with contextlib.suppress(Exception):
                _stats_conn.close()
            _stats_conn = None
        if self.db_created:
            try:
                with pg_admin() as conn:
                    conn.execute(f'DROP DATABASE IF EXISTS "{self.db_name}" WITH (FORCE)')
                self.db_created = False
                print(f"bench: database {self.db_name} dropped", flush=True)
            except Exception as exc:  # noqa: BLE001 - report and go on cleaning
                print(f"bench: could not drop {self.db_name}: {exc}", file=sys.stderr, flush=True)
        with contextlib.suppress(Exception):
            redis_flush_gw()
        for _ in range(3):  # a child may still be closing a file in it
            shutil.rmtree(self.tmp, ignore_errors=True)
            if not self.tmp.exists():
                break
            time.sleep(0.5)


# ---------------------------------------------------------------------------------------------
# Load generator


class HttpError(Exception):
    pass


class RawConnection:
    """HTTP/1.1 keep-alive over one asyncio socket: the thinnest client Python offers."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self.reader = self.writer = None

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

    async def request(self, payload: bytes, stream: bool, t0: float) -> float | None:
        """Send one request; read the whole reply. Returns the time of the first token (streams)."""
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
            if stream and first is None and FIRST_TOKEN.search(body):
                first = time.perf_counter()
            last = body
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
            body = last = b"".join(parts)
        else:
            raise HttpError("reply without length")
        if headers.get(b"connection") == b"close":
            await self.close()
        if status != 200:
            raise HttpError(f"status {status}: {body[:200]!r}")
        if stream and b"[DONE]" not in last[-64:]:
            raise HttpError(f"stream without [DONE]: {last[-200:]!r}")
        if not stream and b'"content"' not in body:
            raise HttpError(f"no content: {body[:200]!r}")
        return first


class RawClient:
    def __init__(self, base: str, concurrency: int):
        host, port = base.removeprefix("http://").split(":")
        self.free = [RawConnection(host, int(port)) for _ in range(concurrency)]
        self.host = f"{host}:{port}"

    def build(self, path: str, body: bytes, headers: dict) -> bytes:
        lines = [f"POST {path} HTTP/1.1", f"Host: {self.host}", "Content-Type: application/json",
                 f"Content-Length: {len(body)}", *[f"{k}: {v}" for k, v in headers.items()]]
        return ("\r\n".join(lines) + "\r\n\r\n").encode() + body

    async def call(self, payload: bytes, stream: bool, t0: float) -> float | None:
        conn = self.free.pop()
        try:
            return await conn.request(payload, stream, t0)
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

    async def call(self, payload, stream: bool, t0: float) -> float | None:
        path, body, headers = payload
        if not stream:
            r = await self.client.post(path, content=body, headers=headers)
            if r.status_code != 200 or b'"content"' not in r.content:
                raise HttpError(f"status {r.status_code}: {r.content[:200]!r}")
            return None
        first, tail = None, b""
        async with self.client.stream("POST", path, content=body, headers=headers) as r:
            async for chunk in r.aiter_raw():
                if first is None and FIRST_TOKEN.search(chunk):
                    first = time.perf_counter()
                tail = (tail + chunk)[-64:]
            if r.status_code != 200 or b"[DONE]" not in tail:
                raise HttpError(f"status {r.status_code}: {tail!r}")
        return first

    async def aclose(self) -> None:
        await self.client.aclose()


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


async def _load(client, payload, stream: bool, concurrency: int, count: int, seconds: float) -> RunResult:
    result = RunResult()
    issued = 0
    start = time.perf_counter()
    deadline = start + seconds

    async def worker() -> None:
        nonlocal issued
        for _ in range(count):  # bounded in count; and in time below
            if issued >= count or time.perf_counter() >= deadline:
                return
            issued += 1
            t0 = time.perf_counter()
            try:
                first = await asyncio.wait_for(client.call(payload, stream, t0), timeout=30)
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


async def measure(kind: str, base: str, model: str, key: str, stream: bool, concurrency: int, count: int,
                  seconds: float, warmup_seconds: float) -> RunResult:
    """One measured run against one target: warm-up (discarded), then the run, on one client."""
    client = CLIENTS[kind](base, concurrency)
    body = json.dumps({"model": model, "messages": MESSAGES, "stream": stream, "max_tokens": 64}).encode()
    payload = client.build("/v1/chat/completions", body, {"Authorization": f"Bearer {key}"})
    try:
        warm = await _load(client, payload, stream, concurrency, max(20, 4 * concurrency), warmup_seconds)
        if warm.errors and not warm.latencies:
            raise RuntimeError(f"every warm-up request to {base} failed: {warm.error_samples}")
        gc.collect()
        gc.disable()
        try:
            run = await _load(client, payload, stream, concurrency, count, seconds)
            run.warmup_requests = len(warm.latencies) + warm.errors
            return run
        finally:
            gc.enable()
    finally:
        await client.aclose()


# ---------------------------------------------------------------------------------------------
# Statistics and reports


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


def med(rounds: list[dict], key: str):
    values = [r[key] for r in rounds if r.get(key) is not None]
    return statistics.median(values) if values else None


def cell_row(cell: dict) -> dict:
    d, g = cell["direct"], cell["gateway"]
    row = {"mode": cell["mode"], "c": cell["c"]}
    for side, rounds in (("d", d), ("g", g)):
        for key in ("p50", "p99", "req_s", "ttft_p50", "ttft_p99"):
            row[f"{side}_{key}"] = med(rounds, key)
        row[f"{side}_n"] = sum(r["n"] for r in rounds)
        row[f"{side}_errors"] = sum(r["errors"] for r in rounds)
        row[f"{side}_p50_range"] = (min(r["p50"] for r in rounds), max(r["p50"] for r in rounds))
        row[f"{side}_cpu"] = {k: statistics.median(r["cpu"][k] for r in rounds) for k in rounds[0].get("cpu", {})}
    row["add_p50"] = row["g_p50"] - row["d_p50"]
    row["add_p99"] = row["g_p99"] - row["d_p99"]
    row["ratio"] = row["g_req_s"] / row["d_req_s"] if row["d_req_s"] else float("nan")
    if row["d_ttft_p50"] is not None and row["g_ttft_p50"] is not None:
        row["add_ttft_p50"] = row["g_ttft_p50"] - row["d_ttft_p50"]
        row["add_ttft_p99"] = row["g_ttft_p99"] - row["d_ttft_p99"]
    return row


def f2(x) -> str:
    return "–" if x is None else f"{x:.2f}"


def main_table(rows: list[dict]) -> str:
    out = ["| mode | c | direct p50 | direct p99 | gateway p50 | gateway p99 | **added p50** | **added p99** "
           "| direct req/s | gateway req/s | gw/direct |",
           "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for r in rows:
        out.append(f"| {r['mode']} | {r['c']} | {f2(r['d_p50'])} | {f2(r['d_p99'])} | {f2(r['g_p50'])} | "
                   f"{f2(r['g_p99'])} | **{f2(r['add_p50'])}** | **{f2(r['add_p99'])}** | {r['d_req_s']:.0f} | "
                   f"{r['g_req_s']:.0f} | {r['ratio']:.2f} |")
    return "\n".join(out)


def ttft_table(rows: list[dict]) -> str:
    out = ["| mode | c | direct TTFT p50 | direct TTFT p99 | gateway TTFT p50 | gateway TTFT p99 | added TTFT p50 "
           "| added TTFT p99 |", "|---|--:|--:|--:|--:|--:|--:|--:|"]
    for r in rows:
        if r.get("add_ttft_p50") is None:
            continue
        out.append(f"| {r['mode']} | {r['c']} | {f2(r['d_ttft_p50'])} | {f2(r['d_ttft_p99'])} | "
                   f"{f2(r['g_ttft_p50'])} | {f2(r['g_ttft_p99'])} | {f2(r['add_ttft_p50'])} | "
                   f"{f2(r['add_ttft_p99'])} |")
    return "\n".join(out)


def cpu_table(rows: list[dict]) -> str:
    out = ["| mode | c | direct: upstream | direct: client | gateway: gateway process | gateway: upstream "
           "| gateway: PostgreSQL | gateway: Redis | gateway: client | other processes, cores busy (direct / gateway) |",
           "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for r in rows:
        d, g = r.get("d_cpu") or {}, r.get("g_cpu") or {}
        if not g:
            continue
        out.append(f"| {r['mode']} | {r['c']} | {f2(d.get('upstream'))} | {f2(d.get('client'))} | "
                   f"{f2(g.get('gateway'))} | {f2(g.get('upstream'))} | {f2(g.get('postgres'))} | "
                   f"{f2(g.get('redis'))} | {f2(g.get('client'))} | {f2(d.get('others_cores'))} / "
                   f"{f2(g.get('others_cores'))} |")
    return "\n".join(out)


def detail_table(cells: list[dict]) -> str:
    out = ["| mode | c | target | round | n | errors | p50 ms | p99 ms | req/s | other processes' load (cores) |",
           "|---|--:|---|--:|--:|--:|--:|--:|--:|--:|"]
    for cell in cells:
        for target in ("direct", "gateway"):
            for i, r in enumerate(cell[target], 1):
                out.append(f"| {cell['mode']} | {cell['c']} | {target} | {i} | {r['n']} | {r['errors']} | "
                           f"{r['p50']:.2f} | {r['p99']:.2f} | {r['req_s']:.0f} | "
                           f"{r.get('cpu', {}).get('others_cores', float('nan')):.2f} |")
    return "\n".join(out)


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    parts = [f"Python {platform.python_version()}"]
    for pkg in ("Django", "uvicorn", "h11", "httptools", "uvloop", "httpx", "httpcore", "asgiref", "psycopg", "redis"):
        with contextlib.suppress(PackageNotFoundError):
            parts.append(f"{pkg} {version(pkg)}")
    with contextlib.suppress(Exception):
        with pg_admin() as conn:
            parts.append("PostgreSQL " + conn.execute("SHOW server_version").fetchone()[0].split()[0])
    with contextlib.suppress(Exception):
        parts.append("Redis " + redis_client().info("server")["redis_version"])
    return ", ".join(parts)


_commit: str | None = None


def git_commit(rev: str | None = None) -> str:
    """The code under test, read once at the start: HEAD and whether the product code (outside bench/)
    differs from it, or the exported commit `rev`. Read-only git commands only."""
    global _commit
    if _commit is None:
        try:
            commit = subprocess.run(["git", "rev-parse", "--short", rev or "HEAD"], cwd=ROOT, capture_output=True,
                                    text=True, timeout=10, check=True).stdout.strip()
            if rev:
                _commit = f"{commit} (exported with git archive; the working tree was not used)"
            else:
                dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all", "--", ".", ":!bench"],
                                       cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.strip().splitlines()
                _commit = commit + (f" (plus uncommitted changes to {len(dirty)} files outside bench/)" if dirty else "")
        except (OSError, subprocess.SubprocessError):
            _commit = "unknown"
    return _commit


def export_commit(rev: str, into: Path) -> Path:
    """The tree of commit `rev` in a directory of its own (git archive: reads the repository, changes nothing).
    Other people may be editing the working tree while the benchmark runs."""
    target = into / "src"
    target.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", "--format=tar", rev], cwd=ROOT, capture_output=True, timeout=120)
    if archive.returncode != 0:
        raise RuntimeError(f"git archive {rev} failed: {archive.stderr.decode(errors='replace')}")
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True, timeout=120)
    return target


def backend_lines(per_request: dict, costs: dict) -> list[str]:
    lines = []
    if costs:
        lines.append(f"- One new PostgreSQL connection (connect + close, from Python): "
                     f"{costs['pg_connect_ms']:.2f} ms median; one `SELECT 1` round trip: {costs['pg_query_ms']:.3f} ms; "
                     f"one Redis `PING`: {costs['redis_rtt_ms']:.3f} ms.")
    if per_request:
        pg = ", ".join(f"{per_request[k]:.2f} {label}" for k, label in
                       (("pg_sessions", "connections opened"), ("pg_commits", "transactions"))
                       if k in per_request)
        redis_cmds = sorted(((k.removeprefix("redis_"), v) for k, v in per_request.items()
                             if k.startswith("redis_") and k != "redis_connections" and v >= 0.05),
                            key=lambda kv: -kv[1])
        lines.append(f"- Per gateway request (counted over every gateway request of the run, warm-ups included): "
                     f"PostgreSQL (this database; pooled sessions report with a delay) {pg}; Redis commands (whole "
                     f"server, shared with anything else using it) " + ", ".join(f"{name} {v:.2f}" for name, v in redis_cmds)
                     + f"; new Redis connections {per_request.get('redis_connections', 0):.3f}.")
    return lines


# ---------------------------------------------------------------------------------------------
# Runs


def run_benchmark(args, stack: Stack) -> None:
    plan = QUICK if args.quick else FULL
    if args.rounds:
        plan = Plan(plan.name, args.rounds, plan.seconds, plan.warmup_seconds, plan.counts)
    stack.settings_line = stack.effective_settings()
    stack.start_gateway()
    costs = backend_costs(stack.db_url)
    usage_before = stack.usage_records()
    cells = []
    gateway_requests = 0
    snap_total: dict = defaultdict(float)
    started = time.monotonic()
    for mode in plan.modes:
        stream = mode == "stream"
        for c in plan.concurrencies:
            cell = {"mode": mode, "c": c, "direct": [], "gateway": []}
            for rnd in range(plan.rounds):
                for target in ("direct", "gateway"):  # A B A B ...
                    base, model = (stack.upstream, "echo-1") if target == "direct" else (stack.gateway, "bench/echo-1")
                    before = backend_snapshot(stack.db_name) if target == "gateway" else None
                    cpu_before = stack.cpu_snapshot()
                    run = asyncio.run(measure(args.client, base, model, stack.api_key, stream, c, plan.counts[c],
                                              plan.seconds, plan.warmup_seconds))
                    sent = len(run.latencies) + run.errors + run.warmup_requests
                    if target == "gateway":
                        time.sleep(0.2)  # let the last replies' metering finish
                    cpu_after = stack.cpu_snapshot()
                    if target == "gateway":
                        for k, v in snapshot_delta(before, backend_snapshot(stack.db_name)).items():
                            snap_total[k] += v
                        gateway_requests += sent
                    s = summarize(run)
                    s["cpu"] = stack.cpu_delta(cpu_before, cpu_after, sent)
                    cell[target].append(s)
                    print(f"  {mode:10} c={c:<3} round {rnd + 1}/{plan.rounds} {target:7} n={s['n']:<5} "
                          f"err={s['errors']} p50={s['p50']:.2f}ms p99={s['p99']:.2f}ms {s['req_s']:.0f} req/s"
                          + (f" ttft50={s['ttft_p50']:.2f}ms" if s["ttft_p50"] is not None else "")
                          + " cpu ms/req " + " ".join(f"{k}={v:.2f}" for k, v in s["cpu"].items()
                                                      if k != "others_cores")
                          + f"; others busy {s['cpu']['others_cores']:.2f} cores", flush=True)
                    for sample in run.error_samples:
                        print(f"    error: {sample}", flush=True)
                    for proc in stack.procs:
                        if not proc.alive():
                            raise RuntimeError(f"{proc.name} died:\n{proc.log_tail()}")
            cells.append(cell)
    duration = time.monotonic() - started
    time.sleep(1.5)  # the gateway drains its usage spool in the background (gateway/usage_writer.py)
    usage_written = stack.usage_records() - usage_before
    per_request = {k: v / gateway_requests for k, v in snap_total.items()} if gateway_requests else {}
    rows = [cell_row(cell) for cell in cells]
    gateway_log = next((p.log_tail(2000) for p in stack.procs if p.name == "gateway"), "")
    write_report(args, plan, stack, rows, cells, costs, per_request, usage_written, gateway_requests, duration,
                 gateway_log)


def write_report(args, plan, stack, rows, cells, costs, per_request, usage_written, gateway_requests, duration,
                 gateway_log) -> None:
    errors = sum(r["d_errors"] + r["g_errors"] for r in rows)
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    server = "uvicorn " + " ".join(stack.server_flags) + (
        "" if "--loop" in stack.server_flags else " (asyncio loop, h11: uvloop/httptools not installed)")
    extra = ", ".join(f"{k}={v}" for k, v in stack.extra_env.items())
    method = [
        f"- Plan `{plan.name}`: for each mode and concurrency, {plan.rounds} round(s) of direct then gateway "
        f"(A B A B …); each run is a warm-up of {plan.warmup_seconds:g} s (discarded) then up to "
        f"{plan.counts[1]}/{plan.counts[16]}/{plan.counts[64]} requests (c=1/16/64) or {plan.seconds:g} s, whichever "
        f"comes first. Figures are the median over rounds of each run's p50, p99 and req/s; added = gateway − direct.",
        f"- Client: `{args.client}` ({'asyncio + raw HTTP/1.1 keep-alive sockets' if args.client == 'raw' else 'httpx.AsyncClient'}), "
        f"one keep-alive connection per concurrent worker, closed loop, in the benchmark process; the same client for "
        f"both targets. Latency is to the last byte of the reply; TTFT is to the first chunk carrying text.",
        f"- Request: `POST /v1/chat/completions`, one short user message; the upstream answers a fixed 20-word reply "
        f"(`tokens_per_second` 0, no added latency), streamed as 22 SSE chunks or as one JSON body.",
        f"- Gateway: one process, `{server}`, PostgreSQL database `{stack.db_name}` (fresh, migrated), Redis "
        f"`{REDIS_URL}`. API key auth, request ceilings ON (RATE_LIMIT_V1/GENERAL/CHAT={HUGE}: counted in Redis, "
        f"never reached), token quotas ON (group ceilings {TOKEN_CEILING:.0e} tokens per day/week/month: checked before "
        f"and counted after each call), a usage record written per call. Effective settings: "
        f"{stack.settings_line}" + (f"; extra environment: {extra}" if extra else "") + ".",
        f"- Usage records written during the run: {usage_written} for {gateway_requests} gateway requests "
        f"(warm-ups included)" + ("." if usage_written == gateway_requests else " — **they differ**."),
        *backend_lines(per_request, costs),
    ]
    body = [
        f"# Gateway latency — {plan.name} run",
        "",
        f"- Date: {now}; wall time {duration:.0f} s",
        f"- Machine: {os.cpu_count()} CPUs (`nproc` {os.cpu_count()}), {cpu_model()}; load generator, upstream, "
        f"gateway, PostgreSQL and Redis share it",
        f"- Versions: {versions()}",
        f"- Commit: {git_commit()}",
        "",
        "## Added latency and throughput (ms; streams: time to the full reply)",
        "",
        main_table(rows),
        "",
        "## Streams: time to first token (ms)",
        "",
        ttft_table(rows),
        "",
        "## CPU time per request (ms, by process)",
        "",
        cpu_table(rows),
        "",
        "## Method",
        "",
        *method,
        "",
        f"Errors: {errors}." + ("" if not errors else " **Some requests failed; see the details.**"),
        "",
        "## Every run",
        "",
        detail_table(cells),
        "",
    ]
    if gateway_log.strip():
        body += ["## Gateway log (tail)", "", "```", gateway_log.strip(), "```", ""]
    text = "\n".join(body)
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / (("quick" if plan.name == "quick" else "latest") + suffix(args) + ".md")
    out.write_text(text)
    (out.with_suffix(".json")).write_text(json.dumps({"rows": rows, "cells": cells, "costs": costs,
                                                      "per_request": per_request}, indent=1, default=str))
    print()
    print(main_table(rows))
    print()
    print(ttft_table(rows))
    print()
    print(cpu_table(rows))
    print()
    for line in method[-3:]:
        print(line)
    print(f"\nbench: wrote {out.relative_to(ROOT)}")


# ---------------------------------------------------------------------------------------------
# Profile


def read_collapsed(path: Path, strip_thread: bool = True) -> list[tuple[list[str], int]]:
    """py-spy raw output, `frame;frame;…;leaf count` per line -> [(frames, count)]. With --threads the
    first frame names the thread (`thread (tid): name`): kept as `MainThread` or `worker`."""
    out = []
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        if frames[0].startswith("thread ("):
            name = frames[0].split(": ", 1)[-1]
            frames = frames[1:] if strip_thread else ["MainThread" if name == "MainThread" else "worker", *frames[1:]]
        out.append((frames, int(count)))
    return out


AREAS = [  # (area, substrings of a frame's file): a sample goes to the innermost frame that names an area
    ("PostgreSQL client (psycopg)", ("psycopg",)),
    ("Redis client (redis-py)", ("redis/",)),
    ("upstream HTTP client (httpx/httpcore)", ("httpx/", "httpcore/")),
    ("JSON", ("json/",)),
    ("Django ORM", ("django/db/",)),
    ("Django request/response handling", ("django/",)),
    ("asgiref sync_to_async, thread pools", ("asgiref/", "concurrent/futures", "threading.py", "queue.py")),
    ("uvicorn / h11 (server side and client side)", ("uvicorn/", "h11/")),
    ("gateway code (gateway/, accounts/, compat/)", ("gateway/", "accounts/", "compat/")),
    ("asyncio event loop", ("asyncio/", "selectors.py")),
]


def area_of(frames: list[str]) -> str:
    for frame in reversed(frames):
        for area, needles in AREAS:
            if any(n in frame for n in needles):
                return area
    return "other"


def _short(frame: str) -> str:
    return frame.split(" (", 1)[0]


def top_tables(samples, total: int, per_request: float, title: str, top: int = 30) -> list[str]:
    """Top-N by cumulative share and by self share; ms/req = samples / rate / requests."""
    inclusive, own = Counter(), Counter()
    for frames, n in samples:
        for frame in set(frames):
            if not any(e in frame for e in ENTRY_FRAMES):
                inclusive[frame] += n
        own[frames[-1]] += n
    lines = [f"Top {top} by cumulative share ({title}; process and thread entry frames left out):", f"{'cum%':>6} {'ms/req':>7} {'self%':>6}  function (file:line)"]
    for frame, n in inclusive.most_common(top):
        lines.append(f"{100 * n / total:6.1f} {n * per_request:7.2f} {100 * own.get(frame, 0) / total:6.1f}  {frame}")
    lines += ["", f"Top 20 by self share ({title}):", f"{'self%':>6} {'ms/req':>7}  function (file:line)"]
    for frame, n in own.most_common(20):
        lines.append(f"{100 * n / total:6.1f} {n * per_request:7.2f}  {frame}")
    return lines


# Stages of a gateway request. A sample goes to the stage of its innermost frame that names one
# (so a new PostgreSQL connection opened inside the API-key lookup counts as "PostgreSQL connect").
STAGES = [
    ("PostgreSQL: open a connection", ("BaseDatabaseWrapper.connect",)),
    ("PostgreSQL: close or return the connection", ("BaseDatabaseWrapper.close", "close_old_connections")),
    ("counters: Redis Lua step (ceilings; from 9d2c412 also credential versions and quota read)",
     ("limit_hit", "window_hit", "_redis_hit", "limit_counters", "limit_headers")),
    ("token quota check (quota_check, quota_window_keys)", ("quota_check", "quota_window_keys")),
    ("metering: quota counters, Redis Lua add-if-present (quota_add)", ("quota_add",)),
    ("metering: usage record spooled and drained (meter, usage writer)",
     ("meter", "UsageWriter._run", "UsageWriter._cycle", "insert", "_insert_lines", "UsageWriter.submit",
      "Spool.append")),
    ("auth: credential lookup (api_key_account; from 9d2c412 a process cache)",
     ("api_key_account", "authenticate", "identify", "remember", "endpoint.<locals>._admit_caller",
      "endpoint.<locals>._check_and_count")),
    ("request body, model registry and chain (prepare, call_plan)",
     ("chat_call.<locals>.prepare", "plan_chain", "registry", "call_plan", "read_json_object", "check_chat_size",
      "chat_form")),
    ("upstream call: httpx request + SSE parsing (chat_stream)", ("chat_stream", "server_events", "open_reply",
                                                                  "_chain_first", "sse_read")),
    ("reply: accumulate, build and encode (Call, ReplyAccumulator, JsonResponse)",
     ("Call.chunks", "Call.collect", "ReplyAccumulator.feed", "ReplyAccumulator.completion", "Call.json_response",
      "Call._metered", "Call.usage", "usage_of", "_frames", "Call._metered_frames", "Call.stream_response",
      "JsonResponse.__init__", "chat_completions", "Call.__init__", "Call.open", "sse_data", "Call.meter_now")),
    ("Django ASGI handler, signals, middleware", ("ASGIHandler.handle", "ASGIHandler.send_response",
                                                  "ASGIHandler.read_body", "ASGIHandler.create_request",
                                                  "BaseHandler.get_response_async", "Signal.asend",
                                                  "RequestIdMiddleware.__acall__", "SurfaceMiddleware.__acall__",
                                                  "ASGIHandler.__call__", "ASGIHandler.run_get_response",
                                                  "endpoint.<locals>.decorate.<locals>.async_wrapper")),
    ("sync_to_async hops: thread hand-off, executor threads", ("SyncToAsync.__call__",
                                                               "SyncToAsync.thread_handler",
                                                               "ThreadSensitiveContext.__aenter__",
                                                               "ThreadSensitiveContext.__aexit__",
                                                               "_WorkItem.run", "_worker")),
]
_STAGE_OF = {name: stage for stage, names in STAGES for name in names}
FALLBACK_STAGES = [
    ("upstream call: httpx request + SSE parsing (chat_stream)", ("httpx/", "httpcore/", "anyio/", "sniffio/")),
    ("sync_to_async hops: thread hand-off, executor threads", ("asgiref/", "threading.py", "concurrent/futures")),
    ("uvicorn / h11 HTTP server", ("uvicorn/", "h11/")),
    ("asyncio event loop", ("asyncio/", "selectors")),
]
# Frames every sample of a thread has (process and thread entry): left out of the top-N lists.
ENTRY_FRAMES = ("<frozen runpy>", "click/core.py", "uvicorn/main.py", "uvicorn/__main__.py", "uvicorn/_compat.py",
                "Server.run (uvicorn/server.py", "asyncio/runners.py", "BaseEventLoop.run_until_complete",
                "BaseEventLoop.run_forever", "Thread._bootstrap", "Thread.run (threading.py", "_worker (concurrent")


def stage_of(frames: list[str]) -> str:
    for frame in reversed(frames):
        stage = _STAGE_OF.get(_short(frame))
        if stage:
            return stage
    for frame in reversed(frames):
        for stage, needles in FALLBACK_STAGES:
            if any(n in frame for n in needles):
                return stage
    return "other"


def stage_lines(samples, total: int, per_request: float) -> list[str]:
    stages = Counter()
    for frames, n in samples:
        stages[stage_of(frames)] += n
    return [f"{100 * n / total:6.1f} {n * per_request:7.2f}  {stage}" for stage, n in stages.most_common()]


def hop_target(frames: list[str]) -> str:
    """The sync function a sync_to_async work item runs: the first frame below asgiref's own."""
    last = max((i for i, f in enumerate(frames) if "asgiref/" in f), default=None)
    if last is None or last + 1 >= len(frames):
        return "(asgiref / executor plumbing)"
    return _short(frames[last + 1])


def cpu_report(raw: Path, requests: int, rate: int) -> list[str]:
    samples = read_collapsed(raw)
    total = sum(n for _, n in samples)
    if not total:
        return ["No samples."]
    per_request = 1000 / rate / max(requests, 1)  # ms of one sample, shared over the requests
    lines = [f"{total} samples holding the GIL ({total * per_request:.2f} ms of Python CPU per request).", "",
             "CPU by stage of the request (innermost stage on the stack):", f"{'%':>6} {'ms/req':>7}  stage"]
    lines += stage_lines(samples, total, per_request)
    lines.append("")
    lines += top_tables(samples, total, per_request, "CPU")
    areas = Counter()
    hops = Counter()
    for frames, n in samples:
        areas[area_of(frames)] += n
        if any(_short(f) == "_WorkItem.run" for f in frames):
            hops[hop_target(frames)] += n
    lines += ["", "CPU by library (innermost frame that names one):"]
    for area, n in areas.most_common():
        lines.append(f"{100 * n / total:6.1f} {n * per_request:7.2f}  {area}")
    lines += ["", "CPU of worker threads (sync_to_async, run_in_executor), by the sync function run:"]
    for hop, n in hops.most_common(12):
        lines.append(f"{100 * n / total:6.1f} {n * per_request:7.2f}  {hop}")
    return lines


def wall_report(raw: Path, requests: int, rate: int, p50: float) -> list[str]:
    """With --idle --threads: every thread sampled all the time. Busy = running a ready asyncio
    callback (Handle._run) on the event loop thread, or a sync_to_async work item on a worker thread."""
    samples = read_collapsed(raw, strip_thread=False)
    per_request = 1000 / rate / max(requests, 1)
    loop_busy = [(f[1:], n) for f, n in samples if f[0] == "MainThread" and any(_short(x) == "Handle._run" for x in f)]
    work = [(f[1:], n) for f, n in samples if f[0] == "worker" and any(_short(x) == "_WorkItem.run" for x in f)]
    loop_total = sum(n for _, n in loop_busy)
    work_total = sum(n for _, n in work)
    lines = [
        f"Per request (p50 {p50:.2f} ms under this profiler, which slows the process down): event loop thread busy "
        f"{loop_total * per_request:.2f} ms; sync_to_async work items {work_total * per_request:.2f} ms of wall "
        f"time, waits on PostgreSQL and Redis included (the event loop waits for them meanwhile).",
        "",
        "sync_to_async work items by the sync function run (wall ms per request):",
    ]
    hops = Counter()
    for frames, n in work:
        hops[hop_target(frames)] += n
    for hop, n in hops.most_common(12):
        lines.append(f"{n * per_request:7.2f}  {hop}")
    if work_total:
        lines += ["", "sync_to_async work items by stage (wall ms per request):", f"{'%':>6} {'ms/req':>7}  stage"]
        lines += stage_lines(work, work_total, per_request)
        lines += [""] + top_tables(work, work_total, per_request, "wall time of sync_to_async work items", top=30)
    if loop_total:
        lines += ["", "Event loop thread, busy samples by stage (wall ms per request):", f"{'%':>6} {'ms/req':>7}  stage"]
        lines += stage_lines(loop_busy, loop_total, per_request)
    return lines


def run_profile(args, stack: Stack) -> None:
    seconds = 6.0 if args.quick else 20.0
    rate = 250
    pyspy = find_pyspy()
    if pyspy is None:
        return run_cprofile(args, stack, seconds)
    proc = stack.start_gateway()
    pid = proc.popen.pid
    # Warm up, so the profile shows the steady state rather than first-request imports and caches.
    stream = args.profile_stream
    mode = "stream" if stream else "non-stream"
    asyncio.run(measure(args.client, stack.gateway, "bench/echo-1", stack.api_key, stream, 1, 500, 2.0, 0.5))
    sections = []
    for view, flags in (("cpu", ["--gil", "--nonblocking"]), ("wall", ["--idle", "--threads", "--nonblocking"])):
        raw = stack.tmp / f"pyspy-{view}.txt"
        log = open(stack.tmp / f"pyspy-{view}.log", "wb")  # noqa: SIM115 - closed below
        rec = subprocess.Popen([pyspy, "record", "--pid", str(pid), "--duration", str(int(seconds + 1)),
                                "--rate", str(rate), "--format", "raw", "--function", *flags, "--output", str(raw)],
                               stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                               preexec_fn=_die_with_parent)
        try:
            time.sleep(0.5)  # py-spy attaches
            cpu0 = proc_cpu_seconds(pid)
            run = asyncio.run(measure(args.client, stack.gateway, "bench/echo-1", stack.api_key, stream, 1, 100_000,
                                      seconds, 0.1))
            cpu = proc_cpu_seconds(pid) - cpu0
            rec.wait(timeout=seconds + 60)
        finally:
            if rec.poll() is None:
                rec.send_signal(signal.SIGINT)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    rec.wait(timeout=15)
                if rec.poll() is None:
                    rec.kill()
            log.close()
        if not raw.exists():
            raise RuntimeError(f"py-spy wrote nothing: {(stack.tmp / f'pyspy-{view}.log').read_text()[-2000:]}")
        s = summarize(run)
        requests = s["n"] + run.errors + run.warmup_requests
        print(f"bench: {view} profile: {requests} requests, p50 {s['p50']:.2f} ms, errors {s['errors']}", flush=True)
        head = [
            f"== {'CPU' if view == 'cpu' else 'Wall clock'} view: py-spy record --rate {rate} --function "
            f"{' '.join(flags)} ==",
            f"c=1 {mode}, {requests} requests in {run.elapsed:.1f} s; p50 under the profiler {s['p50']:.2f} ms; "
            f"gateway process CPU (from /proc) {cpu / max(requests, 1) * 1000:.2f} ms per request.",
        ]
        body = cpu_report(raw, requests, rate) if view == "cpu" else wall_report(raw, requests, rate, s["p50"])
        sections.append("\n".join(head + body))
        RESULTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(raw, RESULTS / f"profile{suffix(args)}-{view}.collapsed")
    text = (f"# Gateway profile, {datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC}, commit {git_commit()}, "
            f"{cpu_model()} x{os.cpu_count()}\n"
            "# Shares are of the view's samples; ms/req = samples / rate / requests. 'cum' counts samples whose\n"
            f"# stack contains the function, 'self' samples in it. Raw stacks: profile{suffix(args)}-cpu.collapsed,\n"
            f"# profile{suffix(args)}-wall.collapsed (flamegraph.pl or speedscope read them).\n"
            + (f"# Extra gateway environment: {', '.join(f'{k}={v}' for k, v in stack.extra_env.items())}\n"
               if stack.extra_env else "") + "\n"
            + "\n\n".join(sections) + "\n")
    out = RESULTS / f"profile{suffix(args)}.txt"
    out.write_text(text)
    print(text)
    print(f"bench: wrote {out.relative_to(ROOT)}")


CPROFILE_RUNNER = """
import cProfile, pstats, signal, sys, uvicorn
profiler = cProfile.Profile()
def stop(*_):
    profiler.disable()
    pstats.Stats(profiler).sort_stats("cumulative").dump_stats(sys.argv[1])
    raise SystemExit(0)
signal.signal(signal.SIGTERM, stop)
profiler.enable()
uvicorn.run("gateway.asgi:application", host="127.0.0.1", port=int(sys.argv[2]), log_level="warning",
            access_log=False)
"""


def run_cprofile(args, stack: Stack, seconds: float) -> None:
    """Fallback when py-spy cannot be had: cProfile around uvicorn in the child (event loop thread only)."""
    stats_path = stack.tmp / "gateway.pstats"
    runner = stack.tmp / "cprofile_runner.py"
    runner.write_text(CPROFILE_RUNNER)
    port = free_port()
    proc = Proc("gateway-cprofile", [PY, str(runner), str(stats_path), str(port)], stack.gateway_env, stack.tmp)
    stack.procs.append(proc)
    stack.gateway = f"http://127.0.0.1:{port}"
    wait_http(stack.gateway + "/v1/models", proc, timeout=60, headers={"Authorization": f"Bearer {stack.api_key}"})
    run = asyncio.run(measure(args.client, stack.gateway, "bench/echo-1", stack.api_key, False, 1, 100_000,
                              seconds, 1.0))
    proc.stop(timeout=30)
    import io
    import pstats

    buf = io.StringIO()
    pstats.Stats(str(stats_path), stream=buf).sort_stats("cumulative").print_stats(30)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"profile{suffix(args)}.txt").write_text(f"cProfile (event-loop thread only), {len(run.latencies)} requests\n"
                                         + buf.getvalue())
    print(buf.getvalue())


def suffix(args) -> str:
    """Output names: latest.md / quick.md / profile.txt, plus -<client> and -<tag> when given."""
    return ((f"-{args.client}" if args.client != "raw" else "") + ("-stream" if args.profile and args.profile_stream else "")
            + (f"-{args.tag}" if args.tag else ""))


# ---------------------------------------------------------------------------------------------


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a small run (under a minute) as a sanity check")
    p.add_argument("--profile", action="store_true", help="profile the gateway (c=1 non-stream) with py-spy")
    p.add_argument("--stream", dest="profile_stream", action="store_true",
                   help="with --profile: profile streamed replies instead of non-streamed ones")
    p.add_argument("--client", choices=sorted(CLIENTS), default="raw", help="load generator client (default raw)")
    p.add_argument("--rounds", type=int, help="override the plan's rounds")
    p.add_argument("--commit", metavar="REV",
                   help="test this commit (exported with git archive) instead of the working tree, e.g. HEAD")
    p.add_argument("--tag", help="suffix for the result files (e.g. a what-if run: latest-<tag>.md)")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="extra environment for the gateway process (e.g. DB_CONN_MAX_AGE=60); repeatable")
    args = p.parse_args()
    extra_env = dict(item.split("=", 1) for item in args.env)

    def on_term(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C, even if started with SIGINT ignored
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)
    git_commit(args.commit)  # the code the run starts with
    global APP_ROOT
    stack = Stack(extra_env)
    try:
        if args.commit:
            APP_ROOT = export_commit(args.commit, stack.tmp)
            print(f"bench: testing commit {git_commit()} from {APP_ROOT}", flush=True)
            stack.refresh_server_flags()
        stack.setup_database()
        stack.start_upstream()
        stack.configure()
        if args.profile:
            run_profile(args, stack)
        else:
            run_benchmark(args, stack)
        return 0
    except KeyboardInterrupt:
        print("\nbench: interrupted; cleaning up", file=sys.stderr, flush=True)
        return 130
    except Exception:
        for proc in stack.procs:
            tail = proc.log_tail(4000).strip()
            if tail:
                print(f"--- {proc.name} log (tail) ---\n{tail}", file=sys.stderr, flush=True)
        raise
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # let the clean-up finish
        stack.close()


if __name__ == "__main__":
    sys.exit(main())
