"""A private stack for the fault tests: its own PostgreSQL cluster (initdb) and Redis on free
loopback ports, the Procfile's `web` (gunicorn, 2 uvicorn workers), `worker`, `batch-worker` and `beat`,
and the reference upstream. Nothing here touches the shared PostgreSQL (5432) or Redis (6379).

Every process runs in a session of its own (`start_new_session=True`) and is stopped through its
own process group, never by name (tests/faults/services.py). Logs go to
`<stack dir>/logs/<name>.log`; `Stack.tail()` shows them when a test fails."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.faults.services import (
    BIN,
    PYTHON,
    ROOT,
    PrivatePostgres,
    PrivateRedis,
    Service,
    child_pids,
    free_port,
    pid_alive,
    port_open,
    wait_for,
)

# Variables of the caller's environment that could point a child at the shared services.
# The caller's services and folders: the stack's processes get their own (a shared metrics folder or HOME,
# where gunicorn keeps its control socket, would mix them with the caller's or another stack's processes).
# PGOPTIONS too: libpq sends it as the `options` startup parameter, which PgBouncer refuses (.ci/run sets it).
SERVICE_VARS = ("DATABASE_URL", "DATABASE_POOLER", "REDIS_URL", "CELERY_BROKER_URL", "EMAIL_URL", "GATEWAY_VAR_DIR",
                "PGHOST", "PGPORT", "PGDATABASE", "PGUSER", "PGPASSWORD", "PGOPTIONS", "DJANGO_SETTINGS_MODULE",
                "PROMETHEUS_MULTIPROC_DIR", "USAGE_SPOOL_DIR", "REDIS_SENTINELS", "REDIS_SENTINEL_SERVICE",
                "REDIS_SENTINEL_PASSWORD", "HOME")
WEB_WORKERS = 2
HEAVY = 100_000  # request ceilings out of the way of the load


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
        # the Procfile's batch-worker: the batch queue only, its tasks in its own process
        self.batch_worker = Service("batch-worker", [str(BIN / "celery"), "-A", "gateway", "worker", "-Q", "batches",
                                                     "-n", "batches@%h", "--pool", "threads", "--concurrency", "1",
                                                     "--loglevel", "INFO"],
                                    env=self.env, logs=self.logs, ready=lambda: "ready." in self.batch_worker
                                    .log_text().rsplit("===== start", 1)[-1])
        self.beat = Service("beat", [str(BIN / "celery"), "-A", "gateway", "beat", "--loglevel", "INFO"],
                            env=self.env, logs=self.logs)
        self.services = [self.upstream, self.web, self.worker, self.batch_worker, self.beat]

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in SERVICE_VARS and not k.startswith("PYTEST")}
        env.update({
            "DJANGO_SETTINGS_MODULE": "gateway.settings",
            "DATABASE_URL": self.pg.url,
            "REDIS_URL": self.redis.url,
            "CELERY_BROKER_URL": self.redis.url,
            "GATEWAY_VAR_DIR": str(self.var),
            "HOME": str(self.var),
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
            # a batch whose worker died is taken up by the next within a few seconds
            "BATCH_SWEEP_SECONDS": "2",
            "BATCH_LEASE_SECONDS": "3",
            "BATCH_RETRY_SECONDS": "0.5",
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
        self.batch_worker.start(timeout=60)
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
