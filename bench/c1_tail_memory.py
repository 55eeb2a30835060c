"""The tail at c=1 and the web process's memory: one client sending one chat completion at a time
(non-streamed) to the upstream directly and through one gateway process, in interleaved rounds; the
gateway's resident memory when it has started and after the load.

    .venv/bin/python bench/c1_tail_memory.py                      # 3 rounds of 8 s each
    .venv/bin/python bench/c1_tail_memory.py --commit 3405c83     # an earlier commit, the same way
    .venv/bin/python bench/c1_tail_memory.py --env GATEWAY_X=1    # a what-if (repeatable)

Per run: requests, p50, p99, p99.9 and the longest, in ms; for the gateway also its RSS (VmRSS of
/proc/<pid>/status, MB) after start-up (before any request), after the first round and at the end,
and its peak (VmHWM), then after 8 s of load at c=16 and at c=64 (`--load`). Compare two commits
by running it for each, interleaved (A B B A), and taking the medians. `--server gunicorn` serves the
gateway as the Procfile's web does, one worker and the host's drainer beside it. `--cycles` logs the usage
drainer's cycles in every process of the gateway and counts the slow requests (over twice the run's p50)
that overlapped one; `--cpu` gives the CPU each process spent per gateway request over the c=1 rounds.
Output: bench/results/c1-<tag>.md. Method and findings: bench/README.md ("p99 at c=1 and the web process's memory").
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import os
import statistics
import sys
from datetime import datetime, timezone
from pathlib import Path

import harness
from harness import RESULTS, git_commit
from loadgen import pct
from stack import Stack
from tail_latency import SITE, closed_loop

REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/12")


def memory_mb(pid: int) -> dict[str, float]:
    """The process's resident set now and its peak, in MB."""
    found = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                found[name] = int(value.split()[0]) / 1024
    return {"rss": found["VmRSS"], "peak": found["VmHWM"]}


def figures(spans: list[tuple]) -> dict:
    latencies = [(end - start) * 1000 for start, end in spans]
    return {"n": len(latencies), "p50": pct(latencies, 0.5), "p99": pct(latencies, 0.99),
            "p999": pct(latencies, 0.999), "max": max(latencies)}


def cycles_beside(prefix: str, runs: list[list[tuple]]) -> list[dict]:
    """Per process of the gateway that ran drainer cycles during the gateway's runs: how many, their
    wall and CPU time (medians), the share of the runs' time they covered, and how many of the slow
    requests (over twice their run's p50) overlapped one."""
    slow = []
    for spans in runs:
        p50 = pct([end - start for start, end in spans], 0.5)
        slow += [(start, end) for start, end in spans if end - start > 2 * p50]
    windows = [(spans[0][0], spans[-1][1]) for spans in runs]
    found = []
    for path in sorted(glob.glob(prefix + ".*")):
        cycles = []
        for line in Path(path).read_text().splitlines():
            kind, *fields = line.split()
            start = float(fields[0])
            if kind == "drain" and any(a <= start <= b for a, b in windows):
                cycles.append((start, start + float(fields[2]), float(fields[1])))
        if not cycles:
            continue
        found.append({
            "pid": path.rsplit(".", 1)[1], "cycles": len(cycles),
            "wall_ms": statistics.median((b - a) * 1000 for a, b, _ in cycles),
            "cpu_ms": statistics.median(cpu * 1000 for *_, cpu in cycles),
            "cover": sum(b - a for a, b, _ in cycles) / sum(b - a for a, b in windows),
            "slow": len(slow), "overlapped": sum(1 for s, e in slow if any(a < e and s < b for a, b, _ in cycles))})
    return found


def cpu_now(stack: Stack, web: int) -> dict[str, float]:
    """CPU seconds so far of each process a c=1 call goes through or that works beside it."""
    gateway = stack.proc("gateway").popen.pid
    others = [pid for pid in harness.descendants(gateway) if pid != web]  # gunicorn's dirty arbiter and drainer
    found = {"web worker" if stack.server == "gunicorn" else "gateway": harness.proc_cpu_seconds(web),
             "upstream": harness.proc_cpu_seconds(stack.proc("upstream").popen.pid),
             "load generator (this process)": harness.proc_cpu_seconds(os.getpid()),
             "PostgreSQL backends of the database": sum(harness.postgres_backends_cpu(stack.db_name).values())}
    if stack.server == "gunicorn":
        found["gunicorn's master (and its dirty arbiter and drainer)"] = sum(
            harness.proc_cpu_seconds(pid) for pid in [gateway, *others])
    return found


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=float, default=8.0, help="measured seconds per run (default 8)")
    p.add_argument("--load", type=int, nargs="*", default=[16, 64], metavar="C",
                   help="after the rounds, 8 s of load at each of these concurrencies before the last memory reading")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="extra gateway environment")
    p.add_argument("--tag", help="suffix for the result file (c1-<tag>.md)")
    p.add_argument("--commit", metavar="REV", help="test this commit (exported with git archive)")
    p.add_argument("--cycles", action="store_true", help="log the drainer's cycles beside the slow requests")
    p.add_argument("--cpu", action="store_true", help="CPU per gateway request of each process, over the c=1 rounds")
    p.add_argument("--server", choices=("uvicorn", "gunicorn"), default="uvicorn",
                   help="uvicorn alone (default), or the Procfile's gunicorn with one worker and the host's drainer "
                        "(the memory is then the worker's)")
    args = p.parse_args()
    extra = dict(item.split("=", 1) for item in args.env)
    harness.install_signal_handlers()
    git_commit(args.commit)
    stack = Stack(extra, REDIS_URL)
    stack.server = args.server
    log_prefix = str(stack.tmp / "cycles")
    if args.cycles:
        stack.gateway_env.update(PYTHONPATH=str(SITE), BENCH_TAIL_LOG=log_prefix)
    rows, memory, gateway_runs, cpu = [], {}, [], {}

    def body() -> int:
        stack.prepare(args.commit)
        web = stack.web_pid(stack.start_gateway())
        memory["started"] = memory_mb(web)
        targets = {"direct": (stack.upstream, "echo-1"), "gateway": (stack.gateway, "bench/echo-1")}
        for rnd in range(1, args.rounds + 1):
            for target, (base, model) in targets.items():  # interleaved: A B A B ...
                before = cpu_now(stack, web) if args.cpu and target == "gateway" else {}
                spans = asyncio.run(closed_loop(base, model, stack.api_key, 1, args.seconds))
                for name, seconds in cpu_now(stack, web).items() if before else ():
                    cpu[name] = cpu.get(name, 0.0) + seconds - before[name]
                s = figures(spans)
                stack.check_alive()
                if target == "gateway":
                    gateway_runs.append(spans)
                rows.append({"round": rnd, "target": target, **s})
                print(f"  round {rnd} {target:7} n={s['n']} p50={s['p50']:.2f} p99={s['p99']:.2f} "
                      f"p99.9={s['p999']:.2f} max={s['max']:.1f} ms", flush=True)
            if rnd == 1:
                memory["after one round"] = memory_mb(web)
        memory["after the c=1 rounds"] = memory_mb(web)
        for concurrency in args.load:  # the load gateway_latency.py puts on it after c=1
            asyncio.run(closed_loop(stack.gateway, "bench/echo-1", stack.api_key, concurrency, 8.0))
            stack.check_alive()
            memory[f"after 8 s at c={concurrency}"] = memory_mb(web)
        for when, m in memory.items():
            print(f"  gateway memory {when}: RSS {m['rss']:.1f} MB (peak {m['peak']:.1f})", flush=True)
        calls = sum(len(spans) for spans in gateway_runs)
        per_call = {name: seconds * 1000 / calls for name, seconds in cpu.items()}
        for name, ms in per_call.items():
            print(f"  CPU per gateway request: {name} {ms:.2f} ms", flush=True)
        cycles = cycles_beside(log_prefix, gateway_runs) if args.cycles else []
        for c in cycles:
            print(f"  drainer cycles in pid {c['pid']}: {c['cycles']}, wall {c['wall_ms']:.1f} ms, "
                  f"CPU {c['cpu_ms']:.2f} ms, {c['cover']:.1%} of the time; "
                  f"{c['overlapped']} of {c['slow']} slow requests overlapped one",
                  flush=True)
        write_report(args, rows, memory, per_call, cycles)
        return 0

    return stack.run(body)


def write_report(args, rows: list[dict], memory: dict, cpu: dict, cycles: list[dict]) -> None:
    lines = [f"# c=1 tail and memory ({datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, commit {git_commit()})", "",
             f"{args.rounds} interleaved rounds of {args.seconds:g} s, one request at a time, non-streamed; the "
             f"gateway served by {args.server}" + (" (the Procfile's web, one worker; memory: the worker's)"
                                                   if args.server == "gunicorn" else "") + ".", "",
             "| round | target | requests | p50 ms | p99 ms | p99.9 ms | max ms |", "|--:|---|--:|--:|--:|--:|--:|"]
    lines += [f"| {r['round']} | {r['target']} | {r['n']} | {r['p50']:.2f} | {r['p99']:.2f} | {r['p999']:.2f} | "
              f"{r['max']:.1f} |" for r in rows]
    for target in ("direct", "gateway"):
        mine = [r for r in rows if r["target"] == target]
        median = {key: statistics.median(r[key] for r in mine) for key in ("n", "p50", "p99", "p999", "max")}
        lines.append(f"| median | {target} | {median['n']:.0f} | {median['p50']:.2f} | {median['p99']:.2f} | "
                     f"{median['p999']:.2f} | {median['max']:.1f} |")
    lines += ["", "| gateway memory | RSS MB | peak MB |", "|---|--:|--:|"]
    lines += [f"| {when} | {m['rss']:.1f} | {m['peak']:.1f} |" for when, m in memory.items()]
    if cpu:
        lines += ["", "| CPU per gateway request, over the c=1 rounds | ms |", "|---|--:|"]
        lines += [f"| {name} | {ms:.2f} |" for name, ms in cpu.items()]
    if cycles:
        lines += ["", "| drainer cycles in pid | cycles | wall ms (median) | CPU ms (median) | share of the time | "
                  "slow requests (> 2 × p50) | of them overlapping a cycle |", "|---|--:|--:|--:|--:|--:|--:|"]
        lines += [f"| {c['pid']} | {c['cycles']} | {c['wall_ms']:.1f} | {c['cpu_ms']:.2f} | {c['cover']:.1%} | "
                  f"{c['slow']} | {c['overlapped']} |" for c in cycles]
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"c1{'-' + args.tag if args.tag else ''}.md"
    path.write_text("\n".join(lines) + "\n")
    print(f"bench: {path}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
