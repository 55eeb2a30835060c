"""The Markdown report of bench/ingest.py: the figures, the audit, the CPU per event and per run,
the method, and the tails of the `web` and `worker` logs. See bench/README.md."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from typing import TYPE_CHECKING

import harness
from harness import HUGE, git_commit

if TYPE_CHECKING:
    from ingest import Ingest
    from stack import Stack


def report(args, stack: Stack, ingest: Ingest, r: dict, duration: float) -> str:
    a, ci, cd = r["audit"], r["cpu_ingest"], r["cpu_drain"]
    f = lambda x, d=2: "–" if x is None or x != x else f"{x:,.{d}f}"  # noqa: E731
    lines = [
        f"# Webhook ingest — {ingest.plan.name} run", "",
        f"- Date: {datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC}; wall time {duration:.0f} s",
        f"- Machine: {os.cpu_count()} CPUs, {harness.cpu_model()}; load generator, web, worker, PostgreSQL and Redis "
        f"share it; load average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
        "- Versions: " + harness.versions(stack.redis_url, ('Django', 'gunicorn', 'uvicorn', 'uvicorn-worker', 'uvloop',
                                                        'httptools', 'celery', 'kombu', 'psycopg', 'redis')),
        f"- Commit: {git_commit()}", "",
        "## Figures", "",
        "| accepted events/s | accept p50 ms | accept p99 ms | accept max ms | not accepted "
        "| runs completed/s (one worker) "
        "| of which after the ingest ended | lost | duplicated |",
        "|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
        f"| **{f(r['accepted_per_s'], 0)}** | {f(r['p50'])} | {f(r['p99'])} | {f(r['max'])} | {r['errors']} | "
        f"**{f(r['runs_per_s'], 0)}** | {f(r['drain_runs_per_s'], 0)} | "
        f"{a['lost_events'] + a['lost_runs']} | "
        f"{a['duplicated_events'] + a['duplicated_runs'] + a['accepted_twice']} |",
        "",
        f"- Measured: {r['measured_accepted']} events accepted in {r['elapsed']:.2f} s at c={r['concurrency']} "
        f"(plus {r['warmup_accepted']} warm-up events before, checked the same way); "
        f"refused: {r['refused'] or 'none'}.",
        f"- Runs: {r['runs_finished']} finished ({r['run_counts']}) between the first run's start and the last one's "
        f"end, {f(r['runs_span_s'])} s; backlog when the ingest ended {r['backlog_at_end']}; "
        f"{r['finished_after_ingest']} finished after it, in {f(r['drain_s'])} s "
        f"({'the worker started only then' if r['drain_after'] else 'the worker alone, the web idle'}). "
        f"Waited {r['waited']:.1f} s for the last run (bound {ingest.plan.wait_seconds:.0f} s).",
        f"- Audit ({'**passed**' if r['ok'] else '**FAILED**'}): {a['accepted']} events accepted; "
        f"{a['events_stored']} stored; accepted but not stored {a['lost_events']}; accepted without a run "
        f"{a['lost_runs']}; event ids stored twice {a['duplicated_events']}; events with two runs "
        f"{a['duplicated_runs']}; ids accepted twice {a['accepted_twice']}; stored without an accept reaching the "
        f"client {a['stored_not_acknowledged']}; runs {a['runs_total']}; deliveries {a['deliveries']}; inbox "
        f"messages {a['inbox_messages']}.",
        f"- CPU ms per accepted event during the ingest: web (gunicorn master + workers) {f(ci['web'])} "
        f"({f(ci['web_cores'])} cores busy), worker {f(ci['worker'])}, PostgreSQL {f(ci['postgres'])}, Redis "
        f"{f(ci['redis'])}, load generator {f(ci['client'])}; other processes kept {f(ci['others_cores'])} cores busy. "
        f"PostgreSQL sessions opened per event {f(ci['pg_sessions'])}, transactions {f(ci['pg_commits'])}.",
        f"- CPU ms per run finished after the ingest: worker (Celery master + pool) {f(cd['worker'])}, PostgreSQL "
        f"{f(cd['postgres'])} (live backends only: a session opened and closed between two readings is missed), Redis "
        f"{f(cd['redis'])}; other processes kept {f(cd['others_cores'])} cores busy. PostgreSQL sessions opened per "
        f"run {f(cd['pg_sessions'])}, transactions {f(cd['pg_commits'])}.",
        "", "## Method", "",
        f"- `web`: the Procfile's line, `{r['commands']['web']}`, run by `sh -c` with PORT={ingest.port} and "
        f"WEB_CONCURRENCY={r['web_concurrency']} (the bind moved from 0.0.0.0 to 127.0.0.1: loopback only).",
        f"- `worker`: the Procfile's line, `{r['commands']['worker']}` — one Celery worker, pool `{r['worker_pool']}` "
        f"(Celery's default: one prefork process per core); "
        + ("started after the ingest ended (the queue drained by the worker alone)." if r["drain_after"] else
           "running during the ingest, as deployed (it competes with `web` for the cores)."),
        f"- Database `{stack.db_name}` (fresh, migrated), Redis `{stack.redis_url}` (broker and counters). "
        "The per-address "
        f"ceiling (RATE_LIMIT_HOOKS) and the per-routine ceiling (WEBHOOK_EVENTS_PER_MINUTE) raised to {HUGE:,} "
        f"through the environment: counted, never reached; every other check of the ingest stays on "
        f"(signature, duplicate mark in Redis, duplicate look-up in PostgreSQL, event and queued run stored in one "
        f"transaction before the answer). Effective settings: {stack.settings_line}.",
        f"- Routine: created through `POST /api/v1/routines` with the bench account's API key: trigger `webhook`, a "
        f"generated secret, delivery target `inapp`, `uses_ai` {str(r['uses_ai']).lower()}"
        + (" (model `bench/echo-1`, the reference upstream: every run is a model call)." if r["uses_ai"] else
           " (no model call: a run answers with its prompt and delivers it to the inbox, so the worker figure is "
           "the pipeline's own cost: claim, answer, one delivery task, settle)."),
        f"- Events: `POST {'/api/v1/hooks/<token>'}`, a small JSON body, a unique `X-Event-Id` and `X-Svc-Signature: "
        f"sha256=<hex HMAC-SHA256 of the body>`; a closed loop of {r['concurrency']} keep-alive connections from this "
        f"process (raw asyncio sockets), up to {ingest.plan.count:,} events or {ingest.plan.seconds:g} s. An event "
        f"counts as accepted on `200 {{\"ok\": true, \"queued\": true, \"event_id\": <its id>}}`; accept latency is to "
        f"the last byte of that answer.",
        "- Lost: an accepted id without its event row, or without a run. Duplicated: an id stored twice, an event "
        "with two runs, or an id accepted twice. Runs completed per second: finished runs ÷ (last `finished_at` − "
        "first `started_at`).",
    ]
    for name in ("web", "worker"):
        proc = stack.proc(name)
        if proc is not None:
            lines += ["", f"## {name} log (tail)", "", "```", proc.log_tail(1500).strip(), "```"]
    return "\n".join(lines) + "\n"
