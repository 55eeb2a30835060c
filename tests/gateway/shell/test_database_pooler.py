"""DATABASE_POOLER (gateway/settings/database.py): what a pooler in transaction mode in
front of PostgreSQL needs, and the combinations it refuses. Through PgBouncer itself:
tests/faults/test_pgbouncer.py. Each case is `databases` of an environment of its own (a mapping), none
of the test run's."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from gateway.settings.database import databases

POSTGRES = "postgres://gw:secret@127.0.0.1:6432/gateway"


def test_it_leaves_a_direct_connection_as_it_was(tmp_path):
    default = databases({"DATABASE_URL": POSTGRES}, tmp_path)["default"]
    assert "DISABLE_SERVER_SIDE_CURSORS" not in default and "prepare_threshold" not in default["OPTIONS"]
    assert default["OPTIONS"]["pool"] == {"min_size": 2, "max_size": 20, "timeout": 10.0}
    assert default["CONN_MAX_AGE"] == 0 and default["CONN_HEALTH_CHECKS"] is True


def test_transaction_pooling_turns_server_side_cursors_and_prepared_statements_off(tmp_path):
    default = databases({"DATABASE_URL": POSTGRES, "DATABASE_POOLER": " Transaction "}, tmp_path)["default"]
    assert default["DISABLE_SERVER_SIDE_CURSORS"] is True
    assert "prepare_threshold" in default["OPTIONS"] and default["OPTIONS"]["prepare_threshold"] is None
    assert default["OPTIONS"]["pool"]["max_size"] == 20  # each process's pool of connections to the pooler stays
    assert (default["HOST"], default["PORT"], default["NAME"]) == ("127.0.0.1", 6432, "gateway")


@pytest.mark.parametrize(("env", "refused"), [
    ({"DATABASE_POOLER": "pgbouncer"}, "'pgbouncer' is neither 'none' nor 'transaction'"),
    ({"DATABASE_POOLER": "transaction", "DATABASE_URL": f"{POSTGRES}?prepare_threshold=5"}, "prepare_threshold"),
    ({"DATABASE_POOLER": "transaction", "DATABASE_URL": f"{POSTGRES}?assume_role=owner"}, "SET ROLE"),
])
def test_it_refuses_what_cannot_work(tmp_path, env, refused):
    with pytest.raises(ImproperlyConfigured, match=refused):
        databases(env, tmp_path)


def test_it_changes_nothing_on_sqlite(tmp_path):
    default = databases({"DATABASE_POOLER": "transaction"}, tmp_path)["default"]
    assert default["ENGINE"] == "django.db.backends.sqlite3" and "DISABLE_SERVER_SIDE_CURSORS" not in default
    assert "prepare_threshold" not in default["OPTIONS"]


def test_a_url_may_still_pass_other_options(tmp_path):
    options = databases({"DATABASE_URL": f"{POSTGRES}?sslmode=require&application_name=gateway",
                         "DATABASE_POOLER": "transaction"}, tmp_path)["default"]["OPTIONS"]
    assert (options["sslmode"], options["application_name"]) == ("require", "gateway")
