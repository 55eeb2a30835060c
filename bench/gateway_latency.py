"""The gateway's added latency and throughput on /v1/chat/completions, against the reference upstream,
side by side with LiteLLM's proxy.

    .venv/bin/python bench/gateway_latency.py               # full run (about 7 minutes; + 1 to install LiteLLM)
    .venv/bin/python bench/gateway_latency.py --quick       # small sanity run (about 1.5 minutes)
    .venv/bin/python bench/gateway_latency.py --no-litellm  # direct and gateway only (as before issue 13)
    .venv/bin/python bench/gateway_latency.py --profile     # c=1 non-stream under py-spy -> results/profile.txt
    .venv/bin/python bench/gateway_latency.py --pool 3      # the gateway's model is a pool of three deployments
    .venv/bin/python bench/gateway_latency.py --cache 3600  # a response cache hit at c=1 and 16 -> latest-cache.md
    .venv/bin/python bench/gateway_latency.py --price       # models priced, the group with budgets (issue 25)
    .venv/bin/python bench/gateway_latency.py --replay      # an Idempotency-Key replay, c=1 and 16 -> latest-replay.md
    .venv/bin/python bench/gateway_latency.py --otlp-sink   # traces on (issue 27), exported to a sink that discards
    .venv/bin/python bench/gateway_latency.py --guardrails pii-redact --prompt-bytes 2048  # the group's guardrails
    .venv/bin/python bench/gateway_latency.py --help        # --stream, --client httpx, --env NAME=VALUE,
                                                            # --tag, --rounds

Everything runs on loopback and stops itself: a fresh PostgreSQL database (dropped at the end), Redis
database 12 (its gw:* keys deleted), the reference upstream (`python -m tests.upstream`), ONE gateway
web process (uvicorn, one worker) and ONE LiteLLM proxy process (litellm_proxy.py). The load
generator is this process. The webhook ingest benchmark is bench/ingest.py. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections import defaultdict
from dataclasses import dataclass

import guard_cost
import harness
from harness import PY, RESULTS, git_commit, run_checked
from loadgen import CLIENTS, measure, summarize
from otlp_sink import OtlpSink
from report import cell_row, write_report
from stack import Stack

REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/12")


@dataclass(frozen=True)
class Plan:
    name: str
    rounds: int
    seconds: float  # ceiling on one measured run (one target, one round)
    warmup_seconds: float
    counts: dict  # concurrency -> requests in one measured run (whichever of count/time comes first)
    concurrencies: tuple = (1, 16, 64)
    modes: tuple = ("non-stream", "stream")


FULL = Plan("full", rounds=3, seconds=8.0, warmup_seconds=1.0, counts={1: 2000, 16: 6000, 64: 8000})
QUICK = Plan("quick", rounds=1, seconds=1.5, warmup_seconds=0.3, counts={1: 300, 16: 1000, 64: 1500})


def run_benchmark(args, stack: Stack) -> None:
    plan = QUICK if args.quick else FULL
    if args.rounds:
        plan = Plan(plan.name, args.rounds, plan.seconds, plan.warmup_seconds, plan.counts)
    if args.cache:
        plan = Plan(plan.name, plan.rounds, plan.seconds, plan.warmup_seconds, plan.counts, concurrencies=(1, 16))
    if args.concurrency:
        plan = Plan(plan.name, plan.rounds, plan.seconds, plan.warmup_seconds, plan.counts,
                    concurrencies=args.concurrency)
    if args.replay:  # a replay is of a whole answer: streams are not kept
        plan = Plan(plan.name, plan.rounds, plan.seconds, plan.warmup_seconds, plan.counts, concurrencies=(1, 16),
                    modes=("non-stream",))
    require = ("X-Cache", "hit") if args.cache else ("Idempotent-Replayed", "true") if args.replay else None
    replay_headers = {"Idempotency-Key": f"bench-replay-{os.getpid()}"} if args.replay else None
    messages = [{"role": "user", "content": guard_cost.prompt(args.prompt_bytes)}] if args.prompt_bytes else None
    stack.settings_line = stack.effective_settings()
    stack.start_gateway()
    if args.surface == "messages":  # an Anthropic server behind /v1/messages
        targets = {"direct": (stack.upstream, "claude-echo", stack.api_key),
                   "gateway": (stack.gateway, "bench-an/claude-echo", stack.api_key)}
    else:
        targets = {"direct": (stack.upstream, "echo-1", stack.api_key),
                   "gateway": (stack.gateway, stack.model, stack.api_key)}
    litellm = None
    if not args.no_litellm:
        from litellm_proxy import MODEL, LiteLLM

        litellm = LiteLLM(stack)
        litellm.start()
        targets["litellm"] = (litellm.base, MODEL, litellm.key)
    costs = harness.backend_costs(stack.db_url, stack.redis_url)
    usage_before = stack.usage_records()
    cells = []
    gateway_requests = 0
    snap_total: dict = defaultdict(float)
    started = time.monotonic()
    for mode in plan.modes:
        stream = mode == "stream"
        for c in plan.concurrencies:
            cell = {"mode": mode, "c": c, "targets": list(targets), **{t: [] for t in targets}}
            for rnd in range(plan.rounds):
                for target, (base, model, key) in targets.items():  # A B C A B C ...
                    gateway = target == "gateway"
                    before = harness.backend_snapshot(stack.db_name, stack.redis_url) if gateway else None
                    cpu_before = stack.cpu_snapshot()
                    run = asyncio.run(measure(args.client, base, model, key, stream, c, plan.counts[c],
                                              plan.seconds, plan.warmup_seconds, args.surface,
                                              require=require if gateway else None,
                                              headers=replay_headers if gateway else None,
                                              messages=messages))
                    if gateway:
                        time.sleep(0.2)  # let the last replies' metering finish
                    cpu_after = stack.cpu_snapshot()
                    if gateway:
                        after = harness.backend_snapshot(stack.db_name, stack.redis_url)
                        for k, v in harness.snapshot_delta(before, after).items():
                            snap_total[k] += v
                        gateway_requests += run.sent
                    s = summarize(run)
                    s["cpu"] = stack.cpu_delta(cpu_before, cpu_after, run.sent)
                    cell[target].append(s)
                    shown = ("client", "upstream", target) if target != "direct" else ("client", "upstream")
                    print(f"  {mode:10} c={c:<3} round {rnd + 1}/{plan.rounds} {target:7} n={s['n']:<5} "
                          f"err={s['errors']} p50={s['p50']:.2f}ms p99={s['p99']:.2f}ms {s['req_s']:.0f} req/s"
                          + (f" ttft50={s['ttft_p50']:.2f}ms" if s["ttft_p50"] is not None else "")
                          + " cpu ms/req " + " ".join(f"{k}={s['cpu'][k]:.2f}" for k in shown)
                          + f"; others busy {s['cpu']['others_cores']:.2f} cores", flush=True)
                    for sample in run.error_samples:
                        print(f"    error: {sample}", flush=True)
                    stack.check_alive()
            cells.append(cell)
    duration = time.monotonic() - started
    time.sleep(1.5)  # the gateway drains its usage spool in the background (gateway/usage/writer.py)
    usage_written = stack.usage_records() - usage_before
    per_request = {k: v / gateway_requests for k, v in snap_total.items()} if gateway_requests else {}
    rows = [cell_row(cell) for cell in cells]
    write_report(args, plan, stack, rows, cells, costs, per_request, usage_written, gateway_requests, duration,
                 litellm)


def keep_replies(stack: Stack, seconds: int) -> None:
    """--cache: the bench group keeps its replies `seconds` (the response cache, gateway/cache/), set
    through the model's own save, before the gateway starts."""
    run_checked([PY, "manage.py", "shell", "-c",
                 "from accounts.models import AccountGroup; group = AccountGroup.objects.get(name='bench'); "
                 f"group.response_cache_ttl = {int(seconds)}; group.save()"], stack.env)
    print(f"bench: the bench group keeps its replies {seconds} s (response cache)", flush=True)


def set_prices(stack: Stack) -> None:
    """--price: every bench model has a price and the bench group budgets in money it never reaches
    (issue 25): each call is priced when metered, and its spend windows are read, checked and added to."""
    run_checked([PY, "manage.py", "shell", "-c",
                 "from decimal import Decimal; from gateway.models import Model; "
                 "from accounts.models import AccountGroup\n"
                 "for model in Model.objects.all():\n"
                 "    model.input_price, model.cached_input_price, model.output_price = "
                 "Decimal('2.5'), Decimal('0.25'), Decimal('10'); model.save()\n"
                 "group = AccountGroup.objects.get(name='bench')\n"
                 "group.daily_budget = group.weekly_budget = group.monthly_budget = Decimal(10**9); group.save()"],
                stack.env)
    print("bench: every model priced (2.5 / 0.25 / 10 per million tokens), the bench group has budgets", flush=True)


def note_sink(args, sink: OtlpSink, since: float) -> None:
    """--otlp-sink, once the gateway has stopped (its last spans flushed): what the sink received, printed and
    added to this run's report."""
    from report import suffix

    sink.stop()
    line = sink.summary()
    print(f"bench: {line}", flush=True)
    out = RESULTS / (("quick" if args.quick else "latest") + suffix(args) + ".md")
    if not args.profile and out.exists() and out.stat().st_mtime >= since:
        with out.open("a") as report:
            report.write(f"\n## Traces\n\n{line} (OTEL_TRACES_SAMPLER=always_on).\n")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a small run (about 1.5 minutes) as a sanity check")
    p.add_argument("--no-litellm", action="store_true", help="leave LiteLLM out (direct and gateway only)")
    p.add_argument("--profile", action="store_true", help="profile the gateway (c=1 non-stream) with py-spy")
    p.add_argument("--stream", dest="profile_stream", action="store_true",
                   help="with --profile: profile streamed replies instead of non-streamed ones")
    p.add_argument("--client", choices=sorted(CLIENTS), default="raw", help="load generator client (default raw)")
    p.add_argument("--server", choices=("uvicorn", "gunicorn", "granian"), default="uvicorn",
                   help="the gateway's ASGI server (default uvicorn, the Procfile's worker class, alone; gunicorn: the "
                        "Procfile's web with one worker and the host's drainer; granian for comparison)")
    p.add_argument("--rounds", type=int, help="override the plan's rounds")
    p.add_argument("--commit", metavar="REV",
                   help="test this commit (exported with git archive) instead of the working tree, e.g. HEAD")
    p.add_argument("--tag", help="suffix for the result files (e.g. a what-if run: latest-<tag>.md)")
    p.add_argument("--surface", choices=("chat", "messages"), default="chat",
                   help="chat completions to an OpenAI-kind server (default), or /v1/messages to an Anthropic-kind "
                        "one (with --no-litellm)")
    p.add_argument("--cache", type=int, default=0, metavar="SECONDS",
                   help="a response cache hit: the bench group keeps its replies SECONDS, every measured gateway reply "
                        "must be a hit (X-Cache: hit) of the one request repeated; c=1 and 16, against the direct "
                        "call only (implies --no-litellm; result files tagged 'cache')")
    p.add_argument("--pool", type=int, default=1, metavar="N",
                   help="N servers hold echo-1 on the one upstream and the gateway is asked for the bare name: a pool "
                        "of N deployments (issue 24; before pools, the first server answered it)")
    p.add_argument("--replay", action="store_true",
                   help="an Idempotency-Key replay (issue 25): every gateway request carries the same key and body, "
                        "so each measured reply must be the first answer given again (Idempotent-Replayed: true); "
                        "non-streamed, c=1 and 16, against the direct call only (implies --no-litellm; tagged "
                        "'replay')")
    p.add_argument("--price", action="store_true",
                   help="price every model and give the bench group budgets it never reaches (issue 25; needs a "
                        "commit that has prices)")
    p.add_argument("--guardrails", metavar="PRESET|FILE.json",
                   help="the bench group's guardrails: a preset (" + ", ".join(guard_cost.PRESETS) + ") or a file "
                        "holding the JSON list of checks; without it the group has none")
    p.add_argument("--prompt-bytes", type=int, default=0, metavar="N",
                   help="send a user message of about N bytes holding three e-mail addresses, a card number and a "
                        "phone number (bench/guard_cost.py) instead of the one short message; the direct calls too")
    p.add_argument("--concurrency", type=lambda v: tuple(int(c) for c in v.split(",")), metavar="C[,C...]",
                   help="only these concurrencies (of 1, 16, 64), e.g. 1")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="extra environment for the gateway process (e.g. DB_CONN_MAX_AGE=60); repeatable")
    p.add_argument("--otlp-sink", action="store_true",
                   help="traces on (issue 27): the gateway exports every span (always_on) by OTLP/HTTP to a sink in "
                        "this process that counts and discards them")
    args = p.parse_args()
    if args.cache:
        args.no_litellm = True
        args.tag = args.tag or "cache"
    if args.replay:
        args.no_litellm = True
        args.tag = args.tag or "replay"
    if args.surface == "messages" and not args.no_litellm:
        p.error("--surface messages measures the gateway against the direct call only: add --no-litellm")
    extra_env = dict(item.split("=", 1) for item in args.env)

    harness.install_signal_handlers()
    since = time.time()
    sink = OtlpSink() if args.otlp_sink else None
    if sink:
        extra_env = {**sink.env(), **extra_env}
        print(f"bench: OTLP sink on 127.0.0.1:{sink.port}; the gateway exports its traces there", flush=True)
    git_commit(args.commit)  # the code the run starts with
    stack = Stack(extra_env, REDIS_URL, pool=args.pool, guardrails=guard_cost.guardrails(args.guardrails))
    if args.server == "granian":
        stack.use_granian()
    elif args.server == "gunicorn":
        stack.server = "gunicorn"

    def body() -> int:
        stack.prepare(args.commit)
        if args.cache:
            keep_replies(stack, args.cache)
        if args.price:
            set_prices(stack)
        if args.profile:
            from pyspy_profile import run_profile

            run_profile(args, stack)
        else:
            run_benchmark(args, stack)
        return 0

    return stack.run(body, (lambda: note_sink(args, sink, since)) if sink else None)


if __name__ == "__main__":
    RESULTS.mkdir(parents=True, exist_ok=True)
    sys.exit(main())
