"""Redis behind Sentinel for the fault tests: a primary, a replica and three Sentinels of its own on
free loopback ports, each `redis-server` in a session of its own (tests/faults/services.py's `Service`), the
Sentinels' configuration files generated in the stack's folder. `SentinelStack` is tests/faults/stack.py's
stack with its processes configured through REDIS_SENTINELS instead of one REDIS_URL."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from tests.faults.services import PrivateRedis, Service, free_port, wait_for
from tests.faults.stack import Stack

SERVICE = "faults"
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 3000


class SentinelRedis:
    """Two Redis servers (the first the primary at start) and three Sentinels watching them. Stands where the
    stack's `PrivateRedis` stands: `start`, `alive`, `stop`, `tail`, `client` (of the current primary)."""

    name = "redis"

    def __init__(self, base: Path, logs: Path):
        self.servers = [PrivateRedis(base / f"redis-{i}", logs) for i in (1, 2)]
        for i, server in enumerate(self.servers, 1):
            server.name = f"redis-{i}"
            server.log_path = logs / f"redis-{i}.log"
            (base / f"redis-{i}").mkdir(parents=True)
        self.servers[1].args += ["--replicaof", "127.0.0.1", str(self.servers[0].port)]
        self.sentinels = []
        for i in (1, 2, 3):
            port, folder = free_port(), base / f"sentinel-{i}"
            folder.mkdir()
            conf = folder / "sentinel.conf"
            conf.write_text(f"port {port}\nbind 127.0.0.1\ndir {folder}\n"
                            f"sentinel monitor {SERVICE} 127.0.0.1 {self.servers[0].port} 2\n"
                            f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}\n"
                            f"sentinel failover-timeout {SERVICE} {FAILOVER_TIMEOUT_MS}\n"
                            f"sentinel parallel-syncs {SERVICE} 1\n")
            sentinel = Service(f"sentinel-{i}", ["redis-server", str(conf), "--sentinel"],
                               env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, logs=logs)
            sentinel.port = port
            self.sentinels.append(sentinel)

    @property
    def addresses(self) -> str:
        """REDIS_SENTINELS."""
        return ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)

    @property
    def url(self) -> str:
        """REDIS_URL with Sentinel: the database only (the host is the service's name, not used)."""
        return f"redis://{SERVICE}/0"

    def env(self) -> dict[str, str]:
        return {"REDIS_URL": self.url, "REDIS_SENTINELS": self.addresses, "REDIS_SENTINEL_SERVICE": SERVICE}

    def sentinel_client(self, i: int = 0):
        import redis

        return redis.Redis(host="127.0.0.1", port=self.sentinels[i].port, socket_timeout=2, socket_connect_timeout=2)

    def primary_port(self) -> int | None:
        """The primary's port as the first Sentinel that answers names it."""
        for i in range(len(self.sentinels)):
            with contextlib.suppress(Exception):
                host, port = self.sentinel_client(i).sentinel_get_master_addr_by_name(SERVICE)
                return int(port)
        return None

    def primary(self) -> PrivateRedis:
        port = self.primary_port()
        return next(s for s in self.servers if s.port == port)

    def start(self, timeout: float = 20) -> SentinelRedis:
        for server in self.servers:
            if not server.alive():
                server.start(timeout=timeout)
        for sentinel in self.sentinels:
            if not sentinel.alive():
                sentinel.start()

        def watched() -> bool:  # the replica in sync; every Sentinel knows it and the two others
            if self.servers[1].client().info("replication").get("master_link_status") != "up":
                return False
            for i in range(len(self.sentinels)):
                info = self.sentinel_client(i).sentinel_master(SERVICE)
                if info.get("num-slaves", 0) < 1 or info.get("num-other-sentinels", 0) < 2:
                    return False
            return True

        wait_for(watched, timeout, "the Sentinels to know the replica and each other")
        return self

    def alive(self) -> bool:
        return all(s.alive() for s in [*self.servers, *self.sentinels])

    def stop(self) -> None:
        for service in [*self.sentinels, *self.servers]:
            with contextlib.suppress(Exception):
                service.stop()

    def tail(self, lines: int = 40) -> str:
        return "\n".join(f"----- {s.name} -----\n{s.tail(lines // 2)}" for s in [*self.servers, *self.sentinels])

    def client(self):
        """A client of the current primary (the checks read the counters there)."""
        import redis

        port = self.primary_port()
        return redis.Redis(host="127.0.0.1", port=port, socket_connect_timeout=2, socket_timeout=5)

    def kill_primary(self) -> tuple[PrivateRedis, float]:
        """SIGKILL to the primary (by its process group), and the moment; nothing persisted."""
        victim = self.primary()
        victim.kill()
        return victim, time.monotonic()

    def wait_new_primary(self, old: PrivateRedis, timeout: float = 30) -> PrivateRedis:
        """Until every Sentinel names another primary, and it answers as one."""
        def switched():
            ports = {int(self.sentinel_client(i).sentinel_get_master_addr_by_name(SERVICE)[1])
                     for i in range(len(self.sentinels))}
            if ports == {old.port} or len(ports) != 1:
                return None
            new = next(s for s in self.servers if s.port in ports)
            return new if new.client().execute_command("ROLE")[0] == b"master" else None

        return wait_for(switched, timeout, "the Sentinels to promote the replica")


class SentinelStack(Stack):
    """tests/faults/stack.py's stack, its Redis a primary, a replica and three Sentinels; the web, worker and
    beat configured with REDIS_SENTINELS, REDIS_SENTINEL_SERVICE and a REDIS_URL that names only the database,
    the Celery broker left to its default (the `sentinel://` URL the settings make)."""

    def __init__(self, **extra_env: str):
        super().__init__(**extra_env)
        self.redis = SentinelRedis(self.base, self.logs)
        self.env.update(self.redis.env())  # the services hold this same dict
        self.env.pop("CELERY_BROKER_URL", None)
