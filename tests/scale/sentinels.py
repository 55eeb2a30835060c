"""Redis of the multi-host stack as a deployment runs it past one machine: a primary on the `redis`
host, a replica on `redis2`, and three Sentinels (one on each of those hosts, one on `sentinel3`),
quorum 2. The gateway hosts find the primary through REDIS_SENTINELS (gateway/settings/redis.py); the
test reads the servers through their Unix sockets and asks the Sentinels from the client host."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from tests.faults.services import Service, wait_for
from tests.scale.hosts import HostRedis

SERVICE = "scale"
SENTINEL_PORT = 26379
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 3000


class RedisGroup:
    """The primary and the replica (`servers`, by host) and the three Sentinels."""

    def __init__(self, base: Path, logs: Path, net, probe):
        self.net, self.probe = net, probe
        self.servers: dict[str, HostRedis] = {}
        for role in ("redis", "redis2"):
            folder = base / role
            folder.mkdir()
            server = HostRedis(folder, logs, net.exec_prefix(role), net.address(role))
            server.name, server.log_path = role, logs / f"{role}.log"
            self.servers[role] = server
        self.servers["redis2"].args += ["--replicaof", net.address("redis"), "6379"]
        self.sentinels: dict[str, Service] = {}
        for role in ("redis", "redis2", "sentinel3"):
            folder = base / f"sentinel-{role}"
            folder.mkdir()
            conf = folder / "sentinel.conf"
            conf.write_text(f"port {SENTINEL_PORT}\nbind {net.address(role)}\ndir {folder}\nprotected-mode no\n"
                            f"sentinel monitor {SERVICE} {net.address('redis')} 6379 2\n"
                            f"sentinel down-after-milliseconds {SERVICE} {DOWN_AFTER_MS}\n"
                            f"sentinel failover-timeout {SERVICE} {FAILOVER_TIMEOUT_MS}\n"
                            f"sentinel parallel-syncs {SERVICE} 1\n")
            self.sentinels[role] = Service(f"sentinel-{role}",
                                           [*net.exec_prefix(role), "redis-server", str(conf), "--sentinel"],
                                           env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, logs=logs)

    @property
    def services(self) -> list[Service]:
        return [*self.servers.values(), *self.sentinels.values()]

    def env(self) -> dict[str, str]:
        """REDIS_SENTINELS and the service's name; REDIS_URL names only the database."""
        return {"REDIS_URL": f"redis://{SERVICE}/0", "REDIS_SENTINEL_SERVICE": SERVICE,
                "REDIS_SENTINELS": ",".join(f"{self.net.address(r)}:{SENTINEL_PORT}" for r in self.sentinels)}

    def ask(self, role: str, question):
        """`question(client)` of the Sentinel on `role`, asked from the client host."""
        import redis

        def call():
            client = redis.Redis(host=self.net.address(role), port=SENTINEL_PORT, socket_timeout=2,
                                 socket_connect_timeout=2)
            try:
                return question(client)
            finally:
                client.close()

        return self.probe(call)

    def primary_role(self) -> str:
        """The host of the primary, as the Sentinels that answer name it (all the same)."""
        named = set()
        for role, sentinel in self.sentinels.items():
            if sentinel.alive():
                with contextlib.suppress(Exception):
                    named.add(self.ask(role, lambda c: c.sentinel_get_master_addr_by_name(SERVICE))[0])
        assert len(named) == 1, f"the Sentinels disagree or none answers: {named}"
        address = named.pop()
        address = address.decode() if isinstance(address, bytes) else address
        for role in self.servers:
            if self.net.address(role) == address:
                return role
        raise AssertionError(f"the Sentinels name {address!r}, no server of the stack")

    def primary(self) -> HostRedis:
        return self.servers[self.primary_role()]

    def client(self):
        """A client of the current primary (the checks read the counters there)."""
        return self.primary().client()

    def start(self, timeout: float = 30) -> RedisGroup:
        for service in self.services:
            if not service.alive():
                service.start(timeout=timeout)
        wait_for(self.watched, timeout, "the Sentinels to know the replica and each other", interval=0.2)
        return self

    def watched(self) -> bool:
        """One primary, the other server its replica in sync, every Sentinel knowing both and the others."""
        primary = self.primary_role()
        for role, server in self.servers.items():
            if role != primary:
                client = server.client()
                try:
                    if client.info("replication").get("master_link_status") != "up":
                        return False
                finally:
                    client.close()
        for role in self.sentinels:
            info = self.ask(role, lambda c: c.sentinel_master(SERVICE))
            if info.get("num-slaves", 0) < 1 or info.get("num-other-sentinels", 0) < 2:
                return False
        return True

    def alive(self) -> bool:
        return all(s.alive() for s in self.services)

    def tail(self, lines: int = 20) -> str:
        return "\n".join(f"----- {s.name} -----\n{s.tail(lines)}" for s in self.services)
