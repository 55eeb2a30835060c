"""The gateway under test, set up from nothing on loopback and taken down again: a fresh PostgreSQL
database, a Redis database of the benchmark's own, the reference upstream, the configuration through
the product's own tools, and the gateway's processes."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import harness
from harness import HUGE, PY, TOKEN_CEILING, Proc, free_port, run_checked, wait_http

REPLY = ("The quick brown fox jumps over the lazy dog while seven bright stars keep watch over "
         "the quiet sleeping town tonight")  # 20 words


class Stack:
    """Everything a benchmark runs; `close()` undoes it all and is safe to call twice."""

    def __init__(self, extra_env: dict[str, str], redis_url: str, db_prefix: str = "bench_gateway_",
                 redis_patterns: tuple[str, ...] = ("gw:*",), pool: int = 1, guardrails: list | None = None):
        self.pid = os.getpid()
        self.pool = pool  # servers holding echo-1 on the one upstream: more than one makes the bare name a pool
        self.guardrails = guardrails  # the bench group's checks (gateway/guard/); None: the group has none
        self.db_prefix = db_prefix
        self.db_name = f"{db_prefix}{self.pid}"
        self.db_url = harness.PG_URL_TEMPLATE.format(name=self.db_name)
        self.redis_url = redis_url
        self.redis_patterns = redis_patterns
        self.tmp = Path(tempfile.mkdtemp(prefix="bench-gateway-"))
        self.procs: list[Proc] = []
        self.db_created = False
        self.api_key = ""
        self.extra_env = extra_env
        self.settings_line = ""
        self.upstream = self.gateway = ""
        self.env = {
            **{k: v for k, v in os.environ.items()
               if not k.startswith(("RATE_LIMIT_", "DJANGO_", "WEBHOOK", "CELERY_"))},
            "DJANGO_SETTINGS_MODULE": "gateway.settings",
            "DATABASE_URL": self.db_url,
            "REDIS_URL": redis_url,
            "CELERY_BROKER_URL": redis_url,
            "GATEWAY_VAR_DIR": str(self.tmp / "var"),
            "SECRET_KEY": secrets.token_urlsafe(40),
            "DEBUG": "false",
        }
        # Every request ceiling stays on (counted in Redis), with a ceiling the run never reaches.
        self.gateway_env = {**self.env, "RATE_LIMIT_V1": str(HUGE), "RATE_LIMIT_GENERAL": str(HUGE),
                            "RATE_LIMIT_CHAT": str(HUGE), **extra_env}
        self.refresh_server_flags()

    def refresh_server_flags(self) -> None:
        """uvloop and httptools only when the gateway's interpreter has them (they are not dependencies)."""
        self.server_flags = ["--no-access-log"]
        if harness.have("uvloop", self.gateway_env):
            self.server_flags += ["--loop", "uvloop"]
        if harness.have("httptools", self.gateway_env):
            self.server_flags += ["--http", "httptools"]

    # -- set up ----------------------------------------------------------------------------
    def prepare(self, commit: str | None = None) -> None:
        """Everything before the gateway starts: the code (`commit` exported with git archive, or
        the working tree), the database, the upstream, the configuration."""
        if commit:
            harness.set_app_root(harness.export_commit(commit, self.tmp))
            print(f"bench: testing commit {harness.git_commit()} from {harness.APP_ROOT}", flush=True)
            self.refresh_server_flags()
        self.setup_database()
        self.start_upstream()
        self.configure()

    def setup_database(self) -> None:
        stale = harness.drop_stale_databases(self.db_prefix)
        if stale:
            print(f"bench: dropped stale databases {', '.join(stale)}", flush=True)
        with harness.pg_admin() as conn:
            conn.execute(f'CREATE DATABASE "{self.db_name}"')
        self.db_created = True
        flushed = harness.redis_delete(self.redis_url, self.redis_patterns)
        print(f"bench: database {self.db_name} created; {flushed} keys ({', '.join(self.redis_patterns)}) "
              f"deleted from {self.redis_url}", flush=True)
        manage = [PY, "manage.py"]
        run_checked([*manage, "migrate", "--noinput", "-v", "0"], self.env, timeout=300)
        run_checked([*manage, "createcachetable"], self.env)

    def start_upstream(self) -> None:
        self.upstream_port = free_port()
        up = Proc("upstream", [PY, "-m", "tests.upstream", "--port", str(self.upstream_port), "--no-record",
                               "--reply", REPLY, "--tokens-per-second", "0"], self.env, self.tmp)
        self.procs.append(up)
        self.upstream = f"http://127.0.0.1:{self.upstream_port}"
        wait_http(self.upstream + "/_control", up)
        import httpx

        httpx.post(self.upstream + "/_control", json={"reply": REPLY, "tokens_per_second": 0, "latency_ms": 0},
                   timeout=5).raise_for_status()

    @property
    def model(self) -> str:
        """The model the gateway is asked for: `bench/echo-1`, or with a pool the bare name its servers share."""
        return "echo-1" if self.pool > 1 else "bench/echo-1"

    def configure(self) -> None:
        config = self.tmp / "bench.yaml"
        config.write_text(
            "servers:\n"
            "  - name: bench\n"
            "    kind: openai\n"
            f"    base_url: http://127.0.0.1:{self.upstream_port}/v1\n"
            "    models:\n"
            "      - name: echo-1\n"
            "  - name: bench-an\n"  # the same upstream in the Anthropic format (--surface messages)
            "    kind: anthropic\n"
            f"    base_url: http://127.0.0.1:{self.upstream_port}\n"
            "    models:\n"
            "      - name: claude-echo\n"
            + "".join(f"  - name: bench{n}\n    kind: openai\n    base_url: http://127.0.0.1:{self.upstream_port}/v1\n"
                      "    models:\n      - name: echo-1\n" for n in range(2, self.pool + 1))
            + "default_model: bench/echo-1\n"
            "groups:\n"
            "  - name: bench\n"
            "    api_access: true\n"
            f"    daily_tokens: {TOKEN_CEILING}\n"
            f"    weekly_tokens: {TOKEN_CEILING}\n"
            f"    monthly_tokens: {TOKEN_CEILING}\n"
            + (f"    guardrails: {json.dumps(self.guardrails)}\n" if self.guardrails else "")  # JSON is YAML
        )
        manage = [PY, "manage.py"]
        run_checked([*manage, "applyconfig", str(config)], self.env)
        password = secrets.token_urlsafe(18)
        run_checked([*manage, "createaccount", "--email", "bench@example.com", "--name", "Bench", "--group", "bench",
                     "--api-access", "--password-stdin"], self.env, stdin=password + "\n")
        out = run_checked([*manage, "shell", "-c",
                           "from accounts.models import Account; from accounts.keys import api_key_generate; "
                           "print(api_key_generate(account=Account.objects.get(email='bench@example.com')).key)"],
                          self.env)
        keys = [line for line in out.split() if line.startswith("svc_usr_")]
        if not keys:
            raise RuntimeError(f"no API key in the output of api_key_generate: {out!r}")
        self.api_key = keys[-1]

    def effective_settings(self) -> str:
        """The gateway's settings that matter here, as its own process sees them."""
        code = ("from django.conf import settings as s; d = s.DATABASES['default']; "
                "print(f\"CONN_MAX_AGE={d['CONN_MAX_AGE']}, DB pool={d.get('OPTIONS', {}).get('pool', 'off')}, "
                "REGISTRY_TTL_SECONDS={s.REGISTRY_TTL_SECONDS}, DEBUG={s.DEBUG}, "
                "USAGE_FLUSH_SECONDS={s.USAGE_FLUSH_SECONDS}, "
                "RATE_LIMITS v1={s.RATE_LIMITS['v1']} general={s.RATE_LIMITS['general']} "
                "hooks={s.RATE_LIMITS['hooks']}, WEBHOOK_EVENTS_PER_MINUTE={s.WEBHOOK_EVENTS_PER_MINUTE}\")")
        try:
            return run_checked([PY, "manage.py", "shell", "-c", code], self.gateway_env).strip().splitlines()[-1]
        except (RuntimeError, IndexError, subprocess.SubprocessError) as exc:
            return f"unknown ({exc})"

    def use_granian(self) -> None:
        """Serve the gateway with granian instead of uvicorn (`--server granian`): installed into a
        throwaway folder under /tmp (never into .venv) and put on the gateway's PYTHONPATH."""
        target = "/tmp/bench-granian"
        if not os.path.isdir(os.path.join(target, "granian")):
            print(f"bench: installing granian into {target} (a throwaway folder; once)", flush=True)
            subprocess.run([PY, "-m", "pip", "install", "-q", "--target", target, "granian"], check=True,
                           capture_output=True, timeout=300)
        self.gateway_env["PYTHONPATH"] = target
        self.server = "granian"

    server = "uvicorn"

    def start_gateway(self, wrap: list[str] | None = None, name: str = "gateway") -> Proc:
        self.gateway_port = free_port()
        if self.server == "gunicorn":  # the Procfile's web, one worker: its access log goes to the process's log
            argv = [PY, "-m", "gunicorn", "gateway.asgi:application", "-k", "uvicorn_worker.UvicornWorker",
                    "--bind", f"127.0.0.1:{self.gateway_port}", "--workers", "1", "-c", "python:gateway.gunicorn_conf",
                    "--forwarded-allow-ips", ""]
        elif self.server == "granian":  # its ASGI interface, uvloop, no access log (its default)
            argv = [PY, "-m", "granian", "--interface", "asgi", "--host", "127.0.0.1", "--port",
                    str(self.gateway_port), "--workers", "1", "--loop", "uvloop", "--log-level", "warning",
                    "--no-ws", "gateway.asgi:application"]
        else:
            argv = [PY, "-m", "uvicorn", "gateway.asgi:application", "--host", "127.0.0.1", "--port",
                    str(self.gateway_port), "--workers", "1", "--log-level", "warning", *self.server_flags]
        proc = Proc(name, [*(wrap or []), *argv], self.gateway_env, self.tmp)
        self.procs.append(proc)
        self.gateway = f"http://127.0.0.1:{self.gateway_port}"
        wait_http(self.gateway + "/v1/models", proc, timeout=60, headers={"Authorization": f"Bearer {self.api_key}"})
        return proc

    def web_pid(self, proc: Proc) -> int:
        """The process that serves: the gateway's own, or under gunicorn its one worker (the master's child
        without children of its own: the dirty arbiter has its dirty worker, the host's drainer)."""
        if self.server != "gunicorn":
            return proc.popen.pid
        master = proc.popen.pid
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            workers = [pid for pid in harness.children(master) if not harness.children(pid)]
            if len(workers) == 1:
                return workers[0]
            time.sleep(0.1)
        raise RuntimeError(f"gunicorn {master}: not one worker among its children")

    def proc(self, name: str) -> Proc | None:
        return next((p for p in self.procs if p.name == name), None)

    def check_alive(self) -> None:
        for proc in self.procs:
            if not proc.alive():
                raise RuntimeError(f"{proc.name} died:\n{proc.log_tail()}")

    # -- CPU ---------------------------------------------------------------------------------
    SERVERS = ("upstream", "gateway", "litellm")

    def cpu_snapshot(self) -> dict:
        snap = {"client": time.process_time(), "postgres": harness.postgres_backends_cpu(self.db_name),
                "redis": harness.redis_cpu_seconds(self.redis_url), "machine": harness.machine_busy_seconds(),
                "wall": time.monotonic()}
        for name in self.SERVERS:
            proc = self.proc(name)
            snap[name] = harness.tree_cpu_seconds(proc.popen.pid) if proc else float("nan")
        return snap

    def cpu_delta(self, before: dict, after: dict, requests: int) -> dict:
        """ms of CPU per request for each process, and the cores that other processes kept busy."""
        pg = sum(cpu - before["postgres"].get(pid, 0.0) for pid, cpu in after["postgres"].items())
        names = ("client", *self.SERVERS, "redis")
        out = {k: (after[k] - before[k]) / max(requests, 1) * 1000 for k in names}
        out["postgres"] = pg / max(requests, 1) * 1000
        ours = sum(after[k] - before[k] for k in names if after[k] == after[k]) + pg
        wall = after["wall"] - before["wall"]
        out["others_cores"] = max(after["machine"] - before["machine"] - ours, 0.0) / wall if wall > 0 else 0.0
        return out

    def usage_records(self) -> int:
        import psycopg

        with psycopg.connect(self.db_url.replace("postgres://", "postgresql://", 1), connect_timeout=5) as conn:
            return conn.execute("SELECT count(*) FROM gateway_usagerecord").fetchone()[0]

    # -- tear down -------------------------------------------------------------------------
    def run(self, body: Callable[[], int], after: Callable[[], None] | None = None) -> int:
        """A benchmark's `body` on this stack, and its exit status: 130 on Ctrl-C; on an error, the tails of
        the processes' logs, then the error. Whatever happens, the stack is taken down (a second Ctrl-C
        ignored meanwhile, to let the clean-up finish), then `after` runs."""
        try:
            return body()
        except KeyboardInterrupt:
            print("\nbench: interrupted; cleaning up", file=sys.stderr, flush=True)
            return 130
        except Exception:
            for proc in self.procs:
                tail = proc.log_tail(4000).strip()
                if tail:
                    print(f"--- {proc.name} log (tail) ---\n{tail}", file=sys.stderr, flush=True)
            raise
        finally:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            self.close()
            if after is not None:
                after()

    def close(self) -> None:
        for proc in reversed(self.procs):
            with contextlib.suppress(Exception):
                proc.stop()
        self.procs = []
        harness.close_stats_connection()
        if self.db_created:
            try:
                with harness.pg_admin() as conn:
                    conn.execute(f'DROP DATABASE IF EXISTS "{self.db_name}" WITH (FORCE)')
                self.db_created = False
                print(f"bench: database {self.db_name} dropped", flush=True)
            except Exception as exc:  # noqa: BLE001 - report and go on cleaning
                print(f"bench: could not drop {self.db_name}: {exc}", file=sys.stderr, flush=True)
        with contextlib.suppress(Exception):
            harness.redis_delete(self.redis_url, self.redis_patterns)
        for _ in range(3):  # a child may still be closing a file in it
            shutil.rmtree(self.tmp, ignore_errors=True)
            if not self.tmp.exists():
                break
            time.sleep(0.5)
