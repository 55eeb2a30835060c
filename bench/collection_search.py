"""Collection search time at 10k and 100k chunks, on SQLite and PostgreSQL, cold and warm.

    .venv/bin/python bench/collection_search.py                     # both databases, 10k and 100k, 768 dims
    .venv/bin/python bench/collection_search.py --db sqlite --sizes 10000 --queries 50   # quick
    .venv/bin/python bench/collection_search.py --dim 384 --tag d384

Each database runs in a child process on a fresh, migrated database (SQLite in a temporary
directory; PostgreSQL `bench_collections_<pid>` on 127.0.0.1, dropped at the end), with the
reference upstream (`tests/upstream`, `embedding_dim` = --dim) as the embedding model. One
collection is filled with random unit vectors up to each size in turn, then timed:

- cold: the matrix read from the database and searched (`vectors.forget()` first), `--cold-rounds` times;
- warm: `matrix_for` (the cached matrix, after the version check) + `top_k(k=5)`, `--queries` random queries,
  wall time and the thread's CPU time;
- warm + rows: the same, plus the one query that reads the 5 hits' rows (what the endpoint returns);
- after a write: 3 chunks written and the version moved on (as a write in another process does),
  then the first search: the new chunks are read and appended to the kept matrix;
- search_collection: the whole public function with a text query: plan (registry, group limits,
  quota), the query embedded by the reference upstream over loopback, ranking, rows, metering.

Figures are medians (and p95 for warm) in milliseconds; results go to bench/results/collection_search[-TAG].md.
See bench/README.md for the method and the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
PG_ADMIN_URL = os.environ.get("BENCH_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
PG_URL_TEMPLATE = "postgres://postgres@127.0.0.1:5432/{name}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", nargs="+", choices=["sqlite", "postgres"], default=["sqlite", "postgres"])
    parser.add_argument("--sizes", nargs="+", type=int, default=[10_000, 100_000])
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--cold-rounds", type=int, default=3)
    parser.add_argument("--tag", default="")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args)))
        return
    runs = {db: run_child(db, args) for db in args.db}
    report = render(runs, args)
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"collection_search{'-' + args.tag if args.tag else ''}.md"
    out.write_text(report)
    print(report)
    print(f"written to {out.relative_to(ROOT)}")


def run_child(db: str, args) -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="bench-collections-") as var_dir:
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "gateway.settings", "GATEWAY_VAR_DIR": var_dir,
               "REDIS_URL": "", "LOG_LEVEL": "WARNING"}
        env.pop("DATABASE_URL", None)
        name = f"bench_collections_{os.getpid()}"
        if db == "postgres":
            _pg(f'DROP DATABASE IF EXISTS "{name}"')
            _pg(f'CREATE DATABASE "{name}"')
            env["DATABASE_URL"] = PG_URL_TEMPLATE.format(name=name)
        try:
            command = [sys.executable, __file__, "--worker", "--sizes", *map(str, args.sizes), "--dim", str(args.dim),
                       "--queries", str(args.queries), "--cold-rounds", str(args.cold_rounds)]
            done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=3600)
            if done.returncode != 0:
                sys.exit(f"{db} run failed:\n{done.stderr[-4000:]}")
            return json.loads(done.stdout.strip().splitlines()[-1])
        finally:
            if db == "postgres":
                _pg(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _pg(statement: str) -> None:
    import psycopg

    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(statement)


# --- The child: one database -------------------------------------------------------------------


def worker(args) -> list[dict]:
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    import numpy as np
    from django.conf import settings
    from django.core.management import call_command

    from accounts.models import Account, AccountGroup
    from gateway.models import Model, ModelServer
    from native import vectors
    from native.models import Chunk, Collection, Document
    from native.search import search_collection
    from tests.upstream import running_upstream

    call_command("migrate", verbosity=0)
    call_command("createcachetable", verbosity=0)
    rng = np.random.default_rng(7)
    results = []
    with running_upstream(embedding_dim=args.dim, record=False) as upstream:
        server = ModelServer.objects.create(name="bench", kind="openai", base_url=f"{upstream.url}/v1")
        Model.objects.create(server=server, name="embed", supports_chat=False, supports_embeddings=True)
        settings.EMBEDDING_MODEL = "bench/embed"
        group = AccountGroup.objects.create(name="bench", api_access=True)
        account = Account.objects.create(email="bench@example.test", group=group)
        collection = Collection.objects.create(account=account, name="bench", embedding_model="bench/embed")
        rows = 0
        for size in sorted(args.sizes):
            started = time.perf_counter()
            while rows < size:
                document = Document.objects.create(collection=collection, name=f"doc {rows}", content_type="text/plain")
                batch = min(5000, size - rows)
                blobs = vectors.to_blobs(rng.standard_normal((batch, args.dim), dtype=np.float32))
                Chunk.objects.bulk_create(
                    [Chunk(collection=collection, document=document, position=i, text=f"chunk {rows + i} of the bench",
                           embedding=blob) for i, blob in enumerate(blobs)], batch_size=1000)
                rows += batch
            Collection.objects.filter(pk=collection.pk).update(vectors_version=collection.vectors_version + 1)
            insert_seconds = time.perf_counter() - started
            collection = Collection.objects.select_related("account__group").get(pk=collection.pk)

            cold, cold_load = [], []
            for _ in range(args.cold_rounds):
                vectors.forget()
                query = rng.standard_normal(args.dim, dtype=np.float32)
                t0 = time.perf_counter()
                matrix = vectors.matrix_for(collection)
                t1 = time.perf_counter()
                vectors.top_k(matrix, query, 5)
                t2 = time.perf_counter()
                cold.append((t2 - t0) * 1000)
                cold_load.append((t1 - t0) * 1000)

            warm, warm_cpu, warm_rows = [], [], []
            for _ in range(args.queries):
                query = rng.standard_normal(args.dim, dtype=np.float32)
                t0, c0 = time.perf_counter(), time.thread_time()
                ranked = vectors.top_k(vectors.matrix_for(collection), query, 5)
                t1, c1 = time.perf_counter(), time.thread_time()
                warm_cpu.append((c1 - c0) * 1000)
                list(Chunk.objects.filter(pk__in=[c for c, _ in ranked]).select_related("document")
                     .only("id", "position", "text", "document__id", "document__name"))
                t2 = time.perf_counter()
                warm.append((t1 - t0) * 1000)
                warm_rows.append((t2 - t0) * 1000)

            async def whole() -> list[float]:
                times = []
                for i in range(args.queries):
                    t0 = time.perf_counter()
                    hits = await search_collection(collection, f"bench query {i} about chunk {i * 7}", k=5)
                    times.append((time.perf_counter() - t0) * 1000)
                    assert len(hits) == 5
                return times

            end_to_end = asyncio.run(whole())

            after_write = []
            for _ in range(args.cold_rounds):
                document = Document.objects.create(collection=collection, name="late", content_type="text/plain")
                Chunk.objects.bulk_create([
                    Chunk(collection=collection, document=document, position=i, text="late chunk", embedding=blob)
                    for i, blob in enumerate(vectors.to_blobs(rng.standard_normal((3, args.dim), dtype=np.float32)))])
                Collection.objects.filter(pk=collection.pk).update(vectors_version=collection.vectors_version + 1)
                collection = Collection.objects.select_related("account__group").get(pk=collection.pk)
                query = rng.standard_normal(args.dim, dtype=np.float32)
                t0 = time.perf_counter()
                vectors.top_k(vectors.matrix_for(collection), query, 5)
                after_write.append((time.perf_counter() - t0) * 1000)
            rows = len(vectors.matrix_for(collection).ids)
            matrix = vectors.matrix_for(collection)
            results.append({
                "rows": len(matrix.ids), "dim": matrix.dim, "matrix_mb": round(matrix.vectors.nbytes / 2**20, 1),
                "insert_s": round(insert_seconds, 1),
                "cold_ms": _median(cold), "cold_load_ms": _median(cold_load),
                "warm_ms": _median(warm), "warm_p95_ms": _p95(warm), "warm_cpu_ms": _median(warm_cpu),
                "warm_rows_ms": _median(warm_rows), "after_write_ms": _median(after_write),
                "search_collection_ms": _median(end_to_end),
                "search_collection_p95_ms": _p95(end_to_end),
            })
    return results


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 2)


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))], 2)


# --- The report ----------------------------------------------------------------------------------


def render(runs: dict[str, list[dict]], args) -> str:
    import numpy as np

    threads = os.environ.get("OPENBLAS_NUM_THREADS", "default (one per core)")
    load = os.getloadavg()
    lines = [
        f"# Collection search, {args.dim} dimensions",
        "",
        f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC · {platform.machine()}, {os.cpu_count()} cores · "
        f"Python {platform.python_version()} · numpy {np.__version__} · OPENBLAS_NUM_THREADS {threads} · "
        f"load average at the end {load[0]:.1f} · {args.queries} warm queries, {args.cold_rounds} cold rounds",
        "",
        "Milliseconds, medians (p95 where named). Cold: the matrix read from the database, then searched. "
        "Warm: the cached matrix searched (top 5). Warm + rows: and the 5 hits' rows read. "
        "search_collection: the whole function, the query embedded by the reference upstream over loopback.",
        "",
        "| database | chunks | matrix MB | cold | of which load | warm | warm p95 | warm CPU | warm + rows "
        "| after a write | search_collection | its p95 | insert s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for db, results in runs.items():
        for r in results:
            lines.append(f"| {db} | {r['rows']:,} | {r['matrix_mb']} | {r['cold_ms']} | {r['cold_load_ms']} | "
                         f"{r['warm_ms']} | {r['warm_p95_ms']} | {r['warm_cpu_ms']} | {r['warm_rows_ms']} | "
                         f"{r['after_write_ms']} | {r['search_collection_ms']} | "
                         f"{r['search_collection_p95_ms']} | {r['insert_s']} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
