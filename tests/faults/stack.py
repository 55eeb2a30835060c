"""A private stack for the fault tests: its own PostgreSQL cluster (initdb) and Redis on free
loopback ports, the Procfile's `web` (gunicorn, 2 uvicorn workers), `worker` and `beat`, and the
reference upstream. Nothing here touches the shared PostgreSQL (5432) or Redis (6379).

Every process runs in a session of its own (`start_new_session=True`) and is stopped through its
own process group, never by name. Logs go to `<stack dir>/logs/<name>.log`; `Stack.tail()` shows
them when a test fails."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
BIN = Path(PYTHON).parent
# Variables of the caller's environment that could point a child at the shared services.
SERVICE_VARS = ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "EMAIL_URL", "GATEWAY_VAR_DIR",
                "PGHOST", "PGPORT", "PGDATABASE", "PGUSER", "PGPASSWORD", "DJANGO_SETTINGS_MODULE")
WEB_WORKERS = 2
HEAVY = 100_000  # request ceilings out of the way of the load


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(condition: Callable[[], object], timeout: float, what: str, interval: float = 0.1):
    """The first true value of `condition()` within `timeout` seconds; AssertionError naming
    `what` otherwise. Exceptions of `condition` count as false until the deadline."""
    deadline = time.monotonic() + timeout
    last_exc = None
    while True:
        try:
            value = condition()
            if value:
                return value
        except Exception as exc:  # noqa: BLE001 — a service coming up answers with errors first
            last_exc = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}"
                                 + (f" (last error: {last_exc!r})" if last_exc else ""))
        time.sleep(interval)


def port_open(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


def child_pids(pid: int) -> list[int]:
    """Direct children of `pid`, from /proc."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces and parentheses
        fields = stat[stat.rfind(")") + 2:].split()
        if int(fields[1]) == pid:
            found.append(int(entry))
    return sorted(found)


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except OSError:
        return False


class Service:
    """One process (and what it forks) in a session of its own."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], logs: Path,
                 ready: Callable[[], bool] | None = None, cwd: Path = ROOT):
        self.name, self.args, self.env, self.cwd = name, args, env, cwd
        self.log_path = logs / f"{name}.log"
        self.ready = ready
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 60) -> Service:
        assert not self.alive(), f"{self.name} is already running"
        self.starts += 1
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== start #{self.starts} at {time.strftime('%H:%M:%S')} =====\n".encode())
            log.flush()
            self.proc = subprocess.Popen(self.args, cwd=self.cwd, env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        if self.ready is not None:
            deadline = time.monotonic() + timeout
            while not self.ready():
                if self.proc.poll() is not None:
                    raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{self.tail()}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.name} was not ready after {timeout}s:\n{self.tail()}")
                time.sleep(0.1)
        return self

    def signal_group(self, sig: int) -> None:
        """`sig` to the process group of this service (its session leader's pid)."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    def kill(self) -> None:
        """SIGKILL to the whole group (the process and its children, as a crash or an OOM kill
        of the container would), then reap it."""
        self.signal_group(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(timeout=10)

    def stop(self, timeout: float = 15) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.signal_group(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        self.signal_group(signal.SIGKILL)  # stragglers of the group, even when the leader ended
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)

    def tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return "\n".join(text[-lines:])

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""


class PrivateRedis(Service):
    def __init__(self, base: Path, logs: Path):
        self.port = free_port()
        super().__init__("redis", ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                   "--appendonly", "no", "--dir", str(base)],
                         env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, logs=logs, ready=self._pong)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _pong(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def client(self):
        import redis

        return redis.Redis.from_url(self.url, socket_connect_timeout=2, socket_timeout=5)

    def stop_now(self) -> None:
        """Redis gone at once, with no persistence: what it held is lost (SIGKILL)."""
        self.kill()


class PrivatePostgres:
    """A cluster of its own made with initdb, run as the `postgres` OS user (we may be root)."""

    def __init__(self, base: Path, logs: Path):
        self.port = free_port()
        self.base = base / "pg"
        self.data = self.base / "data"
        self.sock = self.base / "sock"
        self.log_path = logs / "postgres.log"
        self.dbname = "gateway"
        self.base.mkdir(parents=True)
        self.sock.mkdir()
        self._as_root = os.geteuid() == 0
        if self._as_root:
            shutil.chown(base, "postgres")
            for path in (self.base, self.sock):
                shutil.chown(path, "postgres", "postgres")
            log = open(self.log_path, "ab")  # noqa: SIM115
            log.close()
            shutil.chown(self.log_path, "postgres")

    def _run(self, args: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
        prefix = ["runuser", "-u", "postgres", "--"] if self._as_root else []
        return subprocess.run(prefix + args, cwd=self.base, capture_output=True, text=True, timeout=timeout,
                              start_new_session=True, check=False)

    def init(self) -> None:
        done = self._run(["initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync",
                          "-E", "UTF8", "--locale=C"], timeout=120)
        assert done.returncode == 0, f"initdb failed:\n{done.stdout}\n{done.stderr}"

    def start(self) -> None:
        options = (f"-p {self.port} -k {self.sock} -c listen_addresses=127.0.0.1 -c fsync=off "
                   f"-c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
        done = self._run(["pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.log_path), "-w", "-t", "60",
                          "start"], timeout=90)
        assert done.returncode == 0, f"pg_ctl start failed:\n{done.stdout}\n{done.stderr}\n{self.tail()}"

    def stop(self, mode: str = "fast") -> None:
        done = self._run(["pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop"], timeout=90)
        if done.returncode != 0 and self.postmaster_pid() is not None:
            raise AssertionError(f"pg_ctl stop failed:\n{done.stdout}\n{done.stderr}")

    def postmaster_pid(self) -> int | None:
        try:
            pid = int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        return pid if pid_alive(pid) else None

    def kill(self) -> None:
        """Last resort at teardown: SIGKILL the postmaster of this cluster (and its group)."""
        pid = self.postmaster_pid()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(os.getpgid(pid), signal.SIGKILL)

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{self.dbname}"

    def connect(self, dbname: str | None = None):
        import psycopg

        return psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", dbname=dbname or self.dbname,
                               autocommit=True, connect_timeout=5)

    def create_database(self) -> None:
        with self.connect("postgres") as conn:
            conn.execute(f'CREATE DATABASE "{self.dbname}"')

    def query(self, sql: str, params: tuple | list = ()) -> list[tuple]:
        with self.connect() as conn:
            return conn.execute(sql, params).fetchall()

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


class Stack:
    """The whole stack. `start()` brings it up; `close()` stops every process it started."""

    def __init__(self, **extra_env: str):
        self.base = Path(tempfile.mkdtemp(prefix="gw-faults-"))
        self.logs = self.base / "logs"
        self.logs.mkdir()
        self.var = self.base / "var"
        self.var.mkdir()
        self.redis = PrivateRedis(self.base, self.logs)
        self.pg = PrivatePostgres(self.base, self.logs)
        self.web_port = free_port()
        self.upstream_port = free_port()
        self.extra_env = extra_env
        self.env = self._env()
        self.upstream = Service("upstream", [PYTHON, "-m", "tests.upstream", "--port", str(self.upstream_port),
                                             "--latency-ms", "60"],
                                env=self.env, logs=self.logs, ready=lambda: port_open(self.upstream_port))
        self.web = Service("web", [str(BIN / "gunicorn"), "gateway.asgi:application", "-k",
                                   "uvicorn_worker.UvicornWorker", "--bind", f"127.0.0.1:{self.web_port}",
                                   "--workers", str(WEB_WORKERS), "--access-logfile", "-",
                                   "--forwarded-allow-ips", "", "--graceful-timeout", "5"],
                           env=self.env, logs=self.logs, ready=self._web_ready)
        self.worker = Service("worker", [str(BIN / "celery"), "-A", "gateway", "worker", "--loglevel", "INFO"],
                              env=self.env, logs=self.logs, ready=lambda: "ready." in self.worker.log_text()
                              .rsplit("===== start", 1)[-1])
        self.beat = Service("beat", [str(BIN / "celery"), "-A", "gateway", "beat", "--loglevel", "INFO"],
                            env=self.env, logs=self.logs)
        self.services = [self.upstream, self.web, self.worker, self.beat]

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in SERVICE_VARS and not k.startswith("PYTEST")}
        env.update({
            "DJANGO_SETTINGS_MODULE": "gateway.settings",
            "DATABASE_URL": self.pg.url,
            "REDIS_URL": self.redis.url,
            "CELERY_BROKER_URL": self.redis.url,
            "GATEWAY_VAR_DIR": str(self.var),
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",
            "SECRET_KEY": "faults-" + "x" * 50,  # 50 characters at least, or the settings refuse to start
            "LOG_LEVEL": "INFO",
            "PASSWORD_HASHERS": "django.contrib.auth.hashers.MD5PasswordHasher",
            # short enough for a test to see runs swept and deliveries retried
            "ROUTINE_SWEEP_SECONDS": "2",
            "ROUTINE_RUN_TIMEOUT_SECONDS": "30",
            # longer than the 5 s outages, short enough that a delivery lost with its task is
            # taken up again by the sweep within the settle time (its lease derives from these)
            "ROUTINE_WRITE_RETRY_SECONDS": "10",
            "DELIVERY_RETRY_ATTEMPTS": "3",
            "DELIVERY_RETRY_BACKOFF_SECONDS": "0.2",
            "DELIVERY_RETRY_BACKOFF_MAX_SECONDS": "2",
            "DELIVERY_TIMEOUT_SECONDS": "1",
            # a change must be seen at once, not when this runs out (rule 8)
            "REGISTRY_TTL_SECONDS": "30",
            "CREDENTIAL_CACHE_SECONDS": "30",
            "WEBHOOK_EVENTS_PER_MINUTE": str(HEAVY),
            **{f"RATE_LIMIT_{name}": str(HEAVY) for name in ("V1", "CHAT", "GENERAL", "HOOKS", "VERSION")},
            **self.extra_env,
        })
        return env

    def _web_ready(self) -> bool:
        import httpx

        try:
            # any answer of the app (401 without a key) means a worker is serving
            return httpx.get(f"{self.url}/v1/models", timeout=1).status_code < 500
        except httpx.HTTPError:
            return False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"

    @property
    def upstream_url(self) -> str:
        return f"http://127.0.0.1:{self.upstream_port}"

    # --- bring up ---------------------------------------------------------------------------

    def start(self) -> Stack:
        self.redis.start(timeout=20)
        self.pg.init()
        self.pg.start()
        self.pg.create_database()
        self.manage("migrate", "--noinput", timeout=300)
        self.manage("createcachetable", timeout=60)
        self.upstream.start(timeout=30)
        self.seed_base()
        self.web.start(timeout=60)
        self.worker.start(timeout=60)
        self.beat.start()
        wait_for(lambda: len(self.web_workers()) == WEB_WORKERS, 30, "the gunicorn workers")
        return self

    def manage(self, *args: str, timeout: float = 120, stdin: str | None = None) -> str:
        done = subprocess.run([PYTHON, "manage.py", *args], cwd=ROOT, env=self.env, capture_output=True, text=True,
                              timeout=timeout, input=stdin, start_new_session=True, check=False)
        assert done.returncode == 0, f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def seed(self, spec: dict) -> dict:
        """Run tests/faults/seed.py in a process of the stack's environment; its JSON answer."""
        done = subprocess.run([PYTHON, "-m", "tests.faults.seed", json.dumps(spec)], cwd=ROOT, env=self.env,
                              capture_output=True, text=True, timeout=120, start_new_session=True, check=False)
        assert done.returncode == 0, f"seed failed:\n{done.stdout}\n{done.stderr}"
        return json.loads(done.stdout.strip().splitlines()[-1])

    def seed_base(self) -> None:
        self.seed({"op": "base", "upstream": f"{self.upstream_url}/v1"})

    def ensure_running(self) -> None:
        """Before each test: whatever an earlier test left stopped is started again."""
        if not self.redis.alive():
            self.redis.start(timeout=20)
        if self.pg.postmaster_pid() is None:
            self.pg.start()
        for service in self.services:
            if not service.alive():
                service.start(timeout=60)
        wait_for(lambda: len(self.web_workers()) == WEB_WORKERS, 30, "the gunicorn workers")
        wait_for(self._web_ready, 30, "the web answering")

    def web_workers(self) -> list[int]:
        return [pid for pid in child_pids(self.web.pid) if pid_alive(pid)] if self.web.alive() else []

    def worker_main_pid(self) -> int:
        return self.worker.pid

    # --- the upstream ----------------------------------------------------------------------

    def upstream_control(self, **knobs) -> dict:
        import httpx

        return httpx.post(f"{self.upstream_url}/_control", json=knobs, timeout=10).json()

    def upstream_requests(self) -> list[dict]:
        import httpx

        return httpx.get(f"{self.upstream_url}/_control/requests", timeout=30).json()

    # --- tear down ---------------------------------------------------------------------------

    def tail(self, lines: int = 40) -> str:
        parts = [f"----- {s.name} -----\n{s.tail(lines)}" for s in [self.redis, *self.services]]
        parts.append(f"----- postgres -----\n{self.pg.tail(lines // 2)}")
        return "\n".join(parts)

    def close(self) -> None:
        for service in reversed(self.services):
            with contextlib.suppress(Exception):
                service.stop()
        with contextlib.suppress(Exception):
            self.redis.stop()
        with contextlib.suppress(Exception):
            self.pg.stop("immediate")
        with contextlib.suppress(Exception):
            self.pg.kill()
        if not os.environ.get("GATEWAY_FAULTS_KEEP"):
            shutil.rmtree(self.base, ignore_errors=True)


@contextlib.contextmanager
def running_stack(**extra_env: str):
    stack = Stack(**extra_env)
    try:
        stack.start()
        yield stack
    finally:
        stack.close()
