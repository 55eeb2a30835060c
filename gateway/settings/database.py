"""Settings of the database: DATABASES from DATABASE_URL, each process's connection pool,
and DATABASE_POOLER, what a connection pooler between the processes and PostgreSQL needs.

`DATABASE_POOLER`:

- `none` (the default): the processes reach PostgreSQL itself, or a pooler in session mode (a
  client keeps its server connection for as long as it is connected, so nothing changes).
- `transaction`: a pooler in transaction mode, PgBouncer's `pool_mode = transaction` (what the tests
  run, tests/faults/test_pgbouncer.py), or another with the same contract. Each transaction, and
  each statement outside one, may run on a different server connection, so nothing may outlive a
  transaction on the server. Server-side cursors go: Django declares them `WITH HOLD` outside a
  transaction and fetches each chunk in a transaction of its own (`.iterator()`, the console's
  choice lists), which through the pooler reads "cursor ... does not exist" once another client
  took that server connection. Prepared statements go: psycopg prepares a statement on one
  server connection and uses it on the next (`prepared statement "_pg3_0" does not exist`).
  Django 5.2 already leaves them off (`prepare_threshold` None, client-side binding cursors,
  which never prepare); this pins it, and refuses a DATABASE_URL that asks for them, or for
  `assume_role` (a `SET ROLE` per connection, which the pooler does not carry over). On SQLite
  (no pooler is put in front of it) the value changes nothing: a process a test starts on SQLite
  inherits it with the rest of the environment.

The value names the pooling mode rather than a product: the mode is what decides what breaks.
The gateway's own code keeps no session state (no `SET`, advisory lock, `LISTEN`, temporary
table or `COPY`; docs/decisions/0124-pgbouncer-transaction-mode.md), and the time zone Django sets on each new
connection is one of the parameters PgBouncer tracks per client and sets again on the server
connection a client is given.

Migrations are run against PostgreSQL itself (the `release` step with the direct URL,
docs/deploying.md "PostgreSQL through PgBouncer").

Part of gateway/settings/__init__.py, which puts what `from_env` returns beside its own.
"""

from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from gateway.settings.environment import Environment, reader

POOLERS = ("none", "transaction")


def from_env(env: Environment = None, *, var_dir: Path) -> dict:
    return {"DATABASES": databases(env, var_dir)}


def databases(env: Environment, var_dir: Path) -> dict:
    """The DATABASES setting: DATABASE_URL (SQLite in `var_dir` without it), as the pooler needs it."""
    env = reader(env)
    default = env.db_url("DATABASE_URL", default=f"sqlite:///{var_dir / 'gateway.sqlite3'}")
    if default["ENGINE"] == "django.db.backends.sqlite3":
        # WAL lets the worker read while the web process writes; the timeout rides out short locks.
        # IMMEDIATE takes the write lock when a transaction begins: a deferred one that reads, then
        # writes, fails at once with "database is locked" when another writer got in between (the
        # busy timeout does not apply to that upgrade), and the database cache drops such writes.
        default.setdefault("OPTIONS", {}).update(
            {"timeout": 20, "transaction_mode": "IMMEDIATE",
             "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"}
        )
        # Tests that start real server processes need a database file they can share.
        default["TEST"] = {"NAME": str(var_dir / "test-gateway.sqlite3")}
    if default["ENGINE"] == "django.db.backends.postgresql":
        # Under ASGI every request runs its database work in a thread of its own, so persistent
        # connections cannot be reused; a pool hands each one an open connection instead of a new
        # connect (about 4 ms and a server process fork per request otherwise). Through a pooler
        # in transaction mode these are client connections to the pooler, which hold no server
        # connection between transactions.
        default.setdefault("OPTIONS", {})["pool"] = {
            "min_size": env.int("DB_POOL_MIN_SIZE", default=2),
            "max_size": env.int("DB_POOL_MAX_SIZE", default=20),
            "timeout": env.float("DB_POOL_TIMEOUT_SECONDS", default=10.0),
        }
        # With a pool, Django's health checks are the pool's: each connection is checked as it is
        # handed out (psycopg_pool's check_connection, one empty round trip), so a connection broken
        # by a PostgreSQL restart is replaced instead of failing the request that gets it.
        default["CONN_HEALTH_CHECKS"] = True
    default["CONN_MAX_AGE"] = 0
    pooler = env.str("DATABASE_POOLER", default="none").strip().lower()
    if pooler not in POOLERS:
        raise ImproperlyConfigured(f"DATABASE_POOLER: {pooler!r} is neither 'none' nor 'transaction' (a pooler "
                                   "such as PgBouncer in pool_mode = transaction).")
    if pooler == "transaction" and default["ENGINE"] == "django.db.backends.postgresql":  # SQLite: no pooler
        _for_transaction_pooling(default)
    return {"default": default}


def _for_transaction_pooling(default: dict) -> None:
    options = default["OPTIONS"]
    if options.get("prepare_threshold") is not None:
        raise ImproperlyConfigured("DATABASE_POOLER=transaction: DATABASE_URL asks for prepared statements "
                                   "(prepare_threshold), which a pooler in transaction mode loses between "
                                   "transactions; remove it from the URL.")
    if options.get("assume_role"):
        raise ImproperlyConfigured("DATABASE_POOLER=transaction: assume_role sets the role once per connection "
                                   "(SET ROLE), which a pooler in transaction mode does not carry over; connect "
                                   "as that role instead.")
    options["prepare_threshold"] = None
    default["DISABLE_SERVER_SIDE_CURSORS"] = True
