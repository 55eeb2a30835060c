import os
import socket

import pytest
from django.conf import settings
from django.core.management import call_command

from tests.factories import AccountFactory, AccountGroupFactory


def _flush_with_delete() -> None:
    """Between transactional tests the test database is emptied with DELETE rather than TRUNCATE:
    PostgreSQL's TRUNCATE of every table (new files for each) took 0.3 s per test, DELETE of the
    few rows a test leaves takes milliseconds. Django's foreign keys on PostgreSQL are deferrable,
    so the order of the tables does not matter inside the flush's transaction. The tables are
    locked first, as TRUNCATE locks them: a server process a test started may still be writing
    (a usage record for an account being deleted) and must wait, then fail, not the flush."""
    from django.db.backends.postgresql.operations import DatabaseOperations

    truncate = DatabaseOperations.sql_flush

    def sql_flush(self, style, tables, *, reset_sequences=False, allow_cascade=False):
        if not tables or reset_sequences:
            return truncate(self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade)
        names = [self.quote_name(table) for table in tables]
        return ["SET CONSTRAINTS ALL DEFERRED", f"LOCK TABLE {', '.join(names)} IN ACCESS EXCLUSIVE MODE",
                *(f"DELETE FROM {name}" for name in names)]

    DatabaseOperations.sql_flush = sql_flush


KEPT_TABLES = {"django_content_type", "auth_permission"}

# The Redis of the tests that need one when REDIS_URL is unset; an xdist worker has its own (tests/parallel.py).
TEST_REDIS_URL = os.environ.get("GATEWAY_TEST_REDIS_URL") or "redis://127.0.0.1:6379/14"


def _keep_content_types() -> None:
    """The flush between transactional tests leaves the content types (and the permissions on them) as
    they are. Emptied, they came back from post_migrate under new ids, while a server process a test
    started (the session's live gateway) keeps the old ids in its ContentType cache: its next admin or
    audit log entry (django-auditlog writes one for a routine or key made through the API) then broke
    its foreign key and the request answered 500. They never change within a run."""
    from django.db.backends.postgresql.operations import DatabaseOperations as PostgreSQL
    from django.db.backends.sqlite3.base import DatabaseOperations as SQLite  # (its module, imported alone, is a cycle)

    for operations in (PostgreSQL, SQLite):
        flush = operations.sql_flush

        def sql_flush(self, style, tables, *args, _flush=flush, **kwargs):
            return _flush(self, style, [table for table in tables if table not in KEPT_TABLES], *args, **kwargs)

        operations.sql_flush = sql_flush


def _flush_without_the_command() -> None:
    """A transactional test's teardown empties the tables directly, as the `flush` command would, without
    the command: Django calls it through call_command (its parser built afresh, 30 ms) and then sends
    post_migrate, whose two receivers (contenttypes' and auth's) only make sure the content types and
    their permissions exist, which the flush keeps (KEPT_TABLES): 55 ms of queries more per test. The two
    were about 85 ms of CPU per transactional test, measured with cProfile over tests/compat/test_reply_schemas.py."""
    from django.core.management.color import no_style
    from django.core.management.sql import sql_flush
    from django.db import connections
    from django.test import TransactionTestCase

    def _fixture_teardown(self):
        for name in self._databases_names(include_mirrors=False):
            connection = connections[name]
            connection.ops.execute_sql_flush(sql_flush(no_style(), connection, reset_sequences=False,
                                                       allow_cascade=self.available_apps is not None))

    TransactionTestCase._fixture_teardown = _fixture_teardown


def _one_default_ssl_context() -> None:
    """Every httpx client made with the default `verify=True` (each SDK client a test makes, each
    `httpx.post`) loaded the CA bundle into a new SSL context: 26 ms of CPU each, three or four per test
    that drives a server, a third of the CPU of tests/compat/test_reply_schemas.py. In the test process
    they share one per library (httpx's, from certifi; httpx2's, the SDKs', from the system's), made on
    first use with the same call. The tests' servers listen on plain HTTP, and those that speak TLS to a
    test CA pass a context of their own, which is left alone."""
    import httpx._transports.default as httpx_transport
    import httpx2._transports.default as httpx2_transport

    for module in (httpx_transport, httpx2_transport):
        made = module.create_ssl_context
        shared = {}

        def create_ssl_context(verify=True, cert=None, trust_env=True, _made=made, _shared=shared):
            if verify is not True or cert is not None:
                return _made(verify=verify, cert=cert, trust_env=trust_env)
            if trust_env not in _shared:
                _shared[trust_env] = _made(verify=True, cert=None, trust_env=trust_env)
            return _shared[trust_env]

        module.create_ssl_context = create_ssl_context


WHITENOISE_INDEX_SETTINGS = ("STATICFILES_DIRS", "STATICFILES_FINDERS", "INSTALLED_APPS", "WHITENOISE_MIMETYPES",
                             "WHITENOISE_ADD_HEADERS_FUNCTION", "WHITENOISE_IMMUTABLE_FILE_TEST")


def _static_files_indexed_once() -> None:
    """WhiteNoise indexes the static files (from the finders: the admin's, unfold's, Swagger UI's, the
    theme's) each time its middleware is made, and the test process makes one for every test client:
    34 ms of CPU each, 8 % of tests/native and tests/accounts (cProfile). A server process makes it once.
    Here the index is made once per set of WhiteNoise's options and of the settings it reads, and each new
    middleware takes a copy; its entries (a file's path, headers and stat) are not changed after they are
    made."""
    from whitenoise.middleware import WhiteNoiseMiddleware

    index = WhiteNoiseMiddleware.add_files_from_finders
    made = {}

    def add_files_from_finders(self):
        options = (self.static_prefix, self.max_age, self.allow_all_origins, self.charset, self.index_file,
                   *(repr(getattr(settings, name, None)) for name in WHITENOISE_INDEX_SETTINGS))
        if options not in made:
            before = dict(self.files)
            index(self)
            made[options] = {url: entry for url, entry in self.files.items() if before.get(url) is not entry}
        self.files.update(made[options])

    WhiteNoiseMiddleware.add_files_from_finders = add_files_from_finders


def pytest_configure(config):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    _flush_with_delete()
    _keep_content_types()
    _flush_without_the_command()
    _one_default_ssl_context()
    _static_files_indexed_once()
    # In this process nothing is written behind a test's back: its data lives in its own transaction,
    # which no other thread sees. Usage and calls are spooled and counts and times buffered as in
    # production; a test writes them with per_process.flush_all() where it needs them in the database
    # (gateway/state/write_behind.py). The server processes that tests start keep their threads.
    from gateway.state import write_behind

    write_behind.background = False
    # Every response a test receives from the Django test client is checked against the OpenAPI
    # document (tests/contract.py); GATEWAY_CONTRACT=off turns it off, =<file> records instead.
    mode = os.environ.get("GATEWAY_CONTRACT", "")
    if mode != "off":
        from tests.contract import install_client_checks, install_httpx_checks

        install_client_checks(record_to=mode or None)
        install_httpx_checks(record_to=mode or None)


def pytest_sessionfinish(session, exitstatus):
    """CI sets GATEWAY_FAIL_ON_SKIP: a test skipped for want of a service fails the run."""
    if os.environ.get("GATEWAY_FAIL_ON_SKIP") and exitstatus == 0:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None and reporter.stats.get("skipped"):
            session.exitstatus = 1


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        call_command("createcachetable", verbosity=0)
    yield
    with django_db_blocker.unblock():
        _end_other_sessions()


def _end_other_sessions() -> None:
    """Before pytest-django drops the test database at the session's end: end the other sessions still
    open on it on PostgreSQL (the connection of a thread that served a live gateway, a server process
    a test started), which would make the DROP fail and leave the database behind on a shared server,
    one per run (`.ci/run` saw one in each run: "is being accessed by other users")."""
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                       "WHERE datname = current_database() AND pid <> pg_backend_pid()")


def clear_counters():
    """Empty every counter, mark, stamp and cooldown of the backend in use (gateway/state/backend.py):
    Redis's keys, or the database cache's rows, which the flush after a transactional test leaves.
    Where the database is not open (yet) to the test, pytest-django refuses the query with a
    RuntimeError, and the database cache is left to the next call that may reach it."""
    from gateway.state import backend

    try:
        backend.current.reset()
    except RuntimeError as exc:
        if not str(exc).startswith("Database access not allowed"):
            raise


@pytest.fixture(autouse=True)
def _fresh_state(request):
    """Every test starts with empty request windows and, before and after it, with this process's own
    state emptied (gateway/state/per_process.py `reset_all`: what its buffers hold, unwritten, goes with
    the test's data, and so do the credential cache, the model registry's copy, the cooldowns' copy and
    the deployments' loads). The test's database is opened first, so the reset reaches counters kept
    in the database cache."""
    from gateway.state import per_process

    for name in ("transactional_db", "db"):
        if name in request.fixturenames:
            request.getfixturevalue(name)
            break
    clear_counters()
    per_process.reset_all()
    yield
    per_process.reset_all()


@pytest.fixture
def group(db):
    return AccountGroupFactory(api_access=True)


@pytest.fixture
def owner(group):
    return AccountFactory(group=group, email="owner@example.test", full_name="Olive Owner")


@pytest.fixture
def outsider(db):
    return AccountFactory(group=AccountGroupFactory(name="others", api_access=True), email="outsider@example.test")


@pytest.fixture
def redis_url(settings):
    """A Redis for the tests that need one: REDIS_URL, or the local server on database 14 (another
    for each xdist worker: TEST_REDIS_URL). The counters of this test run are cleared before and after."""
    import redis

    url = settings.REDIS_URL or TEST_REDIS_URL
    try:
        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
    except redis.ConnectionError:
        pytest.fail(f"no Redis at {url}: these tests need one. Start it with "
                    "`redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save '' --appendonly no`, "
                    "or point REDIS_URL at one.")
    settings.REDIS_URL = url
    clear_counters()
    yield url
    clear_counters()


@pytest.fixture(scope="session")
def live_gateway(django_db_setup, django_db_blocker):
    """The gateway under uvicorn on loopback, on the test database (tests that write data for it
    use `transactional_db`). It reads the model registry afresh on every request. The console's login
    limits are out of reach: the browser tests sign the same operator in many times a minute from one
    address, and the limits have tests of their own (tests/accounts/test_admin_login_limit.py)."""
    from tests.servers import web_process

    with django_db_blocker.unblock():
        with web_process(REGISTRY_TTL_SECONDS="0", ADMIN_LOGIN_LIMIT_PER_ADDRESS="1000",
                         ADMIN_LOGIN_LIMIT_PER_ACCOUNT="1000") as base:
            yield base


@pytest.fixture
def closed_port():
    """A loopback port where nothing listens: a connection to it is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]
