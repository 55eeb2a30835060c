"""Real server processes on loopback for tests that need them. Each stops itself."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from django.db import connection

ROOT = Path(__file__).resolve().parent.parent
USAGE_FLUSH_SECONDS_IN_TESTS = 0.02


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_database_url() -> str:
    """The URL of the database the test run created, for a child process to share."""
    s = connection.settings_dict
    if s["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{s['NAME']}"
    user = s.get("USER") or "postgres"
    password = f":{s['PASSWORD']}" if s.get("PASSWORD") else ""
    return f"postgres://{user}{password}@{s.get('HOST') or '127.0.0.1'}:{s.get('PORT') or 5432}/{s['NAME']}"


def child_env(**extra_env: str) -> dict[str, str]:
    """The environment of a child process that shares this test run's database."""
    from django.conf import settings

    return {
        **os.environ,
        "DATABASE_URL": test_database_url(),
        "DJANGO_SETTINGS_MODULE": "gateway.settings",
        "PASSWORD_HASHERS": ",".join(settings.PASSWORD_HASHERS),  # the test run's fast hasher
        "USAGE_FLUSH_SECONDS": str(USAGE_FLUSH_SECONDS_IN_TESTS),
        **extra_env,
    }


@contextlib.contextmanager
def server_process(args: list[str], *, name: str, ready: Callable[[Path], bool], env: dict[str, str],
                   timeout: float = 30):
    """Start `args` in the project folder, its output in VAR_DIR/test-<name>.log; wait until
    `ready(log_path)` is true; yield the process; stop it at the end unless it already ended
    (a test may kill it)."""
    from django.conf import settings

    log_path = Path(settings.VAR_DIR) / f"test-{name}.log"
    log = open(log_path, "wb")  # noqa: SIM115 — closed in the finally below
    proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout
        while not ready(log_path):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{name} did not start:\n{log_path.read_text(errors='replace')}")
            time.sleep(0.1)
        yield proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()


def answers_on(port: int) -> Callable[[Path], bool]:
    def ready(_log: Path) -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return False

    return ready


@contextlib.contextmanager
def web_process(**extra_env: str):
    """Run the gateway under uvicorn on a free loopback port; yield its base URL."""
    port = free_port()
    args = [sys.executable, "-m", "uvicorn", "gateway.asgi:application", "--host", "127.0.0.1", "--port", str(port),
            "--log-level", "warning"]
    with server_process(args, name=f"web-{port}", ready=answers_on(port), env=child_env(**extra_env)):
        yield f"http://127.0.0.1:{port}"


def wait_for_quiet_database(timeout: float = 5.0) -> None:
    """Wait until no other session works in the test database, so a transactional test's
    teardown (TRUNCATE) does not meet a server process's late usage INSERT (a deadlock on
    PostgreSQL). Server processes started here flush usage every USAGE_FLUSH_SECONDS_IN_TESTS."""
    time.sleep(USAGE_FLUSH_SECONDS_IN_TESTS * 3)
    if connection.vendor != "postgresql":
        return
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND state IN ('active', 'idle in transaction')"
            )
            if cursor.fetchone()[0] == 0:
                return
            time.sleep(0.02)


def wait_for_usage(account, count: int = 1, timeout: float = 5.0) -> list:
    """The account's usage records, oldest first, once at least `count` are written (server
    processes spool them after the reply and write them every USAGE_FLUSH_SECONDS_IN_TESTS)."""
    from gateway.models import UsageRecord

    deadline = time.monotonic() + timeout
    while len(records := list(UsageRecord.objects.filter(account=account).order_by("id"))) < count:
        assert time.monotonic() < deadline, f"{len(records)} usage records written, expected {count}"
        time.sleep(0.02)
    return records


@contextlib.contextmanager
def serving(app, *, cert: Path | None = None, key: Path | None = None, name: str = "asgi"):
    """An ASGI app under uvicorn on a free loopback port, in a daemon thread of this process (over TLS
    with `cert` and `key`); yields its base URL, http(s)://127.0.0.1:PORT."""
    import threading

    import uvicorn

    port = free_port()
    tls = {"ssl_certfile": str(cert), "ssl_keyfile": str(key)} if cert else {}
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off",
                                           log_config=None, access_log=False, **tls))
    thread = threading.Thread(target=server.run, name=f"{name}-{port}", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.005)
        assert server.started, f"{name} did not start"
        yield f"{'https' if cert else 'http'}://127.0.0.1:{port}"
    finally:
        server.should_exit = server.force_exit = True
        thread.join(5)
