"""The tables and the Markdown report of `gateway_latency.py`: per cell (mode × concurrency), the
median over rounds of each target's p50, p99, req/s and CPU; added = target − direct."""

from __future__ import annotations

import json
import os
import re
import statistics
from datetime import datetime, timezone

from harness import HUGE, RESULTS, ROOT, TOKEN_CEILING, cpu_model, git_commit, versions

LABELS = {"direct": "direct", "gateway": "gateway", "litellm": "LiteLLM"}
SIDE = {"direct": "d", "gateway": "g", "litellm": "l"}


def suffix(args) -> str:
    """Output names: latest.md / quick.md / profile.txt, plus -<client> and -<tag> when given."""
    return ((f"-{args.client}" if args.client != "raw" else "")
            + ("-stream" if args.profile and args.profile_stream else "")
            + (f"-{args.tag}" if args.tag else ""))


def med(rounds: list[dict], key: str):
    values = [r[key] for r in rounds if r.get(key) is not None]
    return statistics.median(values) if values else None


def _div(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def cell_row(cell: dict) -> dict:
    row = {"mode": cell["mode"], "c": cell["c"], "targets": cell["targets"]}
    for target in cell["targets"]:
        side, rounds = SIDE[target], cell[target]
        for key in ("p50", "p99", "req_s", "ttft_p50", "ttft_p99"):
            row[f"{side}_{key}"] = med(rounds, key)
        row[f"{side}_n"] = sum(r["n"] for r in rounds)
        row[f"{side}_errors"] = sum(r["errors"] for r in rounds)
        row[f"{side}_p50_range"] = (min(r["p50"] for r in rounds), max(r["p50"] for r in rounds))
        row[f"{side}_cpu"] = {k: statistics.median(r["cpu"][k] for r in rounds) for k in rounds[0].get("cpu", {})}
        if target == "direct":
            continue
        pre = "" if target == "gateway" else "l_"  # gateway keys keep their earlier names (add_p50, ratio)
        row[f"{pre}add_p50"] = row[f"{side}_p50"] - row["d_p50"]
        row[f"{pre}add_p99"] = row[f"{side}_p99"] - row["d_p99"]
        row[f"{pre}ratio"] = _div(row[f"{side}_req_s"], row["d_req_s"])
        if row["d_ttft_p50"] is not None and row[f"{side}_ttft_p50"] is not None:
            row[f"{pre}add_ttft_p50"] = row[f"{side}_ttft_p50"] - row["d_ttft_p50"]
            row[f"{pre}add_ttft_p99"] = row[f"{side}_ttft_p99"] - row["d_ttft_p99"]
    if "litellm" in cell["targets"]:
        row["gw_vs_ll_req_s"] = _div(row["g_req_s"], row["l_req_s"])  # > 1: the gateway serves more
        row["gw_vs_ll_add_p50"] = _div(row["add_p50"], row["l_add_p50"])  # < 1: the gateway adds less
        row["gw_vs_ll_add_p99"] = _div(row["add_p99"], row["l_add_p99"])
        row["gw_vs_ll_cpu"] = _div(row["g_cpu"].get("gateway"), row["l_cpu"].get("litellm"))
    return row


def f2(x) -> str:
    return "–" if x is None or x != x else f"{x:.2f}"


def f0(x) -> str:
    return "–" if x is None or x != x else f"{x:.0f}"


def main_table(rows: list[dict]) -> str:
    out = ["| mode | c | direct p50 | direct p99 | gateway p50 | gateway p99 | **added p50** | **added p99** "
           "| direct req/s | gateway req/s | gw/direct |",
           "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for r in rows:
        out.append(f"| {r['mode']} | {r['c']} | {f2(r['d_p50'])} | {f2(r['d_p99'])} | {f2(r['g_p50'])} | "
                   f"{f2(r['g_p99'])} | **{f2(r['add_p50'])}** | **{f2(r['add_p99'])}** | {f0(r['d_req_s'])} | "
                   f"{f0(r['g_req_s'])} | {f2(r['ratio'])} |")
    return "\n".join(out)


def side_by_side_table(rows: list[dict]) -> str:
    """Direct, the gateway and LiteLLM in one table (ms; streams: the whole reply; TTFT: first token)."""
    out = ["| mode | c | direct p50 / p99 | gateway added p50 / p99 | LiteLLM added p50 / p99 "
           "| added TTFT p50: gateway / LiteLLM | req/s: direct / gateway / LiteLLM "
           "| CPU ms per call: gateway / LiteLLM | **gateway ÷ LiteLLM: req/s** | **gateway ÷ LiteLLM: added p50** |",
           "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for r in rows:
        if "l_p50" not in r:
            continue
        ttft = (f"{f2(r.get('add_ttft_p50'))} / {f2(r.get('l_add_ttft_p50'))}"
                if r.get("add_ttft_p50") is not None else "–")
        out.append(f"| {r['mode']} | {r['c']} | {f2(r['d_p50'])} / {f2(r['d_p99'])} | {f2(r['add_p50'])} / "
                   f"{f2(r['add_p99'])} | {f2(r['l_add_p50'])} / {f2(r['l_add_p99'])} | {ttft} | "
                   f"{f0(r['d_req_s'])} / {f0(r['g_req_s'])} / {f0(r['l_req_s'])} | "
                   f"{f2(r['g_cpu'].get('gateway'))} / {f2(r['l_cpu'].get('litellm'))} | "
                   f"**{f2(r['gw_vs_ll_req_s'])}** | **{f2(r['gw_vs_ll_add_p50'])}** |")
    return "\n".join(out)


def ttft_table(rows: list[dict]) -> str:
    ll = any("l_ttft_p50" in r for r in rows)
    out = ["| mode | c | direct TTFT p50 | direct TTFT p99 | gateway TTFT p50 | gateway TTFT p99 | added TTFT p50 "
           "| added TTFT p99 |" + (" LiteLLM TTFT p50 | LiteLLM TTFT p99 | LiteLLM added p50 | LiteLLM added p99 |"
                                   if ll else ""),
           "|---|--:|--:|--:|--:|--:|--:|--:|" + ("--:|--:|--:|--:|" if ll else "")]
    for r in rows:
        if r.get("add_ttft_p50") is None:
            continue
        line = (f"| {r['mode']} | {r['c']} | {f2(r['d_ttft_p50'])} | {f2(r['d_ttft_p99'])} | "
                f"{f2(r['g_ttft_p50'])} | {f2(r['g_ttft_p99'])} | {f2(r['add_ttft_p50'])} | {f2(r['add_ttft_p99'])} |")
        if ll:
            line += (f" {f2(r.get('l_ttft_p50'))} | {f2(r.get('l_ttft_p99'))} | {f2(r.get('l_add_ttft_p50'))} | "
                     f"{f2(r.get('l_add_ttft_p99'))} |")
        out.append(line)
    return "\n".join(out)


def cpu_table(rows: list[dict]) -> str:
    ll = any("l_cpu" in r for r in rows)
    out = ["| mode | c | direct: upstream | direct: client | gateway: gateway process | gateway: upstream "
           "| gateway: PostgreSQL | gateway: Redis | gateway: client |"
           + (" LiteLLM: LiteLLM process | LiteLLM: upstream | LiteLLM: client |" if ll else "")
           + " other processes, cores busy (" + " / ".join(["direct", "gateway"] + (["LiteLLM"] if ll else [])) + ") |",
           "|---|--:|--:|--:|--:|--:|--:|--:|--:|" + ("--:|--:|--:|" if ll else "") + "--:|"]
    for r in rows:
        d, g, lc = r.get("d_cpu") or {}, r.get("g_cpu") or {}, r.get("l_cpu") or {}
        if not g:
            continue
        line = (f"| {r['mode']} | {r['c']} | {f2(d.get('upstream'))} | {f2(d.get('client'))} | "
                f"{f2(g.get('gateway'))} | {f2(g.get('upstream'))} | {f2(g.get('postgres'))} | "
                f"{f2(g.get('redis'))} | {f2(g.get('client'))} |")
        if ll:
            line += f" {f2(lc.get('litellm'))} | {f2(lc.get('upstream'))} | {f2(lc.get('client'))} |"
        busy = [d.get("others_cores"), g.get("others_cores")] + ([lc.get("others_cores")] if ll else [])
        out.append(line + " " + " / ".join(f2(x) for x in busy) + " |")
    return "\n".join(out)


def detail_table(cells: list[dict]) -> str:
    out = ["| mode | c | target | round | n | errors | p50 ms | p99 ms | req/s | other processes' load (cores) |",
           "|---|--:|---|--:|--:|--:|--:|--:|--:|--:|"]
    for cell in cells:
        for target in cell["targets"]:
            for i, r in enumerate(cell[target], 1):
                out.append(f"| {cell['mode']} | {cell['c']} | {LABELS[target]} | {i} | {r['n']} | {r['errors']} | "
                           f"{r['p50']:.2f} | {r['p99']:.2f} | {r['req_s']:.0f} | "
                           f"{r.get('cpu', {}).get('others_cores', float('nan')):.2f} |")
    return "\n".join(out)


def backend_lines(per_request: dict, costs: dict) -> list[str]:
    lines = []
    if costs:
        lines.append(f"- One new PostgreSQL connection (connect + close, from Python): "
                     f"{costs['pg_connect_ms']:.2f} ms median; "
                     f"one `SELECT 1` round trip: {costs['pg_query_ms']:.3f} ms; "
                     f"one Redis `PING`: {costs['redis_rtt_ms']:.3f} ms.")
    if per_request:
        pg = ", ".join(f"{per_request[k]:.2f} {label}" for k, label in
                       (("pg_sessions", "connections opened"), ("pg_commits", "transactions"))
                       if k in per_request)
        redis_cmds = sorted(((k.removeprefix("redis_"), v) for k, v in per_request.items()
                             if k.startswith("redis_") and k != "redis_connections" and v >= 0.05),
                            key=lambda kv: -kv[1])
        lines.append(f"- Per gateway request (counted over every gateway request of the run, warm-ups included): "
                     f"PostgreSQL (this database; pooled sessions report with a delay) {pg}; Redis commands (whole "
                     f"server, shared with anything else using it) "
                     + ", ".join(f"{name} {v:.2f}" for name, v in redis_cmds)
                     + f"; new Redis connections {per_request.get('redis_connections', 0):.3f}.")
    return lines


def write_report(args, plan, stack, rows, cells, costs, per_request, usage_written, gateway_requests, duration,
                 litellm=None) -> None:
    errors = sum(r[f"{SIDE[t]}_errors"] for r in rows for t in r["targets"])
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    server = "uvicorn " + " ".join(stack.server_flags) + (
        "" if "--loop" in stack.server_flags else " (asyncio loop, h11: uvloop/httptools not installed)")
    if stack.server == "granian":
        server = "granian --interface asgi --loop uvloop (from /tmp/bench-granian)"
    elif stack.server == "gunicorn":
        server = "gunicorn as the Procfile's web (gateway/gunicorn_conf.py), one uvicorn worker, the host's drainer"
    extra = ", ".join(f"{k}={v}" for k, v in stack.extra_env.items())
    targets = cells[0]["targets"] if cells else ["direct", "gateway"]
    order = " ".join("ABC"[: len(targets)]) + " …"
    method = [
        f"- Plan `{plan.name}`: for each mode and concurrency, {plan.rounds} round(s) of "
        f"{', then '.join(LABELS[t] for t in targets)} ({order}); each run is a warm-up of {plan.warmup_seconds:g} s "
        f"(discarded) then up to {plan.counts[1]}/{plan.counts[16]}/{plan.counts[64]} requests (c=1/16/64) or "
        f"{plan.seconds:g} s, whichever comes first. Figures are the median over rounds of each run's p50, p99 and "
        f"req/s; added = target − direct.",
        f"- Client: `{args.client}` ("
        f"{'asyncio + raw HTTP/1.1 keep-alive sockets' if args.client == 'raw' else 'httpx.AsyncClient'}), "
        f"one keep-alive connection per concurrent worker, closed loop, in the benchmark process; the same client for "
        f"every target. Latency is to the last byte of the reply; TTFT is to the first chunk carrying text.",
        "- Request: `POST /v1/chat/completions`, "
        + (f"one user message of {args.prompt_bytes} bytes at most (three e-mail addresses, a card number, a phone "
           f"number; bench/guard_cost.py)" if getattr(args, "prompt_bytes", 0) else "one short user message")
        + "; the upstream answers a fixed 20-word reply "
        "(`tokens_per_second` 0, no added latency), streamed as 22 SSE chunks or as one JSON body.",
        *([f"- The bench group's guardrails: `{json.dumps(stack.guardrails)}`"] if stack.guardrails else []),
        f"- Gateway: one process, `{server}`, PostgreSQL database `{stack.db_name}` (fresh, migrated), Redis "
        f"`{stack.redis_url}`. API key auth, request ceilings ON (RATE_LIMIT_V1/GENERAL/CHAT={HUGE}: counted in Redis, "
        f"never reached), token quotas ON (group ceilings {TOKEN_CEILING:.0e} tokens per day/week/month: "
        f"checked before and counted after each call), a usage record written per call. Effective settings: "
        f"{stack.settings_line}" + (f"; extra environment: {extra}" if extra else "") + ".",
        *([litellm.describe()] if litellm else []),
        f"- Usage records written during the run: {usage_written} for {gateway_requests} gateway requests "
        f"(warm-ups included)" + ("." if usage_written == gateway_requests else " — **they differ**."),
        *backend_lines(per_request, costs),
    ]
    body = [
        f"# Gateway latency — {plan.name} run",
        "",
        f"- Date: {now}; wall time {duration:.0f} s",
        f"- Machine: {os.cpu_count()} CPUs (`nproc` {os.cpu_count()}), {cpu_model()}; load generator, upstream, "
        f"gateway, {'LiteLLM, ' if litellm else ''}PostgreSQL and Redis share it; load average at the end "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}",
        f"- Versions: {versions(stack.redis_url)}" + (f"; LiteLLM side: {litellm.versions}" if litellm else ""),
        f"- Commit: {git_commit()}",
        "",
    ]
    if litellm:
        body += ["## Side by side: direct, the gateway, LiteLLM (ms; streams: time to the full reply)", "",
                 side_by_side_table(rows), "",
                 "gateway ÷ LiteLLM: req/s above 1 means the gateway serves more per process; added p50 below 1 "
                 "means it adds less.", ""]
    body += [
        "## Added latency and throughput of the gateway (ms; streams: time to the full reply)", "",
        main_table(rows), "",
        "## Streams: time to first token (ms)", "",
        ttft_table(rows), "",
        "## CPU time per request (ms, by process)", "",
        cpu_table(rows), "",
        "## Method", "",
        *method, "",
        f"Errors: {errors}." + ("" if not errors else " **Some requests failed; see the details.**"), "",
        "## Every run", "",
        detail_table(cells), "",
    ]
    for proc in stack.procs:
        if proc.name in ("gateway", "litellm"):
            tail = re.sub(r"\x1b\[[0-9;]*m", "", proc.log_tail(2000)).strip()  # LiteLLM colours its log
            if tail:
                body += [f"## {LABELS[proc.name]} log (tail)", "", "```", tail, "```", ""]
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / (("quick" if plan.name == "quick" else "latest") + suffix(args) + ".md")
    out.write_text("\n".join(body))
    out.with_suffix(".json").write_text(json.dumps({"rows": rows, "cells": cells, "costs": costs,
                                                    "per_request": per_request}, indent=1, default=str))
    print()
    if litellm:
        print(side_by_side_table(rows))
        print()
    print(main_table(rows))
    print()
    print(ttft_table(rows))
    print()
    print(cpu_table(rows))
    print()
    for line in method[-3:]:
        print(line)
    print(f"\nbench: wrote {out.relative_to(ROOT)}")
