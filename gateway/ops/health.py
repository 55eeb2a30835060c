"""Health endpoints for a load balancer or an orchestrator (docs/design.md, "Operations").

- `GET /livez`: the process answers. 200 `{"status": "ok"}`; nothing else is touched, so it
  answers while PostgreSQL and Redis are both down.
- `GET /readyz`: the process can serve. PostgreSQL hands out a connection, Redis answers PING
  (when REDIS_URL is set; with REDIS_SENTINELS, the primary the Sentinels name), the Celery broker
  answers (a redis:// broker, or the sentinel:// one REDIS_SENTINELS makes: PING; the embedded
  filesystem:// broker: its folders are there and writable; any other: a kombu connect), and
  every migration is applied. 200 with each check's result, or 503 with the same object naming
  what failed: `{"status": "unavailable", "checks": {"database": "ok", "redis": "down: <cause>",
  "broker": "ok", "migrations": "ok"}}`. A cause is an exception's name and first line, with any
  credential (a URL's password) removed; never a stack trace.

Both: no credential and no request ceiling (no `endpoint` wrapper), GET and HEAD only (405
`{message}` otherwise), `Cache-Control: no-store`. They skip the console's middleware
(gateway/web/surfaces.py): a probe over plain http is not redirected to https, and one that sends a
Host the gateway does not serve (a pod's address) is not refused. Nothing here logs at INFO: a
check that starts failing is logged once at WARNING, and once when it passes again.

Cheap: the checks run side by side in a small pool of threads of their own, each with timeouts of
CHECK_SECONDS (a check still out after WAIT_SECONDS is "down: no answer within 1.5 s", and the
next probe waits on that same check rather than starting another); the migrations are read until they have all
been applied once, then never again in this process.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable
from urllib.parse import urlsplit

from django.conf import settings
from django.db import close_old_connections, connections
from django.http import HttpRequest, HttpResponse, JsonResponse

from gateway.state.backend import sentinels_of
from gateway.state.redis.sentinel import master_client
from gateway.telemetry.redact import redact
from gateway.web.errors import FrameworkError, render_error

logger = logging.getLogger(__name__)

CHECK_SECONDS = 1.0  # each check's own timeouts (connect, read, the pool's wait)
WAIT_SECONDS = CHECK_SECONDS + 0.5  # a check still out then is answered as down
OK = "ok"
NOT_CONFIGURED = "not configured"
PASSING = (OK, NOT_CONFIGURED)
METHODS = ("GET", "HEAD")
CAUSE_CHARS = 160

_URL_CREDENTIALS = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@")

_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="readyz")
_running: dict[str, Future] = {}  # the check of each name in flight (shared by concurrent probes)
_migrated = False  # every migration was applied when last read: not read again
_failing: set[str] = set()  # the checks that failed at the last probe (logged once)


class Down(Exception):
    """A check that failed, in words of our own."""


async def livez(request: HttpRequest) -> HttpResponse:
    if request.method not in METHODS:
        return _not_allowed(request)
    return _answer({"status": "ok"}, 200)


async def readyz(request: HttpRequest) -> HttpResponse:
    if request.method not in METHODS:
        return _not_allowed(request)
    checks = await readiness()
    _log_changes(checks)
    ready = all(result in PASSING for result in checks.values())
    return _answer({"status": "ok" if ready else "unavailable", "checks": checks}, 200 if ready else 503)


def _answer(body: dict, status: int) -> JsonResponse:
    response = JsonResponse(body, status=status)
    response["Cache-Control"] = "no-store"
    return response


def _not_allowed(request: HttpRequest) -> HttpResponse:
    return render_error(request, FrameworkError(405, "Method Not Allowed.", headers={"Allow": ", ".join(METHODS)}))


# --- The checks ---------------------------------------------------------------------------------


async def readiness() -> dict[str, str]:
    """Each check's result: "ok", "not configured" (Redis in the embedded default), or what failed."""
    database, redis, broker = await asyncio.gather(_run("database", check_database), _run("redis", check_redis),
                                                   _run("broker", check_broker))
    if database != OK:
        migrations = "unknown: the database cannot be reached"
    else:
        migrations = await _run("migrations", check_migrations)
    return {"database": database, "redis": redis, "broker": broker, "migrations": migrations}


async def _run(name: str, check: Callable[[], str]) -> str:
    future = _running.get(name)
    if future is None or future.done():
        future = _running[name] = _pool.submit(_quietly, check)
    waiting = asyncio.wrap_future(future)
    done, _ = await asyncio.wait({waiting}, timeout=WAIT_SECONDS)
    if not done:
        return f"down: no answer within {WAIT_SECONDS:g} s"
    return waiting.result()


def _quietly(check: Callable[[], str]) -> str:
    try:
        return check()
    except Down as exc:
        return f"down: {exc}"
    except Exception as exc:  # noqa: BLE001 — whatever failed is the check's answer, not a 500
        return f"down: {cause_of(exc)}"
    finally:
        close_old_connections()  # a connection this thread took is given back


def check_database() -> str:
    """A connection from the pool within CHECK_SECONDS (the pool's own wait is far longer), and a
    round trip on it; on SQLite (the embedded default), a round trip."""
    connection = connections["default"]
    pool = connection.pool if connection.vendor == "postgresql" else None
    if pool is None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return OK
    from psycopg_pool import PoolTimeout

    pool.open()  # Django opens it at the first connection; a no-op when open
    try:
        with pool.connection(timeout=CHECK_SECONDS) as conn:
            conn.execute("SELECT 1")
    except PoolTimeout:
        raise Down(f"no connection could be had within {CHECK_SECONDS:g} s") from None
    return OK


def check_redis() -> str:
    if not settings.REDIS_URL:
        return NOT_CONFIGURED
    _ping(settings.REDIS_URL, sentinels_of(settings))
    return OK


def check_broker() -> str:
    url = settings.CELERY_BROKER_URL
    scheme = url.partition("://")[0].lower()
    if scheme in ("redis", "rediss"):
        _ping(url)
    elif scheme == "sentinel" and url == settings.REDIS_BROKER_URL:  # the Sentinels' primary, as the counters'
        _ping(settings.REDIS_URL, sentinels_of(settings))
    elif scheme == "filesystem":
        options = settings.CELERY_BROKER_TRANSPORT_OPTIONS
        for key in ("data_folder_in", "data_folder_out", "control_folder"):
            folder = options.get(key)
            if folder and not (os.path.isdir(folder) and os.access(folder, os.W_OK | os.X_OK)):
                raise Down(f"the broker folder {folder} is missing or not writable")
    else:
        from kombu import Connection

        with Connection(url, connect_timeout=CHECK_SECONDS,
                        transport_options=settings.CELERY_BROKER_TRANSPORT_OPTIONS) as conn:
            conn.ensure_connection(max_retries=1, interval_start=0, timeout=CHECK_SECONDS)
    return OK


def check_migrations() -> str:
    global _migrated
    if _migrated:
        return OK
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connections["default"])
    plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
    if plan:
        names = [f"{migration.app_label}.{migration.name}" for migration, _backwards in plan]
        return f"pending: {len(names)} not applied ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})"
    _migrated = True
    return OK


_clients: dict[tuple, object] = {}


def _ping(url: str, sentinels=None) -> None:
    """PING on a client of our own with short timeouts and no retries (the counters' client
    waits and retries longer, as a call should); with `sentinels`, of the primary they name."""
    client = _clients.get((url, sentinels))
    if client is None:
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        options = {"socket_connect_timeout": CHECK_SECONDS, "socket_timeout": CHECK_SECONDS,
                   "retry": Retry(NoBackoff(), 0)}
        client = _clients[(url, sentinels)] = (redis.Redis.from_url(url, **options) if sentinels is None
                                               else master_client(url, sentinels, **options))
    client.ping()


def cause_of(exc: BaseException) -> str:
    """An exception in one short line: its name and first line, without a URL's credentials or
    any configured password."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    text = redact(_URL_CREDENTIALS.sub(r"\1[redacted]@", text), _passwords(), loose=False)
    return (f"{type(exc).__name__}: {text}" if text else type(exc).__name__)[:CAUSE_CHARS]


def _passwords() -> list[str]:
    found = [settings.DATABASES["default"].get("PASSWORD") or "", getattr(settings, "REDIS_SENTINEL_PASSWORD", "")]
    for url in (settings.REDIS_URL, settings.CELERY_BROKER_URL):
        try:
            found.append(urlsplit(url).password or "")
        except ValueError:
            pass
    return [p for p in found if p]


def _log_changes(checks: dict[str, str]) -> None:
    for name, result in checks.items():
        if result not in PASSING and name not in _failing:
            _failing.add(name)
            logger.warning("readiness: %s %s", name, result)
        elif result in PASSING and name in _failing:
            _failing.discard(name)
            logger.warning("readiness: %s passes again", name)
