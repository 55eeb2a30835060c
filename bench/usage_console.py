"""The usage console (issue 14 item 4) at a million usage records, on PostgreSQL.

    .venv/bin/python bench/usage_console.py        # 1,000,000 records over 90 days -> results/usage_console.md
    .venv/bin/python bench/usage_console.py --records 100000 --rounds 5 --tag quick

A throwaway database `bench_usage_console_<pid>` (on BENCH_PG_ADMIN_URL's server, dropped at the
end) is migrated and filled: 500 accounts in 5 groups (two with ceilings and budgets), 8 models,
--records usage records spread over --days days up to now (INSERT … SELECT FROM generate_series,
100,000 a statement, skewed so that a few accounts and models make most of the use, as in life;
each costs its tokens at 0.15 and 0.60 per million), and a year of failure counts. The roll-up
the triggers keep (UsageDaily) is filled by those inserts.

Timed, medians over --rounds (milliseconds, time.perf_counter):
- each query of the page and the whole page (the view and its template, as the admin serves it)
  for the default 30 days, 90 days, one group, the busiest account, one model; with the number
  of queries the page ran;
- the same figures read from the records themselves (what the page would cost without the
  roll-up): the rows per day and model, and the top accounts;
- what the roll-up's trigger adds to the usage drainer's write: batches of 500 records through
  gateway.usage.writer.insert_rows with the trigger on and off, interleaved;
- the CSV export: the busiest account's 90 days, and every record of the last 7 days.
Only loopback traffic; no Redis.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
PG_ADMIN_URL = os.environ.get("BENCH_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
MODELS = [f"srv/model-{i}" for i in range(8)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--accounts", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--tag", default="")
    args = parser.parse_args()
    import psycopg

    name = f"bench_usage_console_{os.getpid()}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    base = PG_ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgres://", 1)
    os.environ.update({"DATABASE_URL": f"{base}/{name}", "DJANGO_SETTINGS_MODULE": "gateway.settings",
                       "GATEWAY_VAR_DIR": tempfile.mkdtemp(prefix="bench-usage-console-"), "REDIS_URL": "",
                       "LOG_LEVEL": "WARNING", "SECRET_KEY": os.environ.get("SECRET_KEY") or "bench-" + "x" * 50})
    try:
        report = run(args)
    finally:
        from django.db import connections

        connections.close_all()
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"usage_console{'-' + args.tag if args.tag else ''}.md"
    out.write_text(report)
    print(report)
    print(f"written to {out.relative_to(ROOT)}")


def run(args) -> str:
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    call_command("createcachetable", verbosity=0)
    started = time.perf_counter()
    operator, busiest, group = fill(args)
    fill_seconds = time.perf_counter() - started
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE gateway_usagerecord")
        cursor.execute("VACUUM ANALYZE gateway_usagedaily")
        cursor.execute("SELECT count(*), pg_total_relation_size('gateway_usagerecord'), "
                       "pg_total_relation_size('gateway_usagedaily') FROM gateway_usagedaily")
        rollup_rows, record_bytes, rollup_bytes = cursor.fetchone()
    today = datetime.now(timezone.utc).date()
    scenarios = {
        "30 days (the default)": {},
        f"{args.days} days": {"from": (today - timedelta(days=args.days - 1)).isoformat()},
        "30 days, one group": {"group": str(group.pk)},
        "30 days, the busiest account": {"account": busiest.email},
        "30 days, one model": {"model": MODELS[0]},
    }
    page = {label: time_page(operator, params, args.rounds) for label, params in scenarios.items()}
    direct = {label: time_direct(params, max(3, args.rounds // 3)) for label, params in scenarios.items()
              if label in ("30 days (the default)", f"{args.days} days")}
    exports = time_exports(busiest, args, max(3, args.rounds // 5))
    writes = time_writes(rounds=100)  # last: its records are all of today
    return render(args, fill_seconds, rollup_rows, record_bytes, rollup_bytes, page, direct, writes, exports)


def fill(args):
    """Groups, accounts, the records (the triggers fill the roll-up), failure counts."""
    from django.db import connection

    from accounts.models import Account, AccountGroup

    groups = [AccountGroup.objects.create(name="capped", daily_tokens=200_000, weekly_tokens=1_000_000,
                                          monthly_tokens=3_000_000, daily_budget=20, monthly_budget=300),
              AccountGroup.objects.create(name="small", daily_tokens=50_000, weekly_tokens=-1, monthly_tokens=500_000,
                                          weekly_budget=10),
              *(AccountGroup.objects.create(name=f"open-{i}") for i in range(3))]
    Account.objects.bulk_create([Account(email=f"user{i}@bench.test", group=groups[i % len(groups)], password="!")
                                 for i in range(args.accounts)])
    operator = Account.objects.create(email="operator@bench.test", group=groups[2], is_staff=True, is_superuser=True)
    ids = list(Account.objects.exclude(pk=operator.pk).order_by("pk").values_list("pk", flat=True))
    with connection.cursor() as cursor:
        cursor.execute("SELECT setseed(0.42)")
        for low in range(0, args.records, 100_000):
            high = min(low + 100_000, args.records)
            cursor.execute(
                """INSERT INTO gateway_usagerecord
                       (account_id, model, surface, input_tokens, output_tokens, request_id, key, created_at,
                        cost_units)
                   SELECT a, m, 'chat_completions', t_in, t_out, '', 'bench-' || i, at,
                          t_in * 1500 + t_out * 6000  -- 0.15 and 0.60 per million tokens
                     FROM (SELECT i, (%(ids)s::bigint[])[1 + floor(%(n)s * random() ^ 3)::int] AS a,
                                  (%(models)s::text[])[1 + floor(8 * random() ^ 2)::int] AS m,
                                  20 + floor(random() * 2000)::int AS t_in, 5 + floor(random() * 500)::int AS t_out,
                                  now() - random() * %(days)s * interval '1 day' AS at
                             FROM generate_series(%(low)s, %(high)s - 1) AS i) AS r""",
                {"ids": ids, "n": len(ids), "models": MODELS, "days": args.days, "low": low, "high": high})
        cursor.execute(
            """INSERT INTO gateway_callfailuredaily (day, model, kind, count)
               SELECT current_date - d, m, k, 1 + floor(random() * 50)::int
                 FROM generate_series(0, 364) AS d, unnest(%s::text[]) AS m,
                      unnest(ARRAY['fell_through', 'chain_failed', 'refused']) AS k""", [MODELS])
        cursor.execute("SELECT account_id FROM gateway_usagedaily GROUP BY 1 ORDER BY sum(calls) DESC LIMIT 1")
        busiest = Account.objects.get(pk=cursor.fetchone()[0])
    return operator, busiest, groups[0]


def time_page(operator, params: dict, rounds: int) -> dict:
    from django.contrib import admin
    from django.db import connection
    from django.test import RequestFactory
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone as dj_timezone

    from accounts.models import AccountGroup
    from gateway.console import usage_reads as uc
    from gateway.console.usage_views import usage_console
    from gateway.console.usage_windows import window_use

    groups = list(AccountGroup.objects.order_by("name"))
    f, errors = uc.parse_filters(params, today=dj_timezone.now().date(), groups=groups)
    assert not errors, errors
    now = dj_timezone.now()
    parts = {
        "rows per day and model": lambda: uc.usage_by_day_and_model(f),
        "top accounts": lambda: uc.top_accounts(f),
        "quota and budget use (2 queries)": lambda: window_use(f, now=now),
        "per group": lambda: uc.usage_by_group(f),
        "prices": lambda: uc.model_prices(),
        "failures": lambda: uc.failure_counts(f),
        "account names": lambda: uc.account_names(range(1, 61)),
    }

    def whole_page():
        request = RequestFactory().get("/admin/gateway/usagerecord/console/", params)
        request.user = operator
        response = usage_console(request, admin.site)
        response.render()
        assert response.status_code == 200
        return response

    with CaptureQueriesContext(connection) as queries:
        whole_page()
    times = {name: [] for name in [*parts, "whole page"]}
    for _ in range(rounds):
        for name, fn in parts.items():
            t0 = time.perf_counter()
            fn()
            times[name].append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        whole_page()
        times["whole page"].append((time.perf_counter() - t0) * 1000)
    return {"queries": len(queries), "ms": {name: statistics.median(v) for name, v in times.items()}}


def time_direct(params: dict, rounds: int) -> dict:
    """The page's two biggest figures computed from the records, without the roll-up."""
    from django.db.models import Count, F, Sum
    from django.db.models.functions import TruncDate
    from django.utils import timezone as dj_timezone

    from accounts.models import AccountGroup
    from gateway.console import usage_reads as uc
    from gateway.models import UsageRecord

    f, _ = uc.parse_filters(params, today=dj_timezone.now().date(), groups=list(AccountGroup.objects.all()))
    records = UsageRecord.objects.filter(created_at__gte=f.since, created_at__lt=f.until)
    queries = {
        "rows per day and model": lambda: list(
            records.annotate(day=TruncDate("created_at")).values("day", "model")
            .annotate(calls=Count("id"), i=Sum("input_tokens"), o=Sum("output_tokens"))),
        "top accounts": lambda: list(
            records.values("account_id", email=F("account__email"))
            .annotate(tokens=Sum(F("input_tokens") + F("output_tokens"))).order_by("-tokens")[:10]),
    }
    out = {}
    for name, fn in queries.items():
        times = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1000)
        out[name] = statistics.median(times)
    return out


def time_writes(rounds: int) -> dict:
    """Batches of 500 records as the usage drainer writes them, roll-up trigger on and off."""
    import random

    from django.db import connection

    from accounts.models import Account
    from gateway.usage.writer import insert_rows

    ids = list(Account.objects.values_list("pk", flat=True))
    rng = random.Random(7)
    times = {"on": [], "off": []}
    for n in range(rounds):
        for state in ("on", "off") if n % 2 == 0 else ("off", "on"):
            with connection.cursor() as cursor:
                cursor.execute(f"ALTER TABLE gateway_usagerecord {'ENABLE' if state == 'on' else 'DISABLE'} "
                               "TRIGGER gateway_usage_daily_insert")
            now = datetime.now(timezone.utc)
            rows = [(f"w-{n}-{state}-{i}", rng.choice(ids), rng.choice(MODELS), "chat_completions",
                     rng.randint(20, 2000), rng.randint(5, 500), "", now) for i in range(500)]
            t0 = time.perf_counter()
            insert_rows(rows)
            times[state].append((time.perf_counter() - t0) * 1000)
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE gateway_usagerecord ENABLE TRIGGER gateway_usage_daily_insert")
    return {state: statistics.median(v) for state, v in times.items()}


def time_exports(busiest, args, rounds: int) -> list[dict]:
    from django.utils import timezone as dj_timezone

    from accounts.models import AccountGroup
    from gateway.console import usage_reads as uc
    from gateway.console.usage_views import csv_lines

    today = dj_timezone.now().date()
    groups = list(AccountGroup.objects.all())
    cases = [(f"the busiest account, {args.days} days",
              {"account": busiest.email, "from": (today - timedelta(days=args.days - 1)).isoformat()}),
             ("every record of the last 7 days", {"from": (today - timedelta(days=6)).isoformat()})]
    out = []
    for label, params in cases:
        f, _ = uc.parse_filters(params, today=today, groups=groups)
        times, size, rows = [], 0, 0
        for _ in range(rounds):
            t0 = time.perf_counter()
            size, rows = 0, -1
            for text in csv_lines(f):
                size += len(text)
                rows += text.count("\n")
            times.append(time.perf_counter() - t0)
        seconds = statistics.median(times)
        out.append({"case": label, "rows": rows, "mb": size / 2**20, "s": seconds, "rows_per_s": rows / seconds})
    return out


def render(args, fill_seconds, rollup_rows, record_bytes, rollup_bytes, page, direct, writes, exports) -> str:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    lines = [
        "# Usage console at a million usage records",
        "",
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, commit {commit.strip() or '?'} (+ working tree), "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load average "
        f"{os.getloadavg()[0]:.1f}; PostgreSQL; `bench/usage_console.py` (medians of {args.rounds} rounds, ms).",
        "",
        f"{args.records:,} usage records over {args.days} days, {args.accounts} accounts, {len(MODELS)} models; "
        f"inserted in {fill_seconds:.0f} s (triggers on). Records: {record_bytes / 2**20:.0f} MB with indexes; "
        f"roll-up (UsageDaily): {rollup_rows:,} rows, {rollup_bytes / 2**20:.1f} MB.",
        "",
        "## The page (from the roll-up)",
        "",
        "| filters | queries | " + " | ".join(next(iter(page.values()))["ms"]) + " |",
        "|---|---:|" + "---:|" * len(next(iter(page.values()))["ms"]),
    ]
    for label, result in page.items():
        figures = " | ".join(f"{v:.1f}" for v in result["ms"].values())
        lines.append(f"| {label} | {result['queries']} | {figures} |")
    lines += ["", "The queries of the page: its own (groups, and the account when one is given) and those above; "
              "the admin's session and user are not counted here (the request is made directly).", "",
              "## The same figures from the records (no roll-up)", "",
              "| filters | rows per day and model | top accounts |", "|---|---:|---:|"]
    for label, result in direct.items():
        lines.append(f"| {label} | {result['rows per day and model']:.0f} | {result['top accounts']:.0f} |")
    lines += ["", "## What the roll-up's trigger adds to the usage drainer's write", "",
              "| 500 records through `insert_rows` | ms |", "|---|---:|",
              f"| trigger on | {writes['on']:.1f} |", f"| trigger off | {writes['off']:.1f} |",
              f"| added per batch | {writes['on'] - writes['off']:.1f} |", "",
              "## CSV export (streamed, 5,000 records a query)", "",
              "| export | rows | MB | seconds | rows/s |", "|---|---:|---:|---:|---:|"]
    for e in exports:
        lines.append(f"| {e['case']} | {e['rows']:,} | {e['mb']:.1f} | {e['s']:.2f} | {e['rows_per_s']:,.0f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
