"""What every benchmark here shares: child processes and their clean-up, PostgreSQL and Redis,
CPU time from /proc, and the facts a report names (commit, versions, machine).

The benchmarks run as scripts (`python bench/<name>.py`), so bench/ is on sys.path and the
modules import each other by their bare names."""

from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
PY = sys.executable
# The code under test: this working tree, or an export of one commit (--commit); set by the entry points.
APP_ROOT = ROOT

PG_ADMIN_URL = os.environ.get("BENCH_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
PG_URL_TEMPLATE = "postgres://postgres@127.0.0.1:5432/{name}"
HUGE = 100_000_000  # request ceilings per minute: counted, never reached
TOKEN_CEILING = 10**12  # token quotas: checked and counted, never reached


def set_app_root(path: Path) -> None:
    global APP_ROOT
    APP_ROOT = path


# ---------------------------------------------------------------------------------------------
# Processes


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:
    """Children get SIGTERM if this process dies without cleaning up (Linux prctl PR_SET_PDEATHSIG)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)


class Proc:
    """A child in a session (and process group) of its own, stopped by signalling that group."""

    def __init__(self, name: str, argv: list[str], env: dict, log_dir: Path, cwd: Path | None = None):
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.popen = subprocess.Popen(argv, cwd=cwd or APP_ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_die_with_parent)
        self.pgid = self.popen.pid  # start_new_session: the child leads its own group

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, chars: int = 3000) -> str:
        with contextlib.suppress(OSError):
            return self.log_path.read_text(errors="replace")[-chars:]
        return ""

    def _signal_group(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, sig)

    def _group_alive(self) -> bool:
        try:
            os.killpg(self.pgid, 0)
            return True
        except (ProcessLookupError, PermissionError):
            return False

    def stop(self, timeout: float = 10) -> None:
        """SIGTERM to the group (a gunicorn or Celery master and its workers alike), SIGKILL after `timeout`."""
        self._signal_group(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=timeout)
        while self._group_alive() and time.monotonic() < deadline:  # workers may outlive their master briefly
            time.sleep(0.1)
        if self.alive() or self._group_alive():
            self._signal_group(signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
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
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}):\n"
                           f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return done.stdout


def have(module: str, env: dict | None = None) -> bool:
    """Whether the gateway's interpreter (with the gateway's environment) can import `module`."""
    return subprocess.run([PY, "-c", f"import {module}"], capture_output=True, env=env, cwd=APP_ROOT).returncode == 0


# ---------------------------------------------------------------------------------------------
# PostgreSQL and Redis


def pg_admin():
    import psycopg

    return psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=5)


def drop_stale_databases(prefix: str) -> list[str]:
    """Drop <prefix><pid> databases whose benchmark process no longer exists."""
    dropped = []
    with pg_admin() as conn:
        names = [r[0] for r in conn.execute("SELECT datname FROM pg_database WHERE datname LIKE %s",
                                            (prefix.replace("_", r"\_") + "%",))]
        for name in names[:50]:
            pid = name.rsplit("_", 1)[-1]
            if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                dropped.append(name)
    return dropped


_redis: dict = {}


def redis_client(url: str):
    """One connection per Redis URL for the whole benchmark, so its own look-ups open none during runs."""
    if url not in _redis:
        import redis

        _redis[url] = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
    return _redis[url]


def redis_delete(url: str, patterns: tuple[str, ...] = ("gw:*",)) -> int:
    """Delete the keys matching `patterns` in the benchmark's Redis database (only those, only that database)."""
    r = redis_client(url)
    deleted = 0
    for pattern in patterns:
        cursor = 0
        for _ in range(10_000):  # bounded
            cursor, keys = r.scan(cursor=cursor, match=pattern, count=1000)
            if keys:
                deleted += r.delete(*keys)
            if cursor == 0:
                break
    return deleted


_stats_conn = None


def stats_connection():
    """One PostgreSQL session for the statistics, opened before the runs (a new one would fork a backend
    and show up in the PostgreSQL CPU time)."""
    global _stats_conn
    if _stats_conn is None or _stats_conn.closed:
        _stats_conn = pg_admin()
    return _stats_conn


def close_stats_connection() -> None:
    global _stats_conn
    if _stats_conn is not None:
        with contextlib.suppress(Exception):
            _stats_conn.close()
        _stats_conn = None


def backend_snapshot(db_name: str, redis_url: str) -> dict:
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
        r = redis_client(redis_url)
        stats = r.info("commandstats")
        for name, value in stats.items():
            snap["redis_" + name.removeprefix("cmdstat_")] = value["calls"]
        snap["redis_connections"] = r.info("stats")["total_connections_received"]
    return snap


def snapshot_delta(before: dict, after: dict) -> dict:
    return {k: after[k] - before.get(k, 0) for k in after if isinstance(after[k], (int, float))}


def backend_costs(db_url: str, redis_url: str) -> dict:
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
    r = redis_client(redis_url)
    times = []
    for _ in range(200):
        t = time.perf_counter()
        r.ping()
        times.append(time.perf_counter() - t)
    out["redis_rtt_ms"] = statistics.median(times) * 1000
    return out


# ---------------------------------------------------------------------------------------------
# CPU time


def proc_cpu_seconds(pid: int, children: bool = False) -> float:
    """utime + stime of a process (all its threads); with `children`, plus that of its reaped children."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = int(fields[11]) + int(fields[12]) + ((int(fields[13]) + int(fields[14])) if children else 0)
        return ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def children(pid: int) -> list[int]:
    """The live children of `pid`, from /proc/<pid>/task/*/children."""
    out = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                out += [int(x) for x in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
    return out


def descendants(pid: int) -> list[int]:
    """The live descendants of `pid` (gunicorn or Celery workers)."""
    out, todo = [], [pid]
    while todo and len(out) < 1000:  # bounded
        kids = children(todo.pop())
        out += kids
        todo += kids
    return out


def tree_cpu_seconds(pid: int) -> float:
    """CPU of a process, its live descendants and the children it reaped (a process that forks workers)."""
    total = proc_cpu_seconds(pid, children=True)
    for child in descendants(pid):
        cpu = proc_cpu_seconds(child, children=True)
        if cpu == cpu:
            total += cpu
    return total


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


def redis_cpu_seconds(redis_url: str) -> float:
    with contextlib.suppress(Exception):
        info = redis_client(redis_url).info("cpu")
        return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])
    return float("nan")


# ---------------------------------------------------------------------------------------------
# What a report names


def cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def versions(redis_url: str, packages: tuple = ("Django", "uvicorn", "h11", "httptools", "uvloop", "httpx",
                                                  "httpcore", "asgiref", "psycopg", "redis")) -> str:
    from importlib.metadata import PackageNotFoundError, version

    parts = [f"Python {platform.python_version()}"]
    for pkg in packages:
        with contextlib.suppress(PackageNotFoundError):
            parts.append(f"{pkg} {version(pkg)}")
    with contextlib.suppress(Exception):
        with pg_admin() as conn:
            parts.append("PostgreSQL " + conn.execute("SHOW server_version").fetchone()[0].split()[0])
    with contextlib.suppress(Exception):
        parts.append("Redis " + redis_client(redis_url).info("server")["redis_version"])
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
                _commit = commit + (f" (plus uncommitted changes to {len(dirty)} files outside bench/)"
                                    if dirty else "")
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


def install_signal_handlers() -> None:
    """Ctrl-C, SIGTERM and SIGHUP all raise KeyboardInterrupt, so the `finally` clean-up runs."""

    def on_term(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started with SIGINT ignored
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, on_term)
