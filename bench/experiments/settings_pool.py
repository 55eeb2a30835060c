"""What-if settings for the benchmark (not used by the product): the gateway's settings with
Django's PostgreSQL connection pool (Django >= 5.1, needs the `psycopg-pool` package).

    pip install --target /tmp/bench-extra psycopg-pool   # outside the project's venv
    .venv/bin/python bench/gateway_latency.py --quick \
        --env DJANGO_SETTINGS_MODULE=bench.experiments.settings_pool --env PYTHONPATH=/tmp/bench-extra

Under ASGI each request runs its database work in a thread of its own, so a connection kept per
thread (DB_CONN_MAX_AGE > 0) is never reused and leaks until PostgreSQL refuses new clients; the
pool hands connections between threads instead.
"""

from gateway.settings import *  # noqa: F401,F403
from gateway.settings import DATABASES, env

DATABASES["default"]["CONN_MAX_AGE"] = 0  # required with a pool
DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
    "min_size": env.int("BENCH_POOL_MIN", default=2),
    "max_size": env.int("BENCH_POOL_MAX", default=16),
    "timeout": 10,
}
