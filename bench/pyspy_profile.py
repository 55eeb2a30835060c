"""`gateway_latency.py --profile`: where one gateway process spends a request's time, from py-spy
(CPU view and wall-clock view), or from cProfile when py-spy cannot be had."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

from harness import (
    PY,
    RESULTS,
    ROOT,
    Proc,
    _die_with_parent,
    cpu_model,
    free_port,
    git_commit,
    proc_cpu_seconds,
    wait_http,
)
from loadgen import measure, summarize
from report import suffix
from stack import Stack


def find_pyspy() -> str | None:
    """py-spy on PATH, in BENCH_PYSPY, or installed into a throwaway venv under /tmp (never into .venv)."""
    for candidate in (os.environ.get("BENCH_PYSPY"), shutil.which("py-spy"), "/tmp/bench-pyspy/bin/py-spy"):
        if candidate and Path(candidate).exists():
            return candidate
    print("bench: installing py-spy into /tmp/bench-pyspy (a throwaway venv)", flush=True)
    try:
        subprocess.run([PY, "-m", "venv", "/tmp/bench-pyspy"], check=True, capture_output=True, timeout=120)
        subprocess.run(["/tmp/bench-pyspy/bin/pip", "install", "-q", "py-spy"], check=True, capture_output=True,
                       timeout=300)
    except (subprocess.SubprocessError, OSError) as exc:
        print(f"bench: py-spy unavailable ({exc}); falling back to cProfile", flush=True)
        return None
    return "/tmp/bench-pyspy/bin/py-spy"



def read_collapsed(path: Path, strip_thread: bool = True) -> list[tuple[list[str], int]]:
    """py-spy raw output, `frame;frame;…;leaf count` per line -> [(frames, count)]. With --threads the
    first frame names the thread (`thread (tid): name`): kept as `MainThread` or `worker`."""
    out = []
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        if frames[0].startswith("thread ("):
            name = frames[0].split(": ", 1)[-1]
            frames = frames[1:] if strip_thread else ["MainThread" if name == "MainThread" else "worker", *frames[1:]]
        out.append((frames, int(count)))
    return out


AREAS = [  # (area, substrings of a frame's file): a sample goes to the innermost frame that names an area
    ("PostgreSQL client (psycopg)", ("psycopg",)),
    ("Redis client (redis-py)", ("redis/",)),
    ("upstream HTTP client (httpx/httpcore)", ("httpx/", "httpcore/")),
    ("JSON", ("json/",)),
    ("Django ORM", ("django/db/",)),
    ("Django request/response handling", ("django/",)),
    ("asgiref sync_to_async, thread pools", ("asgiref/", "concurrent/futures", "threading.py", "queue.py")),
    ("uvicorn / h11 (server side and client side)", ("uvicorn/", "h11/")),
    ("gateway code (gateway/, accounts/, compat/)", ("gateway/", "accounts/", "compat/")),
    ("asyncio event loop", ("asyncio/", "selectors.py")),
]


def area_of(frames: list[str]) -> str:
    for frame in reversed(frames):
        for area, needles in AREAS:
            if any(n in frame for n in needles):
                return area
    return "other"


def _short(frame: str) -> str:
    return frame.split(" (", 1)[0]


def top_tables(samples, total: int, per_request: float, title: str, top: int = 30) -> list[str]:
    """Top-N by cumulative share and by self share; ms/req = samples / rate / requests."""
    inclusive, own = Counter(), Counter()
    for frames, n in samples:
        for frame in set(frames):
            if not any(e in frame for e in ENTRY_FRAMES):
                inclusive[frame] += n
        own[frames[-1]] += n
    lines = [f"Top {top} by cumulative share ({title}; process and thread entry frames left out):",
             f"{'cum%':>6} {'ms/req':>7} {'self%':>6}  function (file:line)"]
    for frame, n in inclusive.most_common(top):
        lines.append(f"{100 * n / total:6.1f} {n * per_request:7.2f} {100 * own.get(frame, 0) / total:6.1f}  {frame}")
    lines += ["", f"Top 20 by self share ({title}):", f"{'self%':>6} {'ms/req':>7}  function (file:line)"]
    for frame, n in own.most_common(20):
        lines.append(f"{100 * n / total:6.1f} {n * per_request:7.2f}  {frame}")
    return lines


# Stages of a gateway request. A sample goes to the stage of its innermost frame that names one
# (so a new PostgreSQL connection opened inside the API-key lookup counts as "PostgreSQL connect").
STAGES = [
    ("PostgreSQL: open a connection", ("BaseDatabaseWrapper.connect",)),
    ("PostgreSQL: close or return the connection", ("BaseDatabaseWrapper.close", "close_old_connections")),
    ("counters: Redis Lua step (ceilings; from 9d2c412 also credential versions and quota read)",
     ("limit_hit", "window_hit", "_redis_hit", "limit_counters", "limit_headers")),
    ("token quota check (quota_check, quota_window_keys)", ("quota_check", "quota_window_keys")),
    ("metering: quota counters, Redis Lua add-if-present (quota_add)", ("quota_add",)),
    ("metering: usage record spooled and drained (meter, usage writer)",
     ("meter", "UsageWriter._run", "UsageWriter._cycle", "insert", "_insert_lines", "UsageWriter.submit",
      "Spool.append")),
    ("auth: credential lookup (api_key_account; from 9d2c412 a process cache)",
     ("api_key_account", "authenticate", "identify", "remember", "endpoint.<locals>._admit_caller",
      "endpoint.<locals>._check_and_count")),
    ("request body, model registry and chain (prepare, call_plan)",
     ("chat_call.<locals>.prepare", "plan_chain", "registry", "call_plan", "read_json_object", "check_chat_size",
      "chat_form")),
    ("upstream call: httpx request + SSE parsing (chat_stream)", ("chat_stream", "server_events", "open_reply",
                                                                  "_chain_first", "sse_read")),
    ("reply: accumulate, build and encode (Call, ReplyAccumulator, JsonResponse)",
     ("Call.chunks", "Call.collect", "ReplyAccumulator.feed", "ReplyAccumulator.completion", "Call.json_response",
      "Call._metered", "Call.usage", "usage_of", "_frames", "Call._metered_frames", "Call.stream_response",
      "JsonResponse.__init__", "chat_completions", "Call.__init__", "Call.open", "sse_data", "Call.meter_now")),
    ("Django ASGI handler, signals, middleware", ("ASGIHandler.handle", "ASGIHandler.send_response",
                                                  "ASGIHandler.read_body", "ASGIHandler.create_request",
                                                  "BaseHandler.get_response_async", "Signal.asend",
                                                  "RequestIdMiddleware.__acall__", "SurfaceMiddleware.__acall__",
                                                  "ASGIHandler.__call__", "ASGIHandler.run_get_response",
                                                  "endpoint.<locals>.decorate.<locals>.async_wrapper")),
    ("sync_to_async hops: thread hand-off, executor threads", ("SyncToAsync.__call__",
                                                               "SyncToAsync.thread_handler",
                                                               "ThreadSensitiveContext.__aenter__",
                                                               "ThreadSensitiveContext.__aexit__",
                                                               "_WorkItem.run", "_worker")),
]
_STAGE_OF = {name: stage for stage, names in STAGES for name in names}
FALLBACK_STAGES = [
    ("upstream call: httpx request + SSE parsing (chat_stream)", ("httpx/", "httpcore/", "anyio/", "sniffio/")),
    ("sync_to_async hops: thread hand-off, executor threads", ("asgiref/", "threading.py", "concurrent/futures")),
    ("uvicorn / h11 HTTP server", ("uvicorn/", "h11/")),
    ("asyncio event loop", ("asyncio/", "selectors")),
]
# Frames every sample of a thread has (process and thread entry): left out of the top-N lists.
ENTRY_FRAMES = ("<frozen runpy>", "click/core.py", "uvicorn/main.py", "uvicorn/__main__.py", "uvicorn/_compat.py",
                "Server.run (uvicorn/server.py", "asyncio/runners.py", "BaseEventLoop.run_until_complete",
                "BaseEventLoop.run_forever", "Thread._bootstrap", "Thread.run (threading.py", "_worker (concurrent")


def stage_of(frames: list[str]) -> str:
    for frame in reversed(frames):
        stage = _STAGE_OF.get(_short(frame))
        if stage:
            return stage
    for frame in reversed(frames):
        for stage, needles in FALLBACK_STAGES:
            if any(n in frame for n in needles):
                return stage
    return "other"


def stage_lines(samples, total: int, per_request: float) -> list[str]:
    stages = Counter()
    for frames, n in samples:
        stages[stage_of(frames)] += n
    return [f"{100 * n / total:6.1f} {n * per_request:7.2f}  {stage}" for stage, n in stages.most_common()]


def hop_target(frames: list[str]) -> str:
    """The sync function a sync_to_async work item runs: the first frame below asgiref's own."""
    last = max((i for i, f in enumerate(frames) if "asgiref/" in f), default=None)
    if last is None or last + 1 >= len(frames):
        return "(asgiref / executor plumbing)"
    return _short(frames[last + 1])


def cpu_report(raw: Path, requests: int, rate: int) -> list[str]:
    samples = read_collapsed(raw)
    total = sum(n for _, n in samples)
    if not total:
        return ["No samples."]
    per_request = 1000 / rate / max(requests, 1)  # ms of one sample, shared over the requests
    lines = [f"{total} samples holding the GIL ({total * per_request:.2f} ms of Python CPU per request).", "",
             "CPU by stage of the request (innermost stage on the stack):", f"{'%':>6} {'ms/req':>7}  stage"]
    lines += stage_lines(samples, total, per_request)
    lines.append("")
    lines += top_tables(samples, total, per_request, "CPU")
    areas = Counter()
    hops = Counter()
    for frames, n in samples:
        areas[area_of(frames)] += n
        if any(_short(f) == "_WorkItem.run" for f in frames):
            hops[hop_target(frames)] += n
    lines += ["", "CPU by library (innermost frame that names one):"]
    for area, n in areas.most_common():
        lines.append(f"{100 * n / total:6.1f} {n * per_request:7.2f}  {area}")
    lines += ["", "CPU of worker threads (sync_to_async, run_in_executor), by the sync function run:"]
    for hop, n in hops.most_common(12):
        lines.append(f"{100 * n / total:6.1f} {n * per_request:7.2f}  {hop}")
    return lines


def wall_report(raw: Path, requests: int, rate: int, p50: float) -> list[str]:
    """With --idle --threads: every thread sampled all the time. Busy = running a ready asyncio
    callback (Handle._run) on the event loop thread, or a sync_to_async work item on a worker thread."""
    samples = read_collapsed(raw, strip_thread=False)
    per_request = 1000 / rate / max(requests, 1)
    loop_busy = [(f[1:], n) for f, n in samples if f[0] == "MainThread" and any(_short(x) == "Handle._run" for x in f)]
    work = [(f[1:], n) for f, n in samples if f[0] == "worker" and any(_short(x) == "_WorkItem.run" for x in f)]
    loop_total = sum(n for _, n in loop_busy)
    work_total = sum(n for _, n in work)
    lines = [
        f"Per request (p50 {p50:.2f} ms under this profiler, which slows the process down): event loop thread busy "
        f"{loop_total * per_request:.2f} ms; sync_to_async work items {work_total * per_request:.2f} ms of wall "
        f"time, waits on PostgreSQL and Redis included (the event loop waits for them meanwhile).",
        "",
        "sync_to_async work items by the sync function run (wall ms per request):",
    ]
    hops = Counter()
    for frames, n in work:
        hops[hop_target(frames)] += n
    for hop, n in hops.most_common(12):
        lines.append(f"{n * per_request:7.2f}  {hop}")
    if work_total:
        lines += ["", "sync_to_async work items by stage (wall ms per request):", f"{'%':>6} {'ms/req':>7}  stage"]
        lines += stage_lines(work, work_total, per_request)
        lines += [""] + top_tables(work, work_total, per_request, "wall time of sync_to_async work items", top=30)
    if loop_total:
        lines += ["", "Event loop thread, busy samples by stage (wall ms per request):",
                  f"{'%':>6} {'ms/req':>7}  stage"]
        lines += stage_lines(loop_busy, loop_total, per_request)
    return lines


def run_profile(args, stack: Stack) -> None:
    seconds = 6.0 if args.quick else 20.0
    rate = 250
    pyspy = find_pyspy()
    if pyspy is None:
        return run_cprofile(args, stack, seconds)
    proc = stack.start_gateway()
    pid = stack.web_pid(proc)  # under gunicorn, its worker
    # Warm up, so the profile shows the steady state rather than first-request imports and caches.
    stream = args.profile_stream
    mode = "stream" if stream else "non-stream"
    asyncio.run(measure(args.client, stack.gateway, "bench/echo-1", stack.api_key, stream, 1, 500, 2.0, 0.5))
    sections = []
    for view, flags in (("cpu", ["--gil", "--nonblocking"]), ("wall", ["--idle", "--threads", "--nonblocking"])):
        raw = stack.tmp / f"pyspy-{view}.txt"
        log = open(stack.tmp / f"pyspy-{view}.log", "wb")  # noqa: SIM115 - closed below
        rec = subprocess.Popen([pyspy, "record", "--pid", str(pid), "--duration", str(int(seconds + 1)),
                                "--rate", str(rate), "--format", "raw", "--function", *flags, "--output", str(raw)],
                               stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                               preexec_fn=_die_with_parent)
        try:
            time.sleep(0.5)  # py-spy attaches
            cpu0 = proc_cpu_seconds(pid)
            run = asyncio.run(measure(args.client, stack.gateway, "bench/echo-1", stack.api_key, stream, 1, 100_000,
                                      seconds, 0.1))
            cpu = proc_cpu_seconds(pid) - cpu0
            rec.wait(timeout=seconds + 60)
        finally:
            if rec.poll() is None:
                rec.send_signal(signal.SIGINT)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    rec.wait(timeout=15)
                if rec.poll() is None:
                    rec.kill()
            log.close()
        if not raw.exists():
            raise RuntimeError(f"py-spy wrote nothing: {(stack.tmp / f'pyspy-{view}.log').read_text()[-2000:]}")
        s = summarize(run)
        requests = s["n"] + run.errors + run.warmup_requests
        print(f"bench: {view} profile: {requests} requests, p50 {s['p50']:.2f} ms, errors {s['errors']}", flush=True)
        head = [
            f"== {'CPU' if view == 'cpu' else 'Wall clock'} view: py-spy record --rate {rate} --function "
            f"{' '.join(flags)} ==",
            f"c=1 {mode}, {requests} requests in {run.elapsed:.1f} s; p50 under the profiler {s['p50']:.2f} ms; "
            f"gateway process CPU (from /proc) {cpu / max(requests, 1) * 1000:.2f} ms per request.",
        ]
        body = cpu_report(raw, requests, rate) if view == "cpu" else wall_report(raw, requests, rate, s["p50"])
        sections.append("\n".join(head + body))
        RESULTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(raw, RESULTS / f"profile{suffix(args)}-{view}.collapsed")
    text = (f"# Gateway profile, {datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC}, commit {git_commit()}, "
            f"{cpu_model()} x{os.cpu_count()}\n"
            "# Shares are of the view's samples; ms/req = samples / rate / requests. 'cum' counts samples whose\n"
            f"# stack contains the function, 'self' samples in it. Raw stacks: profile{suffix(args)}-cpu.collapsed,\n"
            f"# profile{suffix(args)}-wall.collapsed (flamegraph.pl or speedscope read them).\n"
            + (f"# Extra gateway environment: {', '.join(f'{k}={v}' for k, v in stack.extra_env.items())}\n"
               if stack.extra_env else "") + "\n"
            + "\n\n".join(sections) + "\n")
    out = RESULTS / f"profile{suffix(args)}.txt"
    out.write_text(text)
    print(text)
    print(f"bench: wrote {out.relative_to(ROOT)}")


CPROFILE_RUNNER = """
import cProfile, pstats, signal, sys, uvicorn
profiler = cProfile.Profile()
def stop(*_):
    profiler.disable()
    pstats.Stats(profiler).sort_stats("cumulative").dump_stats(sys.argv[1])
    raise SystemExit(0)
signal.signal(signal.SIGTERM, stop)
profiler.enable()
uvicorn.run("gateway.asgi:application", host="127.0.0.1", port=int(sys.argv[2]), log_level="warning",
            access_log=False)
"""


def run_cprofile(args, stack: Stack, seconds: float) -> None:
    """Fallback when py-spy cannot be had: cProfile around uvicorn in the child (event loop thread only)."""
    stats_path = stack.tmp / "gateway.pstats"
    runner = stack.tmp / "cprofile_runner.py"
    runner.write_text(CPROFILE_RUNNER)
    port = free_port()
    proc = Proc("gateway-cprofile", [PY, str(runner), str(stats_path), str(port)], stack.gateway_env, stack.tmp)
    stack.procs.append(proc)
    stack.gateway = f"http://127.0.0.1:{port}"
    wait_http(stack.gateway + "/v1/models", proc, timeout=60, headers={"Authorization": f"Bearer {stack.api_key}"})
    run = asyncio.run(measure(args.client, stack.gateway, "bench/echo-1", stack.api_key, False, 1, 100_000,
                              seconds, 1.0))
    proc.stop(timeout=30)
    import io
    import pstats

    buf = io.StringIO()
    pstats.Stats(str(stats_path), stream=buf).sort_stats("cumulative").print_stats(30)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"profile{suffix(args)}.txt").write_text(
        f"cProfile (event-loop thread only), {len(run.latencies)} requests\n" + buf.getvalue())
    print(buf.getvalue())


