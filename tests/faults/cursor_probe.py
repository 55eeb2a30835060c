"""Run in a process whose DATABASE_URL goes through a PgBouncer in transaction mode with two server
connections (tests/faults/test_pgbouncer.py): read the content types with Django's
`.iterator(chunk_size=1)`, then have two other clients of the pooler take both server
connections and give back the one that does not hold the cursor, so that the next chunk is
fetched on the other server connection. Prints one JSON line: `{"rows": n}` or `{"error": "..."}`.

    python -m tests.faults.cursor_probe
"""

from __future__ import annotations

import json
import os


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gateway.settings")
    import django
    import psycopg

    django.setup()
    from django.contrib.contenttypes.models import ContentType

    holders = [psycopg.connect(os.environ["DATABASE_URL"]) for _ in range(2)]  # each in a transaction once used
    rows = ContentType.objects.order_by("id").values_list("id", flat=True).iterator(chunk_size=1)
    try:
        got = [next(rows)]  # a server-side cursor is declared WITH HOLD (outside a transaction), one row fetched
        # a cursor held over from a transaction is listed by pg_cursors on its server connection only
        holding = [holder.execute("SELECT count(*) FROM pg_cursors").fetchone()[0] for holder in holders]
        holders[holding.index(0)].rollback()  # the server connection without the cursor is free again
        got.extend(rows)
        print(json.dumps({"rows": len(got)}))
    except Exception as exc:  # noqa: BLE001 — what failed is the answer
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
    finally:
        for holder in holders:
            holder.close()


if __name__ == "__main__":
    main()
