"""The gateway's web process (gunicorn, two workers) and a Celery worker reach their
PostgreSQL through PgBouncer in transaction mode with two server connections, so that the
transactions of every client share them (DATABASE_POOLER=transaction, gateway/settings/database.py).
Migrations run against PostgreSQL itself, as docs/deploying.md says. Checked: proxied calls metered
exactly once, webhook events run by the worker and delivered in-app, the console's pages that read
with iterators, a revoked key refused at once; and, without the setting, the server-side cursor a
chunked read declares lost to the next transaction on another server connection.

Its own PostgreSQL cluster, Redis and PgBouncer on free loopback ports (tests/faults/services.py);
about 60 s. Run alone with `bin/test tests/faults/test_pgbouncer.py`."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor

import httpx
import psycopg
import pytest

from tests.faults import checks
from tests.faults.load import Load, chat_maker, event_maker
from tests.faults.services import PYTHON, ROOT, PrivatePgBouncer
from tests.faults.stack import WEB_WORKERS, Stack, wait_for

POOL_SIZE = 2  # PgBouncer's server connections to the gateway's database, for every client together
# PgBouncer's wait for a server connection, as docs/deploying.md advises (its default, 120 s, is how
# long a query hangs once PostgreSQL is gone); and its pause between failed logins (15 s by default)
QUERY_WAIT_SECONDS = 2
MODEL = "ref/echo-1"
OPERATOR = {"email": "operator@faults.test", "password": "faults-operator-password-1"}


class BouncedStack(Stack):
    """tests/faults/stack.py's stack (without beat), its web and worker through a PgBouncer."""

    def __init__(self):
        super().__init__(DATABASE_POOLER="transaction")
        self.bouncer = PrivatePgBouncer(self.base, self.logs, self.pg.port, pool_size=POOL_SIZE,
                                        query_wait_timeout=QUERY_WAIT_SECONDS, server_login_retry=1)
        self.direct_env = {**self.env, "DATABASE_POOLER": "none"}
        self.env["DATABASE_URL"] = self.bouncer.url(self.pg.dbname)  # the services share this mapping
        self.services = [self.upstream, self.web, self.worker]

    def start(self) -> BouncedStack:
        self.redis.start(timeout=20)
        self.pg.init()
        self.pg.start()
        self.pg.create_database()
        self.run(["manage.py", "migrate", "--noinput"], self.direct_env)  # the release step: PostgreSQL itself
        self.bouncer.start(timeout=20)
        self.upstream.start(timeout=30)
        self.seed_base()
        self.run(["manage.py", "createaccount", "--email", OPERATOR["email"], "--name", "Operator", "--staff",
                  "--password-stdin"], self.env, stdin=OPERATOR["password"])
        self.web.start(timeout=60)
        self.worker.start(timeout=60)
        wait_for(lambda: len(self.web_workers()) == WEB_WORKERS, 30, "the gunicorn workers")
        return self

    def run(self, args: list[str], env: dict[str, str], stdin: str | None = None) -> str:
        done = subprocess.run([PYTHON, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
                              input=stdin, start_new_session=True, check=False)
        assert done.returncode == 0, f"{' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
        return done.stdout

    def tail(self, lines: int = 40) -> str:
        return f"{super().tail(lines)}\n----- pgbouncer -----\n{self.bouncer.tail(lines)}"

    def close(self) -> None:
        for service in (*reversed(self.services), self.bouncer):
            with contextlib.suppress(Exception):
                service.stop()
        super().close()


@pytest.fixture(scope="module")
def bounced():
    # libpq sends PGOPTIONS (.ci/run sets it) as the `options` startup parameter, which PgBouncer refuses: not in
    # the stack's processes (tests/faults/stack.py) nor in this one's connections through it
    saved = os.environ.pop("PGOPTIONS", None)
    stack = BouncedStack()
    try:
        yield stack.start()
    except BaseException:
        print(f"\n===== logs of the stack in {stack.base} =====\n{stack.tail()}")
        raise
    finally:
        stack.close()
        if saved is not None:
            os.environ["PGOPTIONS"] = saved


@pytest.fixture(autouse=True)
def _logs_on_failure(bounced: BouncedStack, request):
    yield
    if getattr(request.node, "_faults_failed", False):  # tests/faults/conftest.py
        print(f"\n===== logs of the stack in {bounced.base} =====\n{bounced.tail()}")


def _account(stack: Stack, name: str, **spec) -> dict:
    return stack.seed({"op": "account", "name": f"{name}-{os.urandom(3).hex()}", **spec})


def _bounced_clients(stack: BouncedStack) -> int:
    return sum(1 for client in stack.bouncer.show("CLIENTS") if client["database"] == stack.pg.dbname)


def test_calls_and_events_through_pgbouncer_are_metered_once_and_run_by_the_worker(bounced: BouncedStack):
    account = _account(bounced, "pgb", routines=2)
    chats = Load(bounced.url, chat_maker(account["key"], MODEL, "pgb"), 80, concurrency=8).start()
    events = Load(bounced.url, event_maker(account["routines"], "pgb"), 20, concurrency=4).start()
    answers = chats.join(60) + events.join(60)
    checks.check_answers(answers, outage=False)
    assert checks.check_chats(bounced, account, answers)["answered"] == 80
    assert checks.check_events(bounced, account, answers)["accepted"] == 20  # one run, usage record, in-app delivery
    servers = [s for s in bounced.bouncer.show("SERVERS") if s["database"] == bounced.pg.dbname]
    clients = _bounced_clients(bounced)  # each web worker's and pool process's connection pool
    assert len(servers) <= POOL_SIZE < clients, f"{len(servers)} server connections for {clients} clients"


def test_the_console_pages_that_read_with_iterators(bounced: BouncedStack):
    """A form's choice list is read with `.iterator()` after the view's transaction (the response is
    rendered outside it), while calls of other clients run their transactions on the same two
    server connections."""
    account = _account(bounced, "pgb-console")
    load = Load(bounced.url, chat_maker(account["key"], MODEL, "pgbconsole"), 60, concurrency=4).start()
    with httpx.Client(base_url=bounced.url, timeout=20) as client:
        client.get("/admin/login/")
        signed_in = client.post("/admin/login/?next=/admin/", data={
            "csrfmiddlewaretoken": client.cookies["csrftoken"], "username": OPERATOR["email"],
            "password": OPERATOR["password"], "next": "/admin/"})
        assert signed_in.status_code == 302, signed_in.text[:500]
        pages = {"/admin/gateway/model/add/": ">ref2</option>",  # the model server choice
                 "/admin/accounts/account/add/": f">{account['group']}</option>",  # the group choice
                 "/admin/gateway/model/": "echo-1", "/admin/gateway/usagerecord/": "echo-1"}
        for _ in range(5):
            for path, seen in pages.items():
                page = client.get(path)
                assert page.status_code == 200 and seen in page.text, f"{path}: {page.status_code} {page.text[:300]}"
    checks.check_answers(load.join(60), outage=False)


def test_a_revoked_key_is_refused_at_once(bounced: BouncedStack):
    account = _account(bounced, "pgb-revoke")
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hello"}]}
    key = {"Authorization": f"Bearer {account['key']}"}
    with httpx.Client(base_url=bounced.url, timeout=20) as client:
        # every gunicorn worker has seen (and may keep) the key
        assert {client.post("/v1/chat/completions", json=body, headers=key).status_code for _ in range(8)} == {200}
        email = f"{account['group'].removeprefix('faults-')}@faults.test"  # tests/faults/seed.py
        login = client.post("/api/v1/auth/login", json={"email": email, "password": "faults-password-1"})
        assert login.status_code == 200, login.text
        session = {"Authorization": f"Bearer {login.json()['data']['access_token']}"}
        assert client.delete("/api/v1/auth/api-key/revoke", headers=session).status_code < 300
        with ThreadPoolExecutor(4) as pool:
            after = list(pool.map(lambda _: client.post("/v1/chat/completions", json=body, headers=key).status_code,
                                  range(8)))
    assert after == [401] * 8


def test_postgresql_restarted_behind_pgbouncer_under_load(bounced: BouncedStack):
    """PostgreSQL stopped behind PgBouncer, then started again, under calls and events: while it is
    gone a query waits QUERY_WAIT_SECONDS for a server connection (an outage shorter than that is
    ridden out), then fails, and new connections are refused at once: 503 with Retry-After, never a
    500 (event intakes retry their write for ROUTINE_WRITE_RETRY_SECONDS first). The calls answered
    are metered once, the events accepted are run once, and the API answers again once PgBouncer
    logs in again."""
    account = _account(bounced, "pgb-restart", routines=2)
    chats = Load(bounced.url, chat_maker(account["key"], MODEL, "pgbrestart"), 60, rate=15, concurrency=6).start()
    events = Load(bounced.url, event_maker(account["routines"], "pgbrestart"), 24, rate=4, concurrency=2).start()
    chats.wait_answered(15)
    bounced.pg.stop("fast")
    key = {"Authorization": f"Bearer {account['key']}"}

    def refused() -> bool:  # the usage read needs the database (a call rides on cached credentials and the spool)
        answer = httpx.get(f"{bounced.url}/api/v1/usage", headers=key, timeout=20)
        return answer.status_code == 503 and bool(answer.headers.get("retry-after"))

    wait_for(refused, 30, "GET /api/v1/usage answered 503 with Retry-After while PostgreSQL is gone")
    bounced.pg.start()
    wait_for(lambda: httpx.get(f"{bounced.url}/api/v1/usage", headers=key, timeout=10).status_code == 200, 30,
             "the API answering once PostgreSQL is back")
    answers = chats.join(120) + events.join(120)
    checks.check_answers(answers, outage=True)
    checks.check_chats(bounced, account, answers)
    checks.check_events(bounced, account, answers)


def _probe(stack: BouncedStack, pooler: str) -> dict:
    env = {**stack.env, "DATABASE_POOLER": pooler}
    return json.loads(stack.run(["-m", "tests.faults.cursor_probe"], env).strip().splitlines()[-1])


def test_without_the_setting_a_chunked_read_loses_its_cursor_and_psycopg_its_prepared_statements(
        bounced: BouncedStack):
    """What DATABASE_POOLER=transaction prevents: Django's server-side cursor, declared WITH HOLD in
    one transaction and fetched in the next, is gone when that runs on the other server connection
    (tests/faults/cursor_probe.py). Prepared statements fail the same way; Django 5.2 already
    leaves psycopg's off, and the setting refuses a DATABASE_URL that asks for them: shown here
    with psycopg alone."""
    content_types = bounced.pg.query("SELECT count(*) FROM django_content_type")[0][0]
    assert _probe(bounced, "transaction") == {"rows": content_types}
    failed = _probe(bounced, "none")
    assert re.search(r'cursor "_django_curs_\w+" does not exist', failed.get("error", "")), failed

    url = bounced.bouncer.url(bounced.pg.dbname)
    with psycopg.connect(url, autocommit=True, prepare_threshold=0) as client, \
            psycopg.connect(url) as first, psycopg.connect(url) as second:
        prepared_on = client.execute("SELECT pg_backend_pid()", prepare=True).fetchone()[0]
        holders = {holder.execute("SELECT pg_backend_pid()").fetchone()[0]: holder for holder in (first, second)}
        [other] = [holder for pid, holder in holders.items() if pid != prepared_on]
        other.commit()  # the client's next statement runs on the server connection it did not prepare on
        with pytest.raises(psycopg.errors.InvalidSqlStatementName, match='prepared statement "_pg3_0" does not exist'):
            client.execute("SELECT pg_backend_pid()", prepare=True)
