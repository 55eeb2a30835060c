"""Webhook ingest: signed events accepted per second by the Procfile's `web` (gunicorn, 2 uvicorn
workers), the time to the accept, and the runs one Celery worker (the Procfile's `worker`) completes
per second; then a check that no accepted event was lost or stored twice.

    .venv/bin/python bench/ingest.py            # full run (about 2 minutes, more if the worker lags)
    .venv/bin/python bench/ingest.py --quick    # small sanity run (under a minute)
    .venv/bin/python bench/ingest.py --help     # --drain-after, --uses-ai, --concurrency, --commit, --env, --tag

Everything on loopback and taken down at the end: a fresh PostgreSQL database bench_ingest_<pid>,
Redis database 11 (broker and counters; only the gateway's and Celery's keys are deleted), the
reference upstream, `web` on a free loopback port and one `worker`. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import json
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import harness
from harness import HUGE, PY, RESULTS, ROOT, Proc, free_port, git_commit, wait_http
from ingest_report import report
from loadgen import HttpError, RawConnection, build_request, closed_loop, pct
from stack import Stack

REDIS_URL = os.environ.get("BENCH_INGEST_REDIS_URL", "redis://127.0.0.1:6379/11")
# The gateway's counters and marks (gw:), Django's cache (:1:), Celery's queues and bindings.
REDIS_PATTERNS = ("gw:*", ":1:*", "celery*", "_kombu.*", "unacked*")


@dataclass(frozen=True)
class Plan:
    name: str
    count: int  # events in the measured run (whichever of count and time comes first)
    seconds: float
    warmup: int  # events sent first (their runs are checked too; not in the accept figures)
    wait_seconds: float  # the longest wait for the worker to complete the runs


FULL = Plan("full", count=30_000, seconds=20.0, warmup=500, wait_seconds=600.0)
QUICK = Plan("quick", count=5_000, seconds=5.0, warmup=200, wait_seconds=180.0)


def procfile(name: str) -> str:
    """The command of one Procfile line, with the bind moved from every interface to loopback."""
    for line in (harness.APP_ROOT / "Procfile").read_text().splitlines():
        if line.startswith(f"{name}:"):
            command = line.split(":", 1)[1].strip()
            return command.replace("--bind 0.0.0.0:", "--bind 127.0.0.1:")
    raise RuntimeError(f"no `{name}` line in the Procfile")


class Ingest:
    def __init__(self, args, stack: Stack):
        self.args, self.stack = args, stack
        self.plan = QUICK if args.quick else FULL
        if args.count or args.seconds:
            self.plan = Plan("custom", args.count or self.plan.count, args.seconds or self.plan.seconds,
                             self.plan.warmup, self.plan.wait_seconds)
        self.port = free_port()
        self.env = {**stack.gateway_env, "RATE_LIMIT_HOOKS": str(HUGE), "WEBHOOK_EVENTS_PER_MINUTE": str(HUGE),
                    "PORT": str(self.port), "WEB_CONCURRENCY": str(args.web_concurrency),
                    "PATH": f"{Path(PY).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}", **stack.extra_env}
        self.base = f"http://127.0.0.1:{self.port}"
        self.commands = {"web": procfile("web"), "worker": procfile("worker")}
        self.prefix = f"bench-{os.getpid()}-{int(time.time())}"

    # -- processes ---------------------------------------------------------------------------
    def start(self, name: str) -> Proc:
        proc = Proc(name, ["sh", "-c", "exec " + self.commands[name]], self.env, self.stack.tmp)
        self.stack.procs.append(proc)
        if name == "web":
            wait_http(self.base + "/v1/models", proc, timeout=90,
                      headers={"Authorization": f"Bearer {self.stack.api_key}"})
        else:
            deadline = time.monotonic() + 90
            while "ready." not in proc.log_tail(20_000):  # Celery's "celery@host ready."
                if not proc.alive() or time.monotonic() > deadline:
                    raise RuntimeError(f"the worker did not get ready:\n{proc.log_tail()}")
                time.sleep(0.2)
        return proc

    def create_routine(self) -> None:
        import httpx

        data = {"name": "bench ingest", "prompt": "An event came in.", "trigger": "webhook",
                "delivery_targets": ["inapp"], "uses_ai": self.args.uses_ai}
        if self.args.uses_ai:
            data["model"] = "bench/echo-1"
        r = httpx.post(self.base + "/api/v1/routines", json=data, timeout=30,
                       headers={"Authorization": f"Bearer {self.stack.api_key}"})
        if r.status_code != 201:
            raise RuntimeError(f"creating the routine: {r.status_code} {r.text[:500]}")
        doc = r.json()
        self.routine_id = doc["routine"]["id"]
        self.secret = doc["webhook_secret"]
        self.path = f"/api/v1/hooks/{doc['routine']['webhook_token']}"
        if not self.secret:
            raise RuntimeError(f"the routine has no secret: {doc}")

    # -- the load ----------------------------------------------------------------------------
    async def fire(self, start: int, count: int, seconds: float, accepted: list, refused: Counter):
        """Signed events with unique ids, `c` at a time on keep-alive connections, each accept checked."""
        host = f"127.0.0.1:{self.port}"
        free = [RawConnection("127.0.0.1", self.port) for _ in range(self.args.concurrency)]
        key = self.secret.encode()

        async def call(i: int):
            event_id = f"{self.prefix}-{start + i}"
            body = json.dumps({"id": event_id, "type": "bench.event", "n": start + i}).encode()
            signature = hmac.new(key, body, hashlib.sha256).hexdigest()
            payload = build_request(host, self.path, body, {"X-Event-Id": event_id,
                                                            "X-Svc-Signature": f"sha256={signature}"})
            conn = free.pop()
            try:
                status, answer, _ = await conn.exchange(payload)
            except BaseException:
                await conn.close()
                raise
            finally:
                free.append(conn)
            doc = json.loads(answer) if answer.startswith(b"{") else {}
            if status != 200 or doc.get("queued") is not True or doc.get("event_id") != event_id:
                refused[f"{status} {doc.get('ignored') or doc.get('error') or answer[:60]!r}"] += 1
                raise HttpError(f"status {status}: {answer[:200]!r}")
            accepted.append(event_id)

        try:
            return await closed_loop(call, self.args.concurrency, count, seconds)
        finally:
            for conn in free:
                await conn.close()

    # -- the database ------------------------------------------------------------------------
    def query(self, sql: str, *params):
        import psycopg

        with psycopg.connect(self.stack.db_url.replace("postgres://", "postgresql://", 1), connect_timeout=5) as c:
            return c.execute(sql, params).fetchall()

    def run_counts(self) -> dict:
        return dict(self.query("SELECT status, count(*) FROM routines_run WHERE routine_id = %s GROUP BY status",
                               self.routine_id))

    def wait_for_runs(self, deadline: float) -> dict:
        counts: dict = {}
        while time.monotonic() < deadline:
            counts = self.run_counts()
            if not counts.get("queued") and not counts.get("running"):
                return counts
            if not self.stack.proc("worker").alive():
                raise RuntimeError(f"the worker died:\n{self.stack.proc('worker').log_tail()}")
            time.sleep(0.5)
        return self.run_counts()

    def audit(self, accepted: list[str]) -> dict:
        """Every accepted event stored once, with one run; nothing stored twice."""
        events = Counter(e for (e,) in self.query("SELECT event_id FROM routines_event WHERE routine_id = %s",
                                                  self.routine_id))
        runs = Counter(e for (e,) in self.query(
            "SELECT e.event_id FROM routines_run r JOIN routines_event e ON e.id = r.source_event_id "
            "WHERE r.routine_id = %s", self.routine_id))
        runs_total = self.query("SELECT count(*) FROM routines_run WHERE routine_id = %s", self.routine_id)[0][0]
        acc = Counter(accepted)
        deliveries = dict(self.query(
            "SELECT d.status, count(*) FROM routines_delivery d JOIN routines_run r ON r.id = d.run_id "
            "WHERE r.routine_id = %s GROUP BY d.status", self.routine_id))
        inbox = self.query("SELECT count(*) FROM routines_inboxmessage WHERE routine_id = %s", self.routine_id)[0][0]
        return {
            "accepted": len(accepted),
            "accepted_twice": sum(1 for n in acc.values() if n > 1),
            "events_stored": sum(events.values()),
            "lost_events": sum(1 for e in acc if e not in events),
            "lost_runs": sum(1 for e in acc if e not in runs),
            "duplicated_events": sum(1 for n in events.values() if n > 1),
            "duplicated_runs": sum(1 for n in runs.values() if n > 1),
            "runs_total": runs_total,
            "stored_not_acknowledged": sum(1 for e in events if e not in acc),
            "deliveries": deliveries, "inbox_messages": inbox,
        }

    def run_window(self) -> tuple:
        return self.query("SELECT min(started_at), max(finished_at), count(*) FILTER (WHERE finished_at IS NOT NULL) "
                          "FROM routines_run WHERE routine_id = %s", self.routine_id)[0]

    def finished_since(self, moment: datetime) -> int:
        return self.query("SELECT count(*) FROM routines_run WHERE routine_id = %s AND finished_at > %s",
                          self.routine_id, moment)[0][0]

    # -- CPU ---------------------------------------------------------------------------------
    def cpu(self) -> dict:
        snap = {"client": time.process_time(),
                "postgres": sum(harness.postgres_backends_cpu(self.stack.db_name).values()),
                "redis": harness.redis_cpu_seconds(self.stack.redis_url), "machine": harness.machine_busy_seconds(),
                "wall": time.monotonic()}
        for name in ("web", "worker"):
            proc = self.stack.proc(name)
            snap[name] = harness.tree_cpu_seconds(proc.popen.pid) if proc else 0.0
        backend = harness.backend_snapshot(self.stack.db_name, self.stack.redis_url)
        snap["pg_sessions"], snap["pg_commits"] = backend.get("pg_sessions", 0), backend.get("pg_commits", 0)
        return snap

    @staticmethod
    def cpu_per(before: dict, after: dict, n: int) -> dict:
        out = {k: (after[k] - before[k]) / max(n, 1) * 1000 for k in ("client", "web", "worker", "postgres", "redis")}
        ours = sum(after[k] - before[k] for k in ("client", "web", "worker", "postgres", "redis"))
        wall = after["wall"] - before["wall"]
        out["others_cores"] = max(after["machine"] - before["machine"] - ours, 0.0) / wall if wall > 0 else 0.0
        out["web_cores"] = (after["web"] - before["web"]) / wall if wall > 0 else 0.0
        for k in ("pg_sessions", "pg_commits"):  # per event / run, not ms
            out[k] = (after[k] - before[k]) / max(n, 1)
        return out

    # -- the whole run -----------------------------------------------------------------------
    def run(self) -> dict:
        args, plan = self.args, self.plan
        self.stack.settings_line = self.stack.effective_settings()
        if not args.drain_after:
            self.start("worker")
        self.start("web")
        self.create_routine()
        accepted: list[str] = []
        refused: Counter = Counter()
        warm = asyncio.run(self.fire(0, plan.warmup, 30.0, accepted, refused))
        print(f"bench: warm-up: {len(accepted)} events accepted, {warm.errors} not", flush=True)
        measured: list[str] = []
        cpu0 = self.cpu()
        started = datetime.now(timezone.utc)
        result = asyncio.run(self.fire(plan.warmup, plan.count, plan.seconds, measured, refused))
        ingest_end = datetime.now(timezone.utc)
        cpu1 = self.cpu()
        accepted += measured
        print(f"bench: ingest: {len(measured)} events accepted in {result.elapsed:.2f} s "
              f"({len(measured) / result.elapsed:.0f}/s), {result.errors} not; p50 "
              f"{pct(result.latencies, 0.5) * 1000:.2f} ms, p99 {pct(result.latencies, 0.99) * 1000:.2f} ms",
              flush=True)
        for sample in result.error_samples:
            print(f"    error: {sample}", flush=True)
        backlog = self.run_counts()
        if args.drain_after:
            self.start("worker")
        t_wait = time.monotonic()
        counts = self.wait_for_runs(t_wait + plan.wait_seconds)
        waited = time.monotonic() - t_wait
        cpu2 = self.cpu()
        first_start, last_finish, finished = self.run_window()
        after_ingest = self.finished_since(ingest_end)
        audit = self.audit(accepted)
        span = (last_finish - first_start).total_seconds() if first_start and last_finish else float("nan")
        drain_from = max(ingest_end, first_start) if first_start else ingest_end  # --drain-after: the worker's start
        drain = (last_finish - drain_from).total_seconds() if last_finish and last_finish > drain_from else float("nan")
        out = {
            "plan": plan.__dict__, "concurrency": args.concurrency, "web_concurrency": args.web_concurrency,
            "uses_ai": args.uses_ai, "drain_after": args.drain_after, "commands": self.commands,
            "warmup_accepted": len(accepted) - len(measured), "measured_accepted": len(measured),
            "errors": result.errors, "error_samples": result.error_samples, "refused": dict(refused),
            "elapsed": result.elapsed, "accepted_per_s": len(measured) / result.elapsed if result.elapsed else 0.0,
            "p50": pct(result.latencies, 0.5) * 1000, "p99": pct(result.latencies, 0.99) * 1000,
            "p999": pct(result.latencies, 0.999) * 1000, "max": max(result.latencies, default=0) * 1000,
            "cpu_ingest": self.cpu_per(cpu0, cpu1, len(measured)),
            "cpu_drain": self.cpu_per(cpu1, cpu2, max(after_ingest, 1)),
            "backlog_at_end": backlog, "run_counts": counts, "waited": waited, "started": started.isoformat(),
            "runs_finished": finished, "runs_span_s": span,
            "runs_per_s": finished / span if span == span and span else None,
            "finished_after_ingest": after_ingest, "drain_s": drain,
            "drain_runs_per_s": after_ingest / drain if drain == drain and drain > 0 else None,
            "worker_pool": self.worker_pool(), "audit": audit,
        }
        out["ok"] = (audit["lost_events"] == 0 and audit["lost_runs"] == 0 and audit["duplicated_events"] == 0
                     and audit["duplicated_runs"] == 0 and audit["accepted_twice"] == 0
                     and not counts.get("queued") and not counts.get("running"))
        return out

    def worker_pool(self) -> str:
        proc = self.stack.proc("worker")
        if proc is None:
            return "?"
        with open(proc.log_path, errors="replace") as log:
            text = log.read(20_000)  # the banner, at the start
        marker = "concurrency:"
        at = text.find(marker)
        return text[at + len(marker):].split("\n", 1)[0].strip() if at >= 0 else "?"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a small run (under a minute) as a sanity check")
    p.add_argument("--count", type=int, help="events in the measured run (default 30,000; --quick 5,000)")
    p.add_argument("--seconds", type=float, help="ceiling on the measured run (default 20; --quick 5)")
    p.add_argument("--concurrency", type=int, default=64, help="events in flight (default 64)")
    p.add_argument("--web-concurrency", type=int, default=2, help="WEB_CONCURRENCY for `web` (default 2)")
    p.add_argument("--drain-after", action="store_true",
                   help="start the worker only after the ingest: the accept without the worker, then its drain alone")
    p.add_argument("--uses-ai", action="store_true", help="the routine calls the model (the reference upstream)")
    p.add_argument("--commit", metavar="REV", help="test this commit (exported with git archive)")
    p.add_argument("--tag", help="suffix for the result files (ingest-<tag>.md)")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="extra environment for web and worker; repeatable")
    args = p.parse_args()
    harness.install_signal_handlers()
    git_commit(args.commit)
    stack = Stack(dict(item.split("=", 1) for item in args.env), REDIS_URL, db_prefix="bench_ingest_",
                  redis_patterns=REDIS_PATTERNS)
    started = time.monotonic()

    def body() -> int:
        if args.commit:
            harness.set_app_root(harness.export_commit(args.commit, stack.tmp))
        stack.setup_database()
        stack.start_upstream()
        stack.configure()
        ingest = Ingest(args, stack)
        result = ingest.run()
        text = report(args, stack, ingest, result, time.monotonic() - started)
        RESULTS.mkdir(parents=True, exist_ok=True)
        name = "ingest" + ("-quick" if args.quick else "") + (f"-{args.tag}" if args.tag else "")
        (RESULTS / f"{name}.md").write_text(text)
        (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=1, default=str))
        print(text.split("## Method")[0])
        print(f"bench: wrote {(RESULTS / f'{name}.md').relative_to(ROOT)}")
        return 0 if result["ok"] else 1

    return stack.run(body)


if __name__ == "__main__":
    sys.exit(main())
