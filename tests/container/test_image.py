"""The container image (Containerfile, deploy/container/entrypoint, docs/decisions/0139-container-image.md),
built and run as a deployment runs it: `migrate`, `applyconfig` of a mounted file, `createaccount`, a chat
completion through the `web` container to the reference upstream, a webhook event run by the `worker`
container, and SIGTERM ending `web` at once with exit 0. Uid 10001 inside, the healthcheck answering, and the
image's size under a stated bound.

Built with Debian's buildah on a Debian bookworm base made by debootstrap (tests/container/tools.py: no image
registry is reachable here), run with podman and runc. The test starts its own PostgreSQL (initdb) and Redis
on free loopback ports, and the reference upstream; each container has a network namespace of its own
(slirp4netns), reaching them at the host's loopback through slirp's 10.0.2.2, and `web` is published on
127.0.0.1 alone: the Procfile binds 0.0.0.0, which on podman's host network would be every interface of the
machine. Every process is in a session of its own, stopped by its own group; every container by the name
the test gave it. Settings reach the containers as a deployment would give them: SECRET_KEY and
DATABASE_URL as mounted files (NAME_FILE), the others as variables."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import shutil
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from tests.container import tools
from tests.faults.services import PYTHON, ROOT, PrivatePostgres, PrivateRedis, Service, free_port, port_open, wait_for

TAG = "localhost/model-gateway:test"
SIZE_BOUND = 1_000_000_000  # bytes: 0.86 GB measured (the venv, 620 MB, is most of it: spaCy, numpy, botocore)
HOST = "10.0.2.2"  # the host's loopback, as slirp4netns shows it to a container
PASSWORD = "container-test-password-1"
STOP_GRACE = 30  # seconds podman waits after SIGTERM before SIGKILL

pytestmark = pytest.mark.skipif(
    bool(tools.missing_tools()) or os.geteuid() != 0,
    reason=f"needs root and {', '.join(tools.NEEDED)} (apt-get install -y {' '.join(tools.NEEDED)}; .ci/run does)")


class World:
    """The image, the host's services, and the containers the test runs (by name)."""

    def __init__(self):
        self.base = Path(tempfile.mkdtemp(prefix="gw-container-"))
        os.chmod(self.base, 0o755)
        self.logs = self.base / "logs"
        self.logs.mkdir()
        self.env = tools.environment(self.base)
        self.tag = f"gw{os.getpid()}"
        self.names: list[str] = []
        self.durations: dict[str, float] = {}
        self.redis = PrivateRedis(self.base, self.logs)
        self.pg = PrivatePostgres(self.base, self.logs)
        self.upstream_port = free_port()
        self.upstream = Service("upstream", [PYTHON, "-m", "tests.upstream", "--port", str(self.upstream_port)],
                                env={**os.environ, "PYTHONPATH": str(ROOT)}, logs=self.logs,
                                ready=lambda: port_open(self.upstream_port))
        self.web_port = free_port()
        self.secrets = self.base / "secrets"
        self.secrets.mkdir()

    def podman(self, *args: str, timeout: float = 300, check: bool = True, stdin: str | None = None):
        return tools.run(["podman", "--runtime", "runc", *args], env=self.env, timeout=timeout, check=check,
                         stdin=stdin)

    def secret(self, name: str, value: str) -> Path:
        path = self.secrets / name
        path.write_text(value + "\n")
        os.chmod(path, 0o644)  # the container's uid 10001 reads it through the bind mount
        return path

    def start(self) -> None:
        started = time.monotonic()
        self.durations["base image"] = tools.import_base(self.env)
        built = time.monotonic()
        tools.build(TAG, self.env, self.base)
        self.durations["build"] = time.monotonic() - built
        self.redis.start(timeout=20)
        self.pg.init()
        self.pg.start()
        self.pg.create_database()
        self.upstream.start(timeout=30)
        self.config = self.base / "gateway.yaml"
        self.config.write_text(f"""servers:
  - name: ref
    kind: openai
    base_url: http://{HOST}:{self.upstream_port}/v1
    models:
      - name: echo-1
default_model: ref/echo-1
""")
        os.chmod(self.config, 0o644)
        self.settings = [
            "-e", "DEBUG=false", "-e", "SECRET_KEY_FILE=/run/secrets/secret-key",
            "-e", "DATABASE_URL_FILE=/run/secrets/database-url", "-e", f"REDIS_URL=redis://{HOST}:{self.redis.port}/0",
            "-e", "WEB_CONCURRENCY=1", "-e", "LOG_LEVEL=INFO",
            "-v", f"{self.secret('secret-key', secrets.token_urlsafe(50))}:/run/secrets/secret-key:ro",
            "-v", f"{self.secret('database-url', f'postgres://postgres@{HOST}:{self.pg.port}/gateway')}"
                  ":/run/secrets/database-url:ro",
            "-v", f"{self.config}:/etc/gateway/gateway.yaml:ro",
            "--network", "slirp4netns:allow_host_loopback=true",
        ]
        self.durations["services"] = time.monotonic() - started - self.durations["build"] - self.durations["base image"]

    def once(self, *command: str, stdin: str | None = None, timeout: float = 300):
        """A container of the image running `command` to its end (removed after, its volume too)."""
        name = self.name(command[0] if command else "none")
        interactive = ["-i"] if stdin is not None else []
        return self.podman("run", "--rm", *interactive, "--name", name, *self.settings, TAG, *command, stdin=stdin,
                           timeout=timeout, check=False)

    def name(self, role: str) -> str:
        name = f"{self.tag}-{role}-{len(self.names)}"
        self.names.append(name)
        return name

    def detached(self, role: str, *extra: str) -> str:
        name = self.name(role)
        self.podman("run", "-d", "--name", name, *self.settings, *extra, TAG, role)
        return name

    def logs_of(self, name: str) -> str:
        done = self.podman("logs", name, check=False, timeout=60)
        return done.stdout + done.stderr

    def close(self) -> None:
        for name in reversed(self.names):
            with contextlib.suppress(Exception):
                self.podman("rm", "--force", "--volumes", "--time", "5", name, check=False, timeout=60)
        for stop in (self.upstream.stop, self.redis.stop, lambda: self.pg.stop("immediate"), self.pg.kill):
            with contextlib.suppress(Exception):
                stop()
        shutil.rmtree(self.base, ignore_errors=True)


@pytest.fixture(scope="module")
def world():
    world = World()
    try:
        world.start()
        yield world
    finally:
        world.close()
        print("\ncontainer test durations: " + ", ".join(f"{k} {v:.1f} s" for k, v in world.durations.items()))


def test_an_unknown_command_exits_64_naming_the_commands(world):
    done = world.once("serve-everything")
    assert done.returncode == 64, done.stderr
    assert ("entrypoint: unknown command 'serve-everything': give one of: web worker batch-worker beat migrate "
            "applyconfig createaccount manage") in done.stderr


def test_the_image_size_is_under_its_bound(world):
    size = int(world.podman("image", "inspect", "--format", "{{.Size}}", TAG).stdout.strip())
    print(f"\nimage size: {size} bytes ({size / 1e6:.0f} MB), bound {SIZE_BOUND / 1e6:.0f} MB")
    assert size < SIZE_BOUND


def test_migrate_applyconfig_createaccount_then_web_and_worker_serve_and_web_stops_on_sigterm(world):
    started = time.monotonic()
    migrated = world.once("migrate")
    assert migrated.returncode == 0, migrated.stdout + migrated.stderr
    assert "Applying accounts.0001_initial... OK" in migrated.stdout
    applied = world.once("applyconfig", "/etc/gateway/gateway.yaml")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "Applied /etc/gateway/gateway.yaml." in applied.stdout
    created = world.once("createaccount", "--email", "dev@container.test", "--name", "Dev", "--group", "team",
                         "--api-access", "--password-stdin", stdin=PASSWORD + "\n")
    assert created.returncode == 0, created.stdout + created.stderr
    assert "<dev@container.test> in group team (group created)." in created.stdout

    web = world.detached("web", "-p", f"127.0.0.1:{world.web_port}:8000")
    url = f"http://127.0.0.1:{world.web_port}"
    try:
        wait_for(lambda: httpx.get(f"{url}/readyz", timeout=2).status_code == 200, 120, "the web's /readyz")
    except AssertionError:
        raise AssertionError(world.logs_of(web)) from None
    assert httpx.get(f"{url}/livez", timeout=5).status_code == 200
    assert world.podman("exec", web, "id", "-u").stdout.strip() == "10001"
    healthy = world.podman("healthcheck", "run", web, check=False)
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    # the console's files, collected when the image was built
    assert httpx.get(f"{url}/static/admin/css/base.css", timeout=5).status_code == 200

    http = httpx.Client(base_url=url, timeout=30)
    login = http.post("/api/v1/auth/login", json={"email": "dev@container.test", "password": PASSWORD})
    assert login.status_code == 200, login.text
    http.headers["Authorization"] = f"Bearer {login.json()['data']['access_token']}"
    issued = http.post("/api/v1/auth/api-key/generate", json={"password": PASSWORD})
    assert issued.status_code == 201, issued.text
    http.headers["Authorization"] = f"Bearer {issued.json()['data']['api_key']}"
    chat = http.post("/v1/chat/completions", json={"model": "ref/echo-1",
                                                     "messages": [{"role": "user", "content": "hello from a pod"}]})
    assert chat.status_code == 200, chat.text
    assert chat.json()["choices"][0]["message"]["content"] == "Echo: hello from a pod"
    assert chat.json()["model"] == "ref/echo-1"

    worker = world.detached("worker")
    try:
        wait_for(lambda: "ready." in world.logs_of(worker), 120, "the worker's 'ready.'")
    except AssertionError:
        raise AssertionError(world.logs_of(worker)) from None
    routine = http.post("/api/v1/routines", json={"name": "In a container", "prompt": "Summarize the event.",
                                                   "trigger": "webhook", "delivery_targets": ["inapp"]})
    assert routine.status_code == 201, routine.text
    rid, secret = routine.json()["routine"]["id"], routine.json()["webhook_secret"]
    body = json.dumps({"text": "the image is built"}).encode()
    signature = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    event = httpx.post(routine.json()["webhook_url"], content=body, timeout=30, headers={
        "Content-Type": "application/json", "X-Svc-Signature": signature, "X-Event-Id": "evt-image-1"})
    assert event.json() == {"ok": True, "queued": True, "event_id": "evt-image-1"}, event.text

    def ended():
        runs = http.get(f"/api/v1/routines/{rid}/runs").json()["runs"]
        return runs if runs and runs[0]["status"] in ("succeeded", "failed") else None

    try:
        (run,) = wait_for(ended, 90, "the routine's run to end")
    except AssertionError:
        raise AssertionError(world.logs_of(worker)) from None
    assert run["status"] == "succeeded", run
    assert run["event_id"] == "evt-image-1" and run["model"] == "ref/echo-1"
    assert run["output"].startswith("Echo: Summarize the event.") and "the image is built" in run["output"]
    http.close()
    world.durations["run to the routine"] = time.monotonic() - started

    for name in (web, worker):
        stopping = time.monotonic()
        world.podman("stop", "--time", str(STOP_GRACE), name, timeout=STOP_GRACE + 30)
        took = time.monotonic() - stopping
        code = world.podman("inspect", "--format", "{{.State.ExitCode}}", name).stdout.strip()
        world.durations[f"{name.split('-')[1]} stop"] = took
        assert code == "0", f"{name} exited with {code} after SIGTERM:\n{world.logs_of(name)[-3000:]}"
        assert took < STOP_GRACE, f"{name} took {took:.1f} s to end on SIGTERM (podman kills at {STOP_GRACE} s)"
