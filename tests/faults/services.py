"""The processes of the fault tests' private stack (tests/faults/stack.py): a service in a session
of its own, stopped through its own process group, never by name; a Redis and a PostgreSQL cluster
(initdb) of its own on free loopback ports; and the small waits and /proc readings around them."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
BIN = Path(PYTHON).parent


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
    def __init__(self, base: Path, logs: Path, *, name: str = "redis", options: tuple[str, ...] = ()):
        self.port = free_port()
        super().__init__(name, ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                                "--appendonly", "no", "--dir", str(base), *options],
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


class PrivatePgBouncer(Service):
    """Debian's PgBouncer (/usr/sbin/pgbouncer) on a free loopback port, in front of a PostgreSQL on
    `pg_port`: every database by a wildcard entry, `pool_mode` (transaction by default) with
    `pool_size` server connections at most per database and user, so that the transactions of
    different clients share them. PgBouncer refuses to run as root: it is then told to switch to
    the `postgres` user (`-u`), and its folder is that user's. Its admin console (database
    `pgbouncer`) takes the user `postgres`. Other settings of pgbouncer.ini as keyword arguments."""

    def __init__(self, base: Path, logs: Path, pg_port: int, pool_size: int = 2, pool_mode: str = "transaction",
                 **settings: object):
        self.port = free_port()
        self.folder = base / "pgbouncer"
        self.folder.mkdir()
        (self.folder / "userlist.txt").write_text('"postgres" ""\n')
        (self.folder / "pgbouncer.ini").write_text(
            f"[databases]\n* = host=127.0.0.1 port={pg_port}\n"
            f"[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            f"auth_type = trust\nauth_file = {self.folder / 'userlist.txt'}\nadmin_users = postgres\n"
            f"pool_mode = {pool_mode}\ndefault_pool_size = {pool_size}\nmax_client_conn = 500\n"
            f"max_db_connections = {pool_size}\n" + "".join(f"{name} = {value}\n" for name, value in settings.items()))
        as_root = ["-u", "postgres"] if os.geteuid() == 0 else []
        if as_root:
            for path in (self.folder, *self.folder.iterdir()):
                shutil.chown(path, "postgres")
        super().__init__("pgbouncer", ["/usr/sbin/pgbouncer", *as_root, str(self.folder / "pgbouncer.ini")],
                         env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, logs=logs,
                         ready=lambda: port_open(self.port))

    def url(self, dbname: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{dbname}"

    def show(self, what: str) -> list[dict]:
        """`SHOW <what>` of the admin console (SERVERS, CLIENTS, POOLS, ...), one dict a row."""
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", dbname="pgbouncer", autocommit=True,
                             connect_timeout=5, cursor_factory=psycopg.ClientCursor) as conn:  # simple queries only
            cursor = conn.execute(f"SHOW {what}")
            names = [column.name for column in cursor.description]
            return [dict(zip(names, row)) for row in cursor.fetchall()]
