"""While Redis or PostgreSQL is down, a request that cannot be served is answered
503 with Retry-After in its surface's error shape, never 500; pooled PostgreSQL connections are
checked before use."""

import asyncio
import json
import os
import subprocess
import sys
from unittest import mock

import pytest
from django.db import OperationalError
from django.test import AsyncClient, Client
from psycopg_pool import PoolTimeout

from tests.factories import api_key_for, bearer
from tests.servers import ROOT

HELLO = {"model": "any", "messages": [{"role": "user", "content": "hi"}]}
MESSAGES = {"model": "any", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def redis_down(settings, closed_port):
    settings.REDIS_URL = f"redis://127.0.0.1:{closed_port}/0"


@pytest.fixture
def key(transactional_db, owner):
    """Committed: the async views check the key in a worker thread, on a connection of its own."""
    return api_key_for(owner)


def assert_503(response, retry_after="5"):
    assert response.status_code == 503, response.content
    assert response.headers["Retry-After"] == retry_after
    assert response.headers["X-Request-Id"]
    assert b"Traceback" not in response.content
    return response.json()


def assert_openai_503(response):
    body = assert_503(response)
    assert set(body) == {"error"}
    assert body["error"]["type"] == "server_error"
    assert body["error"]["code"] == "service_unavailable"
    assert "retry in 5 seconds" in body["error"]["message"]
    assert body["error"]["param"] is None


def assert_anthropic_503(response):
    body = assert_503(response)
    assert body["type"] == "error"
    assert body["error"]["type"] == "api_error"
    assert "retry in 5 seconds" in body["error"]["message"]


def assert_native_503(response):
    body = assert_503(response)
    assert set(body) == {"detail"} and "retry in 5 seconds" in body["detail"]


def requests_of_every_surface(client, key):
    """(response, checker) for one request of each surface."""
    return [
        (client.post("/v1/chat/completions", HELLO, content_type="application/json", headers=bearer(key)),
         assert_openai_503),
        (client.post("/v1/messages", MESSAGES, content_type="application/json", headers=bearer(key)),
         assert_anthropic_503),
        (client.get("/api/v1/version", headers=bearer(key)), assert_native_503),
        (client.get("/api/v1/routines", headers=bearer(key)), assert_native_503),
    ]


def test_redis_down_is_503_with_retry_after_in_each_surfaces_shape(client, key, redis_down):
    for response, check in requests_of_every_surface(client, key):
        check(response)


def test_redis_down_keeps_the_clients_request_id(client, key, redis_down):
    response = client.get("/api/v1/version", headers={**bearer(key), "X-Request-Id": "req-outage-1"})
    assert_native_503(response)
    assert response.headers["X-Request-Id"] == "req-outage-1"


def test_redis_down_on_the_auth_surface_has_its_shape(client, key, redis_down):
    body = assert_503(client.get("/api/v1/auth/verify", headers=bearer(key)))
    assert body["status"] == "error" and "retry in 5 seconds" in body["message"]


def test_redis_down_on_the_webhook_ingest_is_503(client, redis_down):
    assert_native_503(client.post("/api/v1/hooks/" + "a" * 40, b"{}", content_type="application/json"))


def test_redis_down_is_503_for_async_views_under_asgi(key, redis_down):
    async def calls():
        client = AsyncClient()
        return (
            await client.post("/v1/chat/completions", HELLO, content_type="application/json", headers=bearer(key)),
            await client.post("/v1/messages", MESSAGES, content_type="application/json", headers=bearer(key)),
            await client.get("/api/v1/version", headers=bearer(key)),
        )

    chat, messages, version = asyncio.run(calls())
    assert_openai_503(chat)
    assert_anthropic_503(messages)
    assert_native_503(version)


@pytest.mark.parametrize("error", [
    OperationalError("connection to server at 127.0.0.1, port 5432 failed: Connection refused"),
    PoolTimeout("couldn't get a connection after 10.00 sec"),
])
def test_database_down_is_503_in_each_surfaces_shape(client, key, error):
    with mock.patch("accounts.endpoints.identify", side_effect=error):
        for response, check in requests_of_every_surface(client, key):
            check(response)


def test_redis_busy_loading_is_503(client, key):
    from redis.exceptions import BusyLoadingError

    with mock.patch("accounts.endpoints.window_hit", side_effect=BusyLoadingError("loading the dataset")):
        assert_native_503(client.get("/api/v1/version", headers=bearer(key)))


def test_another_error_is_still_a_500(key):
    client = Client(raise_request_exception=False)
    with mock.patch("accounts.endpoints.identify", side_effect=ValueError("a bug")):
        response = client.get("/api/v1/version", headers=bearer(key))
    assert response.status_code == 500


def test_retry_after_follows_the_setting(client, key, redis_down, settings):
    settings.OUTAGE_RETRY_AFTER_SECONDS = 12
    response = client.get("/api/v1/version", headers=bearer(key))
    assert response.status_code == 503 and response.headers["Retry-After"] == "12"


def test_pooled_postgresql_connections_are_checked_before_use(settings):
    """With DATABASE_URL on PostgreSQL, the pool checks each connection as it hands it out."""
    code = (
        "import django, json; django.setup()\n"
        "from django.conf import settings\n"
        "from django.db import connection\n"
        "from psycopg_pool import ConnectionPool\n"
        "d = settings.DATABASES['default']\n"
        "print(json.dumps({'health': d['CONN_HEALTH_CHECKS'], 'age': d['CONN_MAX_AGE'],\n"
        "                  'check': connection.pool._check == ConnectionPool.check_connection}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True,
        env={"PATH": "/usr/bin:/bin", "DJANGO_SETTINGS_MODULE": "gateway.settings",
             "DATABASE_URL": "postgres://nobody@127.0.0.1:1/nothing", "GATEWAY_VAR_DIR": str(settings.VAR_DIR),
             "SECRET_KEY": settings.SECRET_KEY},
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"health": True, "age": 0, "check": True}


# --- A real PostgreSQL restart ----------------------------------------------------------------

RESTART_SCRIPT = """
import json, os, subprocess, sys
import django
django.setup()
from django.db import close_old_connections, connection
from gateway.web.errors import outage_of

def request():
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            return cursor.fetchone()[0]
    except Exception as exc:
        return outage_of(exc) or repr(exc)
    finally:
        close_old_connections()  # the end of a request: the connection goes back to the pool

ctl = json.loads(sys.argv[1])
before = [request() for _ in range(3)]  # the pool now holds open connections
subprocess.run(ctl + ["stop", "-m", "fast"], check=True, capture_output=True)
down = request()
subprocess.run(ctl + ["start"], check=True, capture_output=True)
after = [request() for _ in range(4)]
print(json.dumps({"before": before, "down": down, "after": after}))
"""


@pytest.fixture
def private_postgres():
    """A PostgreSQL cluster of this test's own (initdb), run as the postgres user when we are root."""
    import shutil
    import tempfile

    from tests.servers import free_port

    if not shutil.which("initdb") or not shutil.which("pg_ctl"):
        pytest.fail("initdb and pg_ctl are needed (Debian: apt-get install postgresql); .ci/run has them")
    base = tempfile.mkdtemp(prefix="gw-pg-")
    prefix = []
    if os.geteuid() == 0:
        shutil.chown(base, "postgres")
        prefix = ["runuser", "-u", "postgres", "--"]
    data, port = f"{base}/data", free_port()
    subprocess.run(prefix + ["initdb", "-D", data, "-A", "trust", "-U", "postgres", "--no-sync"], check=True,
                   capture_output=True, timeout=120)
    ctl = prefix + ["pg_ctl", "-D", data, "-w", "-l", f"{base}/log",
                    "-o", f"-p {port} -k {base} -c listen_addresses=127.0.0.1 -c fsync=off"]
    subprocess.run(ctl + ["start"], check=True, capture_output=True, timeout=60)
    try:
        yield f"postgres://postgres@127.0.0.1:{port}/postgres", ctl
    finally:
        subprocess.run(ctl + ["stop", "-m", "immediate"], capture_output=True, timeout=60)
        shutil.rmtree(base, ignore_errors=True)


def test_no_request_fails_once_postgresql_is_back(private_postgres, settings):
    """The pool checks a connection before handing it out: those broken by the restart are
    replaced, not given to a request. While it is down, the request's error is an outage (503)."""
    url, ctl = private_postgres
    out = subprocess.run(
        [sys.executable, "-c", RESTART_SCRIPT, json.dumps(ctl)], cwd=ROOT, capture_output=True, text=True,
        timeout=120,
        env={"PATH": os.environ["PATH"], "PYTHONPATH": str(ROOT), "DJANGO_SETTINGS_MODULE": "gateway.settings",
             "DATABASE_URL": url, "DB_POOL_TIMEOUT_SECONDS": "2", "GATEWAY_VAR_DIR": str(settings.VAR_DIR),
             "SECRET_KEY": settings.SECRET_KEY},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"before": [1, 1, 1], "down": "the database", "after": [1, 1, 1, 1]}


def test_an_outage_raised_in_a_middleware_is_a_503_too(db):
    """Not in a view (so OutageMiddleware's process_exception is not asked): Django's 500
    handler (gateway.web.fallback.server_error) sees the outage and answers its 503."""
    import redis

    client = Client(raise_request_exception=False)
    down = redis.exceptions.ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")
    with mock.patch("gateway.web.surfaces.is_api_path", side_effect=down):
        assert_native_503(client.get("/api/v1/version"))
    with mock.patch("gateway.web.surfaces.is_api_path", side_effect=ValueError("a bug")):
        response = client.get("/api/v1/version")
    assert response.status_code == 500 and response.json() == {"detail": "Server Error."}
