"""Batches: lines per second through one batch worker, and the live path's latency while a batch runs.

The private stack of the fault tests (tests/faults/stack.py: its own PostgreSQL and Redis, the Procfile's
web with 2 workers, worker, batch-worker with one batch at a time, beat, the reference upstream), the upstream
answering every call after `--latency-ms` (100 by default).

1. Throughput: a batch of `--lines` chat lines (300) made through /v1/files and /v1/batches, timed from its
   first line's answer to its last (the lines' own `ended_at`), at BATCH_CONCURRENCY lines in flight
   (`--concurrency`, 8) and BATCH_CONCURRENCY_PER_SERVER to the one server (`--per-server`, 4): the defaults.
2. The live path beside a batch: a batch of `--live-batch` lines (1000) runs while live chat completions are
   made at concurrency 2; in `--rounds` interleaved rounds (6) the batch worker is paused (SIGSTOP of its
   process group) for one half-round and running for the other, `--calls` live calls (40) in each half, until
   the batch ends (rounds once it has ended are not counted; 3 at least). The report gives the median over
   rounds of each half's p50 and p90, and their ratio.

    .venv/bin/python bench/batch_throughput.py            # about 2 minutes -> bench/results/batches.md
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.faults.stack import running_stack, wait_for  # noqa: E402

MODEL = "ref/echo-1"


def make_batch(stack, headers: dict, lines: int, tag: str) -> str:
    def line(i: int) -> str:
        body = {"model": MODEL, "messages": [{"role": "user", "content": f"{tag} {i}"}]}
        return json.dumps({"custom_id": f"{tag}-{i}", "method": "POST", "url": "/v1/chat/completions", "body": body})

    content = "".join(line(i) + "\n" for i in range(lines)).encode()
    uploaded = httpx.post(f"{stack.url}/v1/files", headers=headers, data={"purpose": "batch"},
                          files={"file": ("in.jsonl", content)}, timeout=60).json()
    created = httpx.post(f"{stack.url}/v1/batches", headers=headers, timeout=60,
                         json={"input_file_id": uploaded["id"], "endpoint": "/v1/chat/completions",
                               "completion_window": "24h"})
    created.raise_for_status()
    return created.json()["id"]


def ended(stack, batch_id: str) -> int:
    return stack.pg.query("SELECT count(*) FROM batches_batchline WHERE batch_id = %s AND ended_at IS NOT NULL",
                          (batch_id,))[0][0]


def throughput(stack, headers: dict, lines: int) -> float:
    batch_id = make_batch(stack, headers, lines, "tp")
    wait_for(lambda: ended(stack, batch_id) == lines, 600, "the throughput batch")
    first, last = stack.pg.query("SELECT min(ended_at), max(ended_at) FROM batches_batchline WHERE batch_id = %s",
                                 (batch_id,))[0]
    return (lines - 1) / (last - first).total_seconds()


def live_calls(stack, headers: dict, count: int, tag: str) -> list[float]:
    def one(i: int) -> float:
        body = {"model": MODEL, "messages": [{"role": "user", "content": f"live {tag} {i}"}]}
        started = time.perf_counter()
        answer = httpx.post(f"{stack.url}/v1/chat/completions", headers=headers, json=body, timeout=30)
        assert answer.status_code == 200, answer.text
        return (time.perf_counter() - started) * 1000

    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(one, range(count)))


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def beside_a_batch(stack, headers: dict, lines: int, rounds: int, calls: int) -> dict:
    batch_id = make_batch(stack, headers, lines, "bg")
    wait_for(lambda: ended(stack, batch_id) > 20, 120, "the background batch running")
    group = os.getpgid(stack.batch_worker.pid)
    halves = {"paused": [], "running": []}
    for r in range(rounds):
        order = ("paused", "running") if r % 2 == 0 else ("running", "paused")
        measured = {}
        for half in order:
            os.killpg(group, signal.SIGSTOP if half == "paused" else signal.SIGCONT)
            before = ended(stack, batch_id)
            latencies = live_calls(stack, headers, calls, f"{r}{half}")
            measured[half] = (pct(latencies, 0.5), pct(latencies, 0.9), ended(stack, batch_id) - before)
        if measured["running"][2] == 0 or ended(stack, batch_id) == lines:
            break  # the batch has ended (or never ran in this round): this round has no half beside it
        for half, row in measured.items():
            halves[half].append(row)
    os.killpg(group, signal.SIGCONT)
    assert len(halves["running"]) >= 3, f"only {len(halves['running'])} rounds beside a running batch"
    return {half: {"p50": statistics.median(row[0] for row in rows), "p90": statistics.median(row[1] for row in rows),
                   "lines": sum(row[2] for row in rows)} for half, rows in halves.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=300)
    parser.add_argument("--live-batch", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--latency-ms", type=float, default=100)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--per-server", type=int, default=4)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "batches.md"))
    args = parser.parse_args()
    env = {"BATCH_CONCURRENCY": str(args.concurrency), "BATCH_CONCURRENCY_PER_SERVER": str(args.per_server),
           "BATCH_SWEEP_SECONDS": "60"}
    with running_stack(**env) as stack:
        stack.upstream_control(latency_ms=args.latency_ms, record=False)
        account = stack.seed({"op": "account", "name": f"bench-{os.urandom(3).hex()}"})
        headers = {"Authorization": f"Bearer {account['key']}"}
        live_calls(stack, headers, 20, "warm")
        rate = throughput(stack, headers, args.lines)
        print(f"throughput: {rate:.1f} lines/s", flush=True)
        beside = beside_a_batch(stack, headers, args.live_batch, args.rounds, args.calls)
    paused, running = beside["paused"], beside["running"]
    commit = os.popen(f"git -C {ROOT} rev-parse --short HEAD").read().strip()
    report = "\n".join([
        f"# Batches at commit {commit}",
        "",
        f"Upstream latency {args.latency_ms:g} ms; one batch worker, {args.concurrency} lines of a batch in flight, "
        f"{args.per_server} to the server; "
        f"`{' '.join(sys.argv[1:]) or 'defaults'}`.",
        "",
        f"- Throughput: **{rate:.1f} lines/s** over a {args.lines}-line batch "
        f"(ceiling {min(args.concurrency, args.per_server) / (args.latency_ms / 1000):.0f} lines/s at this latency "
        "and concurrency).",
        "",
        f"Live chat completions at concurrency 2 beside a {args.live_batch}-line batch, {args.rounds} interleaved "
        f"rounds of {args.calls} calls per half (the batch worker paused by SIGSTOP in one half):",
        "",
        "| batch worker | live p50 ms | live p90 ms | batch lines ended meanwhile |",
        "|---|---|---|---|",
        f"| paused | {paused['p50']:.1f} | {paused['p90']:.1f} | {paused['lines']} |",
        f"| running | {running['p50']:.1f} | {running['p90']:.1f} | {running['lines']} |",
        "",
        f"p50 ratio running / paused: **{running['p50'] / paused['p50']:.3f}**; "
        f"p90 ratio: {running['p90'] / paused['p90']:.3f}.",
        "",
    ])
    Path(args.out).write_text(report)
    print(report)


if __name__ == "__main__":
    main()
