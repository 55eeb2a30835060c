"""Where p99 under load comes from: c=16 closed-loop chat completions against the upstream called
directly and through the gateway, in interleaved rounds, each request's start and end kept.

    .venv/bin/python bench/tail_latency.py                       # 3 rounds of 6 s each
    .venv/bin/python bench/tail_latency.py --gc-log              # + the gateway's GC pauses and drainer cycles
    .venv/bin/python bench/tail_latency.py --env USAGE_FLUSH_SECONDS=1000   # a what-if (repeatable)
    .venv/bin/python bench/tail_latency.py --gc-log --commit 96b3288        # an earlier commit, the same way

Per run: p50, p99 and their ratio; the STALLS, gaps of more than 5 ms in which no request
completed although 16 were in flight (a pause of the whole process, not one slow request), their
count and total; and with --gc-log, the gateway's cyclic garbage collections (count, time,
objects found unreachable, i.e. reference cycles) and the usage drainer's cycles (thread CPU).
Output: bench/results/tail[-<tag>].md. Method and findings: bench/README.md ("p99 under load").
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import glob
import json
import os
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

import harness
from harness import RESULTS, git_commit
from loadgen import MESSAGES, RawClient, pct
from stack import Stack

REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/12")
STALL_SECONDS = 0.005
SITE = Path(__file__).resolve().parent / "tail_site"


async def closed_loop(base: str, model: str, key: str, concurrency: int, seconds: float) -> list[tuple]:
    """(start, end) of every request of `seconds` of load (after 0.5 s of warm-up), bounded in time."""
    client = RawClient(base, concurrency)
    body = json.dumps({"model": model, "messages": MESSAGES, "max_tokens": 64}).encode()
    payload = client.build("/v1/chat/completions", body, {"Authorization": f"Bearer {key}"})
    spans: list[tuple] = []

    async def worker(deadline: float) -> None:
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            await asyncio.wait_for(client.call(payload, False), timeout=30)
            spans.append((started, time.perf_counter()))

    try:
        await asyncio.gather(*(worker(time.perf_counter() + 0.5) for _ in range(concurrency)))
        spans.clear()
        gc.collect()
        gc.disable()  # the load generator's own pauses stay out of the figures
        try:
            await asyncio.gather(*(worker(time.perf_counter() + seconds) for _ in range(concurrency)))
        finally:
            gc.enable()
    finally:
        await client.aclose()
    return spans


def summary(spans: list[tuple]) -> dict:
    latencies = [end - start for start, end in spans]
    ends = sorted(end for _, end in spans)
    gaps = [b - a for a, b in zip(ends, ends[1:], strict=False)]
    stalls = [g for g in gaps if g > STALL_SECONDS]
    p50, p99 = pct(latencies, 0.5) * 1000, pct(latencies, 0.99) * 1000
    return {"n": len(spans), "req_s": len(spans) / (ends[-1] - ends[0]), "p50": p50, "p99": p99, "ratio": p99 / p50,
            "stalls": len(stalls), "stalled_ms": sum(stalls) * 1000, "longest_stall_ms": max(gaps) * 1000,
            "window": (spans[0][0], ends[-1])}


def gateway_log(prefix: str, window: tuple) -> dict:
    """The GC and drainer lines of the gateway process that fall in `window`."""
    collections, drains = [], []
    for path in glob.glob(prefix + ".*"):
        for line in Path(path).read_text().splitlines():
            kind, *fields = line.split()
            if float(fields[0]) < window[0] or float(fields[0]) > window[1]:
                continue
            (collections if kind == "gc" else drains).append([float(f) for f in fields])
    return {
        "gc_count": len(collections), "gc_ms": sum(c[1] for c in collections) * 1000,
        "gc_longest_ms": max((c[1] for c in collections), default=0) * 1000,
        "gc_unreachable": int(sum(c[3] for c in collections)),
        "drains": len([d for d in drains if d[1] > 0.001]),
        "drain_cpu_ms": statistics.median([d[1] * 1000 for d in drains if d[1] > 0.001] or [0]),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=float, default=6.0, help="measured seconds per run (default 6)")
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--gc-log", action="store_true", help="log the gateway's GC pauses and usage drainer cycles")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="extra gateway environment")
    p.add_argument("--tag", help="suffix for the result file (tail-<tag>.md)")
    p.add_argument("--commit", metavar="REV",
                   help="test this commit (exported with git archive), e.g. one before a change")
    args = p.parse_args()
    extra = dict(item.split("=", 1) for item in args.env)
    harness.install_signal_handlers()
    git_commit(args.commit)  # the code the run starts with
    stack = Stack(extra, REDIS_URL)
    log_prefix = str(stack.tmp / "tail")
    if args.gc_log:
        stack.gateway_env.update(PYTHONPATH=str(SITE), BENCH_TAIL_LOG=log_prefix)
    rows = []

    def body() -> int:
        stack.prepare(args.commit)
        stack.start_gateway()
        targets = {"direct": (stack.upstream, "echo-1"), "gateway": (stack.gateway, "bench/echo-1")}
        for rnd in range(1, args.rounds + 1):
            for target, (base, model) in targets.items():  # interleaved: A B A B ...
                s = summary(asyncio.run(closed_loop(base, model, stack.api_key, args.concurrency, args.seconds)))
                if args.gc_log and target == "gateway":
                    time.sleep(0.3)  # the last lines reach the file
                    s.update(gateway_log(log_prefix, s["window"]))
                stack.check_alive()
                rows.append({"round": rnd, "target": target, **s})
                print(f"  round {rnd} {target:7} n={s['n']} {s['req_s']:.0f} req/s p50={s['p50']:.2f} "
                      f"p99={s['p99']:.2f} ms p99/p50={s['ratio']:.2f} stalls>5ms={s['stalls']} "
                      f"({s['stalled_ms']:.0f} ms, longest {s['longest_stall_ms']:.1f})"
                      + (f" gc={s['gc_count']} in {s['gc_ms']:.0f} ms (longest {s['gc_longest_ms']:.1f}, "
                         f"unreachable {s['gc_unreachable']}) drainer cpu/cycle={s['drain_cpu_ms']:.1f} ms"
                         if "gc_count" in s else ""), flush=True)
        write_report(args, rows)
        return 0

    return stack.run(body)


def write_report(args, rows: list[dict]) -> None:
    name = "tail" + (f"-{args.tag}" if args.tag else "")
    gw = [r for r in rows if r["target"] == "gateway"]
    cols = ["round", "target", "n", "req/s", "p50 ms", "p99 ms", "p99/p50", "stalls > 5 ms", "stalled ms",
            "longest stall ms"]
    extra = ["GC runs", "GC ms", "longest GC ms", "unreachable", "drainer CPU ms/cycle"] if args.gc_log else []
    lines = [f"# p99 under load: c={args.concurrency}, {args.rounds} × {args.seconds:g} s, interleaved", "",
             f"- Date: {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; commit {git_commit()}; "
             f"gateway env: {' '.join(args.env) or '(defaults)'}",
             f"- Gateway medians: p99/p50 {statistics.median(r['ratio'] for r in gw):.2f}, "
             f"{statistics.median(r['req_s'] for r in gw):.0f} req/s, "
             f"stalled {statistics.median(r['stalled_ms'] for r in gw):.0f} ms of each {args.seconds:g} s", "",
             "| " + " | ".join(cols + extra) + " |", "|" + "---|" * len(cols + extra)]
    for r in rows:
        cells = [r["round"], r["target"], r["n"], f"{r['req_s']:.0f}", f"{r['p50']:.2f}", f"{r['p99']:.2f}",
                 f"{r['ratio']:.2f}", r["stalls"], f"{r['stalled_ms']:.0f}", f"{r['longest_stall_ms']:.1f}"]
        if extra:
            cells += ([r["gc_count"], f"{r['gc_ms']:.0f}", f"{r['gc_longest_ms']:.1f}", r["gc_unreachable"],
                       f"{r['drain_cpu_ms']:.1f}"] if "gc_count" in r else ["", "", "", "", ""])
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    (RESULTS / f"{name}.md").write_text("\n".join(lines) + "\n")
    print(f"bench: wrote {RESULTS / (name + '.md')}", flush=True)


if __name__ == "__main__":
    RESULTS.mkdir(parents=True, exist_ok=True)
    sys.exit(main())
