"""How many usage records a second one PostgreSQL takes through the drainer's own insert
(gateway/usage/writer.py `insert_rows`), into a private cluster (tests/faults/services.py
PrivatePostgres: initdb in a temp dir, loopback, fsync and synchronous_commit off), from one writer
and from four at once (docs/scaling.md, "Where the ceilings are"):

    .venv/bin/python bench/usage_inserts.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
BATCHES = 40  # per writer


def main() -> None:
    from tests.faults.services import PrivatePostgres

    base = Path(tempfile.mkdtemp(prefix="bench-inserts-"))
    (base / "logs").mkdir()
    pg = PrivatePostgres(base, base / "logs")
    pg.init()
    pg.start()
    try:
        pg.create_database()
        os.environ.update(DATABASE_URL=pg.url, DJANGO_SETTINGS_MODULE="gateway.settings",
                          GATEWAY_VAR_DIR=str(base / "var"))
        for name in ("REDIS_URL", "CELERY_BROKER_URL", "REDIS_SENTINELS"):
            os.environ.pop(name, None)
        os.environ.setdefault("SECRET_KEY", "bench-" + "x" * 50)
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connection

        from gateway.usage.writer import insert_rows
        from tests.factories import AccountFactory

        call_command("migrate", verbosity=0)
        call_command("createcachetable", verbosity=0)  # the embedded cache: no Redis here
        accounts = [AccountFactory().pk for _ in range(50)]

        def rows(n: int) -> list[tuple]:
            now = datetime.now(timezone.utc)
            return [(uuid.uuid4().hex, accounts[i % 50], "ref/echo-1", "chat", 12, 30, uuid.uuid4().hex, now, False,
                     0, 3_000_000) for i in range(n)]

        def writer(size: int) -> None:
            for _ in range(BATCHES):
                insert_rows(rows(size))
            connection.close()

        for writers, size in ((1, 500), (4, 500), (1, 100)):
            threads = [threading.Thread(target=writer, args=(size,)) for _ in range(writers)]
            started = time.monotonic()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            took = time.monotonic() - started
            total = writers * BATCHES * size
            print(f"{writers} writer(s), batches of {size}: {total} rows in {took:.2f} s = {total / took:,.0f} rows/s")
    finally:
        pg.stop("immediate")
        import shutil

        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
