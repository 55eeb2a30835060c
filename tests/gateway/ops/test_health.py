"""The health probes: /livez (the process answers) and /readyz (PostgreSQL, Redis, the broker, the
migrations), unauthenticated, not rate-limited, GET and HEAD only, quiet in the logs, and
answering while what they check is down."""

import json
import logging
import time
from pathlib import Path

import httpx
import pytest
from django.db import connection

from gateway.ops import health
from tests.servers import answers_on, free_port, server_process, web_process

ALL_UP = {"database": "ok", "redis": "ok", "broker": "ok", "migrations": "ok"}
OUR_LOGGERS = ("gateway", "accounts", "native", "compat", "routines")
REDIS_PASSWORD = "readyz-redis-pw-8471"


@pytest.fixture(autouse=True)
def _no_failing_checks_remembered():
    health._failing.clear()  # each test sees its own failures logged
    yield
    health._failing.clear()


@pytest.fixture
def up(db, redis_url, settings):
    settings.CELERY_BROKER_URL = redis_url


def test_livez_answers_without_a_credential(client):
    response = client.get("/livez")

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert response["Cache-Control"] == "no-store"
    assert response["X-Request-Id"]


def test_readyz_names_each_check_when_all_is_up(client, up):
    response = client.get("/readyz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok", "checks": ALL_UP}
    assert response["Cache-Control"] == "no-store"


def test_without_redis_the_embedded_broker_is_checked_and_redis_is_not_configured(client, db, settings, tmp_path):
    folders = {key: str(tmp_path / key) for key in ("data_folder_in", "data_folder_out", "control_folder")}
    for folder in folders.values():
        (tmp_path / folder).mkdir()
    settings.REDIS_URL = ""
    settings.CELERY_BROKER_URL = "filesystem://"
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = folders

    assert client.get("/readyz").json() == {"status": "ok", "checks": {**ALL_UP, "redis": "not configured"}}

    (tmp_path / "control_folder").rmdir()
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["broker"] == (f"down: the broker folder {folders['control_folder']} "
                                                   "is missing or not writable")


def test_another_kind_of_broker_is_reached_through_kombu(client, db, settings):
    settings.CELERY_BROKER_URL = "memory://"
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {}

    assert client.get("/readyz").json()["checks"]["broker"] == "ok"


@pytest.mark.parametrize("path", ["/livez", "/readyz"])
def test_head_answers_and_other_methods_are_405(client, up, path):
    head = client.head(path)
    assert head.status_code == 200
    assert head.content == b""
    for method in ("post", "put", "patch", "delete"):
        refused = getattr(client, method)(path)
        assert refused.status_code == 405, method
        assert refused.json() == {"message": "Method Not Allowed."}
        assert refused["Allow"] == "GET, HEAD"


def test_they_are_not_rate_limited(client, up, settings):
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "general": 5}

    answers = [client.get(path) for path in ("/livez", "/readyz") for _ in range(20)]

    assert [a.status_code for a in answers] == [200] * 40
    assert not any("X-RateLimit-Limit" in a.headers for a in answers)


def test_a_probe_over_plain_http_with_a_pods_address_is_answered(client, up, settings):
    """An orchestrator's probe: plain http even when https is enforced, a Host the gateway does
    not serve (the pod's address)."""
    settings.SECURE_SSL_REDIRECT = True

    for path in ("/livez", "/readyz"):
        response = client.get(path, HTTP_HOST="10.42.0.17:8000")
        assert response.status_code == 200, path
    assert client.get("/admin/login/", HTTP_HOST="10.42.0.17:8000").status_code == 400  # the console refuses it


def test_our_loggers_say_nothing_at_info_about_them(client, up, caplog):
    caplog.set_level(logging.DEBUG)

    for path in ("/livez", "/readyz", "/livez", "/readyz"):
        assert client.get(path).status_code == 200

    ours = [r for r in caplog.records if r.name.split(".")[0] in OUR_LOGGERS and r.levelno <= logging.INFO]
    assert ours == []


def test_a_live_process_logs_no_info_line_of_ours_for_them(db, django_db_blocker, settings):
    """With JSON logs every request has its line at INFO (gateway.requests), but not the probes."""
    with django_db_blocker.unblock(), web_process(LOG_FORMAT="json", LOG_LEVEL="DEBUG") as base:
        for path in ("/livez", "/readyz", "/livez", "/readyz"):
            assert httpx.get(f"{base}{path}", timeout=10).status_code == 200
        assert httpx.get(f"{base}/api/v1/version", timeout=10).status_code == 401  # a line the log must show
        log = Path(settings.VAR_DIR) / f"test-web-{base.rsplit(':', 1)[1]}.log"
        deadline = time.monotonic() + 5
        while not any(line["logger"] == "gateway.requests" and "api/v1/version" in line["message"]
                      for line in _json_lines(log)):
            assert time.monotonic() < deadline, "the request line of /api/v1/version was not logged"
            time.sleep(0.05)
        lines = _json_lines(log)

    ours_at_info = [line for line in lines if line["logger"].split(".")[0] in OUR_LOGGERS and line["level"] == "INFO"]
    assert [line["message"] for line in ours_at_info if line["logger"] == "gateway.requests"] \
        == ["GET api/v1/version 401"]
    assert [line for line in ours_at_info if "livez" in str(line) or "readyz" in str(line)] == []


def _json_lines(path: Path) -> list[dict]:
    found = []
    for text in path.read_text(errors="replace").splitlines():
        try:
            line = json.loads(text)
        except ValueError:
            continue
        if isinstance(line, dict) and "logger" in line:
            found.append({**line, "message": str(line.get("message", ""))})
    return found


@pytest.fixture
def own_redis(settings):
    """A redis-server of this test's own, with a password, on a free port."""
    port = free_port()
    args = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--requirepass", REDIS_PASSWORD]
    with server_process(args, name=f"redis-{port}", ready=answers_on(port), env={"PATH": "/usr/bin:/bin"}) as proc:
        yield proc, f"redis://:{REDIS_PASSWORD}@127.0.0.1:{port}/0"


def test_readyz_names_redis_when_it_stops(client, db, settings, own_redis, caplog):
    proc, url = own_redis
    settings.REDIS_URL = settings.CELERY_BROKER_URL = url
    assert client.get("/readyz").json() == {"status": "ok", "checks": ALL_UP}

    proc.terminate()
    proc.wait(timeout=10)
    started = time.monotonic()
    response = client.get("/readyz")

    assert time.monotonic() - started < 3
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["checks"]["database"] == "ok" and body["checks"]["migrations"] == "ok"
    for name in ("redis", "broker"):
        assert body["checks"][name].startswith("down: ConnectionError: "), body
    assert REDIS_PASSWORD not in response.content.decode()
    assert "Traceback" not in response.content.decode()
    warned = [r.getMessage() for r in caplog.records if r.name == "gateway.ops.health"]
    assert len(warned) == 2 and all(REDIS_PASSWORD not in line for line in warned)

    client.get("/readyz")  # still down: said once only
    assert len([r for r in caplog.records if r.name == "gateway.ops.health"]) == 2


def test_a_cause_never_carries_a_urls_password():
    error = ConnectionError(f"cannot reach redis://:{REDIS_PASSWORD}@10.0.0.5:6379/0\nTraceback (most recent ...")

    assert health.cause_of(error) == "ConnectionError: cannot reach redis://[redacted]@10.0.0.5:6379/0"


def test_with_postgresql_and_redis_down_livez_answers_and_readyz_names_both(django_db_setup, django_db_blocker):
    closed_pg, closed_redis = free_port(), free_port()
    with django_db_blocker.unblock(), web_process(
        DATABASE_URL=f"postgres://postgres:pg-secret-pass-2291@127.0.0.1:{closed_pg}/gone",
        REDIS_URL=f"redis://127.0.0.1:{closed_redis}/0", CELERY_BROKER_URL=f"redis://127.0.0.1:{closed_redis}/0",
    ) as base:
        live = httpx.get(f"{base}/livez", timeout=5)
        assert (live.status_code, live.json()) == (200, {"status": "ok"})
        assert httpx.head(f"{base}/livez", timeout=5).status_code == 200

        started = time.monotonic()
        ready = httpx.get(f"{base}/readyz", timeout=10)
        assert time.monotonic() - started < 3

    assert ready.status_code == 503
    checks = ready.json()["checks"]
    assert checks["database"] == "down: no connection could be had within 1 s"
    assert checks["redis"].startswith("down: ConnectionError: ") and checks["broker"].startswith("down: ")
    assert checks["migrations"] == "unknown: the database cannot be reached"
    assert "pg-secret-pass-2291" not in ready.text


def test_readyz_reports_migrations_not_applied(transactional_db, django_db_blocker, tmp_path):
    """A database nothing was migrated into (on PostgreSQL a database of its own beside the test
    database, which a PgBouncer in front reaches too, as it would not a URL's search_path option:
    bin/test-through-pgbouncer; an empty SQLite file)."""
    with django_db_blocker.unblock():
        from tests.servers import test_database_url

        empty = f"{connection.settings_dict['NAME']}_readyz"
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(f'DROP DATABASE IF EXISTS "{empty}" WITH (FORCE)')
                cursor.execute(f'CREATE DATABASE "{empty}"')
            url = f"{test_database_url().rsplit('/', 1)[0]}/{empty}"
        else:
            url = f"sqlite:///{tmp_path / 'empty.sqlite3'}"
        try:
            with web_process(DATABASE_URL=url) as base:
                ready = httpx.get(f"{base}/readyz", timeout=10)
        finally:
            if connection.vendor == "postgresql":
                with connection.cursor() as cursor:  # a pooler's server connections to it closed too
                    cursor.execute(f'DROP DATABASE IF EXISTS "{empty}" WITH (FORCE)')

    assert ready.status_code == 503
    checks = ready.json()["checks"]
    assert checks["database"] == "ok"
    assert checks["migrations"].startswith("pending: ") and " not applied (" in checks["migrations"]
    assert "accounts.0001_initial" in checks["migrations"] or "contenttypes.0001_initial" in checks["migrations"]


def test_readyz_is_answered_by_a_live_process(db, live_gateway):
    ready = httpx.get(f"{live_gateway}/readyz", timeout=10)

    assert ready.status_code == 200
    assert ready.json()["status"] == "ok"
    assert set(ready.json()["checks"]) == set(ALL_UP)


@pytest.mark.parametrize("path", ["/livez", "/readyz", "/metrics", "/readyz?verbose=1"])
def test_the_servers_access_log_has_no_line_for_probes_and_scrapes(path):
    """uvicorn's and gunicorn's access-log records, as they make them, pass the filter the
    project puts on those loggers only for other paths."""
    import logging

    from gateway.telemetry.logjson import QuietScrapes

    def uvicorn_line(target):
        return logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
                                 ("127.0.0.1:5000", "GET", target, "1.1", 200), None)

    def gunicorn_line(target):
        record = logging.LogRecord("gunicorn.access", logging.INFO, __file__, 1, "%(U)s", None, None)
        record.args = {"U": target}
        return record

    quiet = QuietScrapes()
    assert not quiet.filter(uvicorn_line(path)) and not quiet.filter(gunicorn_line(path))
    assert quiet.filter(uvicorn_line("/v1/models")) and quiet.filter(gunicorn_line("/v1/models"))
