"""What CPU work beside a call does to the tail at c=1, and what one drainer cycle costs.

    .venv/bin/python bench/background_cpu.py                        # about 6 minutes -> results/background.md
    .venv/bin/python bench/background_cpu.py --shapes 35/500 --modes nice19 --rounds 3

1. **The tail beside a burner.** The gateway as the Procfile's web serves it (gunicorn, one worker, the
   host's drainer), with its drain held off (`USAGE_FLUSH_SECONDS=1000`, unless `--drain`), so that the only
   work beside the calls is a burner of ours: a process that spins BUSY ms of CPU every PERIOD ms (a shape,
   `--shapes BUSY/PERIOD,...`), at a priority (`--modes`: `nice0`, `nice19`, `idle` for `SCHED_IDLE`, `batch`
   for `SCHED_BATCH`). Each round runs, per shape, the gateway alone then beside each mode, one client
   sending one non-streamed chat completion at a time for `--seconds`. The default shapes spend 7 % of one
   core each, as the drain does at c=1 (drainer and PostgreSQL): in short frequent bursts, in bursts as long
   as a drain cycle at 0.5 s, and in long rare ones. Each round also runs, alone, a second gateway of the
   same stack whose drain is left as it is (every 0.5 s; its own spool folder), for the real drain beside
   the burner's figures (`--no-real-drain` leaves it out).
2. **One drainer cycle** (`--cycle-only` runs this part alone): the usage drainer's cycle
   (gateway/usage/writer.py `_cycle`, the calls log's drain with it) run in the stack's own database
   through `manage.py shell`, on 0, 250 and 2,500 usage records and as many calls-log lines (the lines
   about 500 calls a second leave in 0.5 s and in 5 s), its thread's CPU and wall time, median of three.

Output: results/background-<tag>.md. Method and findings: bench/README.md, "Background work and the tail at c=1".
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from datetime import datetime, timezone

import harness
from c1_tail_memory import figures
from harness import RESULTS, git_commit
from stack import Stack
from tail_latency import closed_loop

REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/12")
PRIORITY = {
    "nice0": lambda: None,
    "nice19": lambda: os.nice(19),
    "idle": lambda: os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0)),
    "batch": lambda: os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0)),
}
BURNER = """
import time
while True:
    started = time.perf_counter()
    while time.perf_counter() - started < {busy}:
        pass
    time.sleep({rest})
"""
# Run by `manage.py shell` in the stack's environment: the drainer's cycle over N usage records and N calls.
CYCLE = """
import statistics, time, uuid
from datetime import datetime, timezone
from gateway.models import account_model
from gateway.usage.call_log import call_log
from gateway.usage.writer import usage_writer
account = account_model().objects.first()
def spool(n):
    for _ in range(n):
        usage_writer.spool().append({"k": uuid.uuid4().hex, "a": account.pk, "m": "bench/echo-1",
            "s": "chat.completions", "i": 12, "o": 20, "r": uuid.uuid4().hex,
            "t": datetime.now(timezone.utc).isoformat(), "$": 1234})
        call_log.spool().append({"k": uuid.uuid4().hex, "t": time.time(), "a": account.pk, "g": account.group_id,
            "s": "chat.completions", "m": "bench/echo-1", "st": 200, "o": "ok", "l": 1.93, "r": uuid.uuid4().hex,
            "i": 12, "ot": 20, "$": 1234, "q": "bench/echo-1", "e": "", "ft": 0, "f": 1.7,
            "at": [{"model": "bench/echo-1", "server": "bench", "outcome": "ok", "status": 200, "seconds": 0.0012}]})
usage_writer._cycle(scan=True)
for n in (0, 250, 2500):
    cpu, wall = [], []
    for _ in range(3):
        spool(n)
        started, ticked = time.thread_time(), time.perf_counter()
        usage_writer._cycle(scan=True)
        cpu.append(time.thread_time() - started)
        wall.append(time.perf_counter() - ticked)
    print(f"CYCLE {n} {statistics.median(cpu) * 1000:.2f} {statistics.median(wall) * 1000:.2f}")
"""


def beside(base: str, stack: Stack, shape: tuple[float, float], mode: str, seconds: float) -> dict:
    """One c=1 run of the gateway at `base`, beside a burner of this shape and priority ('none': alone)."""
    burner = None
    if mode != "none":
        busy, period = shape
        code = BURNER.format(busy=busy / 1000, rest=(period - busy) / 1000)
        burner = subprocess.Popen([sys.executable, "-c", code], preexec_fn=PRIORITY[mode], start_new_session=True)
        time.sleep(0.3)
    try:
        return figures(asyncio.run(closed_loop(base, "bench/echo-1", stack.api_key, 1, seconds)))
    finally:
        if burner is not None:
            os.killpg(burner.pid, 9)
            burner.wait()


def drain_cycle(stack: Stack) -> list[dict]:
    out = harness.run_checked([sys.executable, "manage.py", "shell"], stack.env, stdin=CYCLE, timeout=300)
    rows = []
    for line in out.splitlines():
        if line.startswith("CYCLE "):
            n, cpu, wall = line.split()[1:]
            rows.append({"n": int(n), "cpu": float(cpu), "wall": float(wall)})
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--seconds", type=float, default=12.0, help="measured seconds per run (default 12)")
    p.add_argument("--shapes", default="1/14,35/500,350/5000", help="BUSY/PERIOD in ms, comma-separated")
    p.add_argument("--modes", default="nice0,nice19,idle", help="the burner's priorities: " + ", ".join(PRIORITY))
    p.add_argument("--drain", action="store_true", help="leave the gateway's drain as it is (every 0.5 s)")
    p.add_argument("--no-real-drain", action="store_true", help="no second gateway with its drain as it is")
    p.add_argument("--cycle-only", action="store_true", help="only the drainer cycle's cost")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="extra gateway environment")
    p.add_argument("--commit", metavar="REV", help="test this commit (exported with git archive)")
    p.add_argument("--tag", help="suffix for the result file (background-<tag>.md)")
    args = p.parse_args()
    shapes = [tuple(float(x) for x in s.split("/")) for s in args.shapes.split(",")]
    modes = args.modes.split(",")
    if any(m not in PRIORITY for m in modes) or any(len(s) != 2 or not 0 < s[0] < s[1] for s in shapes):
        p.error("a mode is one of " + ", ".join(PRIORITY) + "; a shape is BUSY/PERIOD with 0 < BUSY < PERIOD")
    extra = ({} if args.drain else {"USAGE_FLUSH_SECONDS": "1000"}) | dict(item.split("=", 1) for item in args.env)
    harness.install_signal_handlers()
    git_commit(args.commit)
    stack = Stack(extra, REDIS_URL)
    stack.server = "gunicorn"
    rows = []

    def body() -> int:
        stack.prepare(args.commit)
        cycles = drain_cycle(stack)
        for c in cycles:
            print(f"  drainer cycle, {c['n']} records and calls: CPU {c['cpu']:.2f} ms, wall {c['wall']:.2f} ms",
                  flush=True)
        if not args.cycle_only:
            stack.start_gateway()
            bases = {"burner": stack.gateway}
            if not args.no_real_drain:  # as it is: its drain every 0.5 s, its spools its own
                stack.gateway_env = {**stack.gateway_env, "USAGE_FLUSH_SECONDS": "0.5",
                                     "GATEWAY_VAR_DIR": str(stack.tmp / "var-drain")}
                stack.start_gateway(name="gateway-drain")
                bases["drain"] = stack.gateway
            for rnd in range(1, args.rounds + 1):
                runs = [(shape, mode) for shape in shapes for mode in ["none", *modes]]
                for shape, mode in runs + ([(None, "drain")] if "drain" in bases else []):
                    s = beside(bases["drain" if shape is None else "burner"], stack, shape,
                               "none" if shape is None else mode, args.seconds)
                    stack.check_alive()
                    rows.append({"round": rnd, "shape": shape, "mode": mode, **s})
                    what = "the real drain" if shape is None else f"{shape[0]:g}/{shape[1]:g} ms {mode}"
                    print(f"  round {rnd} {what} n={s['n']} p50={s['p50']:.2f} p99={s['p99']:.2f} "
                          f"p99.9={s['p999']:.2f}", flush=True)
        write_report(args, extra, cycles, rows)
        return 0

    return stack.run(body)


def write_report(args, extra: dict, cycles: list[dict], rows: list[dict]) -> None:
    lines = [f"# Background work and the tail at c=1 ({datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, "
             f"commit {git_commit()}, {harness.cpu_model()} x{os.cpu_count()})", "",
             "## One drainer cycle (usage records and calls-log lines, as many of each)", "",
             "| records and calls | CPU ms (the drainer's thread) | wall ms |", "|--:|--:|--:|"]
    lines += [f"| {c['n']} | {c['cpu']:.2f} | {c['wall']:.2f} |" for c in cycles]
    if rows:
        env = " ".join(f"{k}={v}" for k, v in extra.items()) or "none"
        lines += ["", f"## The gateway at c=1 beside a burner ({args.rounds} rounds of {args.seconds:g} s; gateway "
                  f"environment: {env})", "", "| burner: busy/period ms | priority | p50 ms (median) | "
                  "p99 ms (median) | p99 ms (rounds) | p99.9 ms (median) |", "|---|---|--:|--:|--:|--:|"]
        for shape, mode in dict.fromkeys((r["shape"], r["mode"]) for r in rows):
            mine = [r for r in rows if r["shape"] == shape and r["mode"] == mode]
            med = {k: statistics.median(r[k] for r in mine) for k in ("p50", "p99", "p999")}
            each = ", ".join(f"{r['p99']:.2f}" for r in mine)
            what = ("none: the second gateway, its drain every 0.5 s | –" if shape is None else
                    f"{shape[0]:g}/{shape[1]:g} | {'alone' if mode == 'none' else mode}")
            lines.append(f"| {what} | {med['p50']:.2f} | **{med['p99']:.2f}** | {each} | {med['p999']:.2f} |")
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"background{'-' + args.tag if args.tag else ''}.md"
    path.write_text("\n".join(lines) + "\n")
    print(f"bench: {path}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
