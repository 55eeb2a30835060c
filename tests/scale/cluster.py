"""The whole multi-host stack: the network (tests/scale/netns.py), a PostgreSQL host, a Redis host,
a model host, three gateway hosts, a load balancer host and a client host (tests/scale/hosts.py).

    10.77.0.2   pg        PostgreSQL 15 (initdb in a temp dir)
    10.77.0.3   redis     the Redis primary and a Sentinel
    10.77.0.4   redis2    its replica and a Sentinel
    10.77.0.5   sentinel3 the third Sentinel (tests/scale/sentinels.py)
    10.77.0.11  gw1       web + worker + beat
    10.77.0.12  gw2       web + worker
    10.77.0.13  gw3       web + worker
    10.77.0.20  lb        HAProxy, :8080, round robin, /livez checked
    10.77.0.30  client    the load (tests/scale/drive.py under `ip netns exec`) and the probes
    10.77.0.40  models    the reference upstream (tests/upstream)

`Cluster.close()` stops every process by its process group, then deletes every namespace, whatever
happened before (the session fixture calls it in a `finally`)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.faults.services import PYTHON, Service, wait_for
from tests.scale.hosts import (
    UPSTREAM_PORT,
    Balancer,
    GatewayHost,
    HostPostgres,
    gateway_env,
    http_ok,
    python_in,
)
from tests.scale.netns import Network, in_netns
from tests.scale.sentinels import RedisGroup

GATEWAYS = ("gw1", "gw2", "gw3")
# The ceilings the proofs count against (tests/scale/test_across_hosts.py): low, so a bounded load
# crosses them; every other one out of the way.
CEILINGS = {"RATE_LIMIT_V1": "20", "RATE_LIMIT_GENERAL": "40", "RATE_LIMIT_HOOKS": "100000",
            "WEBHOOK_EVENTS_PER_MINUTE": "100000", "RATE_LIMIT_LOGIN": "100000"}


class Cluster:
    def __init__(self):
        self.base = Path(tempfile.mkdtemp(prefix="gw-scale-"))
        self.logs = self.base / "logs"
        self.logs.mkdir()
        self.net = Network()
        self.processes: list[Service] = []
        self.started_at = time.monotonic()
        self.timings: dict[str, float] = {}

    # --- bring up ---------------------------------------------------------------------------

    def start(self) -> Cluster:
        net = self.net.up()
        for role, octet in (("pg", 2), ("redis", 3), ("redis2", 4), ("sentinel3", 5), ("gw1", 11), ("gw2", 12),
                            ("gw3", 13), ("lb", 20), ("client", 30), ("models", 40)):
            net.add_host(role, octet)
        self.pg = HostPostgres(self.base, self.logs, net.exec_prefix("pg"), net.address("pg"))
        self.redis = RedisGroup(self.base, self.logs, net, self.probe)
        self.env = gateway_env(self.pg.url, {**self.redis.env(), **CEILINGS})
        self.upstream = Service("upstream", [*net.exec_prefix("models"), PYTHON, "-m", "tests.upstream", "--host",
                                             net.address("models"), "--port", str(UPSTREAM_PORT), "--latency-ms", "20"],
                                env=self.env, logs=self.logs)
        self.processes += [*self.redis.services, self.upstream]
        self.upstream.start()
        self.redis.start()
        self.pg.init()
        self.pg.start()
        self.pg.create_database()
        self.mark("postgres and redis up")
        python_in(self.prefix("gw1"), self.env, *PROCFILE_RELEASE)
        self.mark("migrated (the Procfile's release)")
        self.seed({"op": "base", "upstream": f"{self.upstream_url}/v1"})
        self.hosts = {name: GatewayHost(name, net.exec_prefix(name), net.address(name), self.env, self.base,
                                        self.logs, self.probe, beat=name == "gw1") for name in GATEWAYS}
        for host in self.hosts.values():
            self.processes += host.services
        with ThreadPoolExecutor(len(self.hosts)) as pool:
            list(pool.map(lambda h: h.start(), self.hosts.values()))
        self.mark("gateway hosts up")
        self.lb = Balancer(self.base, self.logs, net.exec_prefix("lb"), net.address("lb"),
                           list(self.hosts.values()), self.probe)
        self.processes.append(self.lb)
        self.lb.start(timeout=30)
        wait_for(lambda: self.probe(http_ok, f"{self.upstream_url}/v1/models"), 30, "the model host")
        self.mark("load balancer up")
        return self

    def mark(self, what: str) -> None:
        self.timings[what] = round(time.monotonic() - self.started_at, 1)

    def prefix(self, role: str) -> list[str]:
        return self.net.exec_prefix(role)

    @property
    def url(self) -> str:
        return self.lb.url

    @property
    def upstream_url(self) -> str:
        return f"http://{self.net.address('models')}:{UPSTREAM_PORT}"

    def probe(self, fn, *args, **kwargs):
        """`fn` run from the client host (its sockets inside the client's namespace)."""
        return in_netns(self.net.ns("client"), fn, *args, **kwargs)

    def seed(self, spec: dict, host: str = "gw1") -> dict:
        """tests/scale/seed.py run on a gateway host; its JSON answer."""
        out = python_in(self.prefix(host), self.env, "-m", "tests.scale.seed", json.dumps(spec), timeout=120)
        return json.loads(out.strip().splitlines()[-1])

    def manage(self, *args: str, host: str = "gw1") -> str:
        return python_in(self.prefix(host), self.env, "manage.py", *args, timeout=120)

    def upstream_control(self, **knobs) -> dict:
        import httpx

        return self.probe(lambda: httpx.post(f"{self.upstream_url}/_control", json=knobs, timeout=10).json())

    def upstream_requests(self) -> list[dict]:
        import httpx

        return self.probe(lambda: httpx.get(f"{self.upstream_url}/_control/requests", timeout=30).json())

    def ensure_running(self) -> None:
        """Before each test: a host an earlier test left stopped is started again."""
        if not self.redis.alive():
            self.redis.start()
        for host in self.hosts.values():
            if not host.alive():
                host.start()
        wait_for(self.all_in_rotation, 30, "every gateway host in the balancer's rotation")

    def all_in_rotation(self) -> bool:
        return all(self.probe(http_ok, f"{h.url}/livez") for h in self.hosts.values())

    # --- tear down ---------------------------------------------------------------------------

    def tail(self, lines: int = 40) -> str:
        parts = [f"----- {s.name} -----\n{s.tail(lines)}" for s in self.processes]
        parts.append(f"----- postgres -----\n{self.pg.tail(lines // 2)}")
        return "\n".join(parts)

    def close(self) -> None:
        def stop(service: Service) -> None:
            with contextlib.suppress(Exception):
                service.stop(timeout=10)

        with ThreadPoolExecutor(8) as pool:  # each by its own process group, all at the same time
            list(pool.map(stop, reversed(self.processes)))
        pg = getattr(self, "pg", None)
        if pg is not None:
            with contextlib.suppress(Exception):
                pg.stop("immediate")
            with contextlib.suppress(Exception):
                pg.kill()
        self.net.delete()
        if not os.environ.get("GATEWAY_FAULTS_KEEP"):
            shutil.rmtree(self.base, ignore_errors=True)


PROCFILE_RELEASE = ("manage.py", "migrate", "--noinput")


@contextlib.contextmanager
def running_cluster():
    cluster = Cluster()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.close()
