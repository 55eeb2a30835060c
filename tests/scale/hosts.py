"""The hosts of the multi-host stack, each in its own network namespace (tests/scale/netns.py): a
PostgreSQL host (a cluster of its own made with initdb, tests/faults/services.py), a Redis host, a
model host (the reference upstream), gateway hosts each running the Procfile's `web` (gunicorn,
WEB_CONCURRENCY=1) and `worker` (concurrency 1), the first also `beat`, each with a disk of its
own (GATEWAY_VAR_DIR and USAGE_SPOOL_DIR), and Debian's HAProxy in front of them.

Every process runs under `ip netns exec <its host>` in a session of its own and is stopped by its
own process group (tests/faults/services.py Service), never by name. The test process reads
PostgreSQL and Redis through their Unix sockets (a socket file, no address)."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

from tests.faults.services import BIN, PYTHON, ROOT, PrivatePostgres, Service, pid_alive

HOST_VARS = ("PROMETHEUS_MULTIPROC_DIR", "USAGE_SPOOL_DIR", "HOME", "DATABASE_POOLER", "REDIS_SENTINELS",
             "REDIS_SENTINEL_SERVICE", "REDIS_SENTINEL_PASSWORD")
PROCFILE = dict(line.split(": ", 1) for line in (ROOT / "Procfile").read_text().splitlines() if ": " in line)
WEB_PORT = 8000
LB_PORT = 8080
UPSTREAM_PORT = 9100


def http_ok(url: str, timeout: float = 1.0) -> bool:
    import httpx

    try:
        return httpx.get(url, timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False


class HostPostgres(PrivatePostgres):
    """PostgreSQL listening on its host's address; the test reads it through its Unix socket."""

    def __init__(self, base: Path, logs: Path, prefix: list[str], address: str):
        super().__init__(base, logs)
        self.prefix, self.address, self.port = prefix, address, 5432

    def _run(self, args: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
        user = ["runuser", "-u", "postgres", "--"] if self._as_root else []
        return subprocess.run(self.prefix + user + args, cwd=self.base, capture_output=True, text=True,
                              timeout=timeout, start_new_session=True, check=False)

    def init(self) -> None:
        super().init()
        subnet = self.address.rsplit(".", 1)[0] + ".0/24"
        with open(self.data / "pg_hba.conf", "a") as hba:  # the hosts of the stack, on its own network only
            hba.write(f"host all all {subnet} trust\n")

    def start(self) -> None:
        options = (f"-p {self.port} -k {self.sock} -c listen_addresses={self.address} -c fsync=off "
                   f"-c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
        done = self._run(["pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.log_path), "-w", "-t", "60",
                          "start"], timeout=90)
        assert done.returncode == 0, f"pg_ctl start failed:\n{done.stdout}\n{done.stderr}\n{self.tail()}"

    @property
    def url(self) -> str:
        return f"postgres://postgres@{self.address}:{self.port}/{self.dbname}"

    def connect(self, dbname: str | None = None):
        import psycopg

        return psycopg.connect(host=str(self.sock), port=self.port, user="postgres", dbname=dbname or self.dbname,
                               autocommit=True, connect_timeout=5)


class HostRedis(Service):
    """Redis listening on its host's address (and on a Unix socket for the test's reads)."""

    def __init__(self, base: Path, logs: Path, prefix: list[str], address: str):
        self.address, self.port = address, 6379
        self.socket_path = base / "redis.sock"
        super().__init__("redis", [*prefix, "redis-server", "--port", str(self.port), "--bind", address,
                                   "--unixsocket", str(self.socket_path), "--unixsocketperm", "700", "--save", "",
                                   "--appendonly", "no", "--protected-mode", "no", "--dir", str(base)],
                         env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, logs=logs, ready=self._pong)

    @property
    def url(self) -> str:
        return f"redis://{self.address}:{self.port}/0"

    def client(self):
        import redis

        return redis.Redis(unix_socket_path=str(self.socket_path), socket_connect_timeout=2, socket_timeout=5)

    def _pong(self) -> bool:
        try:
            client = self.client()
            try:
                return bool(client.ping())
            finally:
                client.close()
        except Exception:  # noqa: BLE001 — not up yet
            return False


class GatewayHost:
    """One gateway host: the Procfile's `web` and `worker` (and `beat` when asked), with its own
    GATEWAY_VAR_DIR and USAGE_SPOOL_DIR: the host's disk."""

    def __init__(self, name: str, prefix: list[str], address: str, env: dict[str, str], base: Path, logs: Path,
                 probe, beat: bool = False):
        self.name, self.prefix, self.address = name, prefix, address
        self.disk = base / name
        self.spool_dir = self.disk / "spool"
        self.disk.mkdir()
        self.env = {**env, "GATEWAY_VAR_DIR": str(self.disk), "USAGE_SPOOL_DIR": str(self.spool_dir),
                    "HOME": str(self.disk),  # gunicorn's control socket (~/.gunicorn) is the host's own
                    "PORT": str(WEB_PORT), "WEB_CONCURRENCY": "1"}
        self._probe = probe  # in_netns of the client host, for the readiness check
        self.web = Service(f"{name}-web", self._procfile("web"), self.env, logs, ready=self.web_ready)
        self.worker = Service(f"{name}-worker", self._procfile("worker", "--concurrency", "1"), self.env, logs,
                              ready=lambda: "ready." in self.worker.log_text().rsplit("===== start", 1)[-1])
        self.beat = Service(f"{name}-beat", self._procfile("beat"), self.env, logs) if beat else None

    def _procfile(self, process: str, *extra: str) -> list[str]:
        line = PROCFILE[process] + "".join(f" {shlex.quote(arg)}" for arg in extra)
        return [*self.prefix, "sh", "-c", f"exec {line}"]

    @property
    def url(self) -> str:
        return f"http://{self.address}:{WEB_PORT}"

    @property
    def services(self) -> list[Service]:
        return [s for s in (self.web, self.worker, self.beat) if s is not None]

    def web_ready(self) -> bool:
        return self._probe(http_ok, f"{self.url}/livez")

    def start(self) -> None:
        """Start every process (not waiting), then wait for each to be ready."""
        for service in self.services:
            if not service.alive():
                ready, service.ready = service.ready, None
                service.start()
                service.ready = ready
        for service in self.services:
            if service.ready is not None:
                from tests.faults.services import wait_for

                wait_for(service.ready, 90, f"{service.name} ready\n{service.tail()}", interval=0.2)

    def kill(self) -> None:
        """The host gone at once, as a crash or a pulled plug: SIGKILL to every process group."""
        for service in self.services:
            if service.alive():
                service.kill()

    def stop(self) -> None:
        for service in self.services:
            service.stop(timeout=10)

    def alive(self) -> bool:
        return all(s.alive() for s in self.services)

    def spooled_lines(self) -> int:
        """Usage lines in this host's spool files not yet drained (the files are removed once written)."""
        total = 0
        for path in self.spool_dir.rglob("*.spool"):
            try:
                total += path.read_bytes().count(b"\n")
            except OSError:
                pass
        return total


HAPROXY_CONFIG = """\
global
    maxconn 2000
defaults
    mode http
    timeout connect 1s
    timeout client 30s
    timeout server 30s
    retries 2
    option redispatch
    option forwardfor
frontend gateway
    bind {address}:{port}
    default_backend hosts
backend hosts
    balance roundrobin
    option httpchk GET /livez
    http-check expect status 200
    default-server inter 250ms fastinter 250ms downinter 250ms fall 2 rise 1
{servers}
"""


class Balancer(Service):
    """Debian's HAProxy on the load balancer host: round robin over the gateway hosts, each checked
    on /livez every 250 ms (down after 2 failures, up after 1 success)."""

    def __init__(self, base: Path, logs: Path, prefix: list[str], address: str, hosts: list[GatewayHost], probe):
        self.address = address
        config = base / "haproxy.cfg"
        servers = "\n".join(f"    server {h.name} {h.address}:{WEB_PORT} check" for h in hosts)
        config.write_text(HAPROXY_CONFIG.format(address=address, port=LB_PORT, servers=servers))
        self._probe = probe
        super().__init__("haproxy", [*prefix, "/usr/sbin/haproxy", "-f", str(config), "-db"],
                         env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, logs=logs,
                         ready=lambda: self._probe(http_ok, f"{self.url}/livez"))

    @property
    def url(self) -> str:
        return f"http://{self.address}:{LB_PORT}"


def gateway_env(pg_url: str, extra: dict[str, str]) -> dict[str, str]:
    """The environment every gateway host shares (tests/faults/stack.py's, on the hosts' addresses)."""
    from tests.faults.stack import SERVICE_VARS

    # the test process's own settings put PROMETHEUS_MULTIPROC_DIR in its environment: each host has its own
    env = {k: v for k, v in os.environ.items()
           if k not in (*SERVICE_VARS, *HOST_VARS) and not k.startswith("PYTEST")}
    env.update({
        "PATH": f"{BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "DJANGO_SETTINGS_MODULE": "gateway.settings",
        "DATABASE_URL": pg_url,
        "PYTHONPATH": str(ROOT),
        "PYTHONUNBUFFERED": "1",
        "SECRET_KEY": "scale-" + "x" * 50,
        "LOG_LEVEL": "INFO",
        "PASSWORD_HASHERS": "django.contrib.auth.hashers.MD5PasswordHasher",
        "TRUSTED_PROXIES": "10.77.0.20",  # the load balancer host
        "REGISTRY_TTL_SECONDS": "30",
        "CREDENTIAL_CACHE_SECONDS": "30",
        "ROUTINE_SWEEP_SECONDS": "2",
        **extra,
    })
    return env


def python_in(prefix: list[str], env: dict[str, str], *args: str, timeout: float = 300,
              stdin: str | None = None) -> str:
    """`python <args>` run on a host (its namespace), in the host's environment; its stdout."""
    done = subprocess.run([*prefix, PYTHON, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout, input=stdin, start_new_session=True, check=False)
    assert done.returncode == 0, f"python {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


__all__ = ["Balancer", "GatewayHost", "HostPostgres", "HostRedis", "gateway_env", "pid_alive", "python_in"]
