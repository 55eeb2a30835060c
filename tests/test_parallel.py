"""Each xdist worker's own house (tests/parallel.py): its var folder, Redis database and folders."""

from pathlib import Path

import pytest

from tests.parallel import LONGEST, is_serial, rank, redis_url_for, worker_environment

REPO = Path("/repo")


@pytest.mark.parametrize(("url", "number", "expected"), [
    ("redis://127.0.0.1:6379/13", 0, "redis://127.0.0.1:6379/13"),
    ("redis://127.0.0.1:6379/13", 1, "redis://127.0.0.1:6379/14"),
    ("redis://127.0.0.1:6379/14", 2, "redis://127.0.0.1:6379/0"),  # modulo Redis's 16 databases
    ("redis://127.0.0.1:6379", 1, "redis://127.0.0.1:6379/1"),
    ("redis://:secret@cache:6380/3?socket_timeout=5", 1, "redis://:secret@cache:6380/4?socket_timeout=5"),
    ("unix:///run/redis.sock", 1, "unix:///run/redis.sock"),
])
def test_each_worker_takes_the_next_redis_database(url, number, expected):
    assert redis_url_for(url, number) == expected


def test_a_worker_moves_its_folders_and_redis_and_leaves_the_rest():
    environ = {"GATEWAY_VAR_DIR": "/tmp/run", "REDIS_URL": "redis://127.0.0.1:6379/13",
               "USAGE_SPOOL_DIR": "/srv/spool", "DATABASE_URL": "postgres://postgres@127.0.0.1/ci"}
    assert worker_environment(environ, 1, REPO) == {
        "GATEWAY_VAR_DIR": "/tmp/run/gw1", "REDIS_URL": "redis://127.0.0.1:6379/14",
        "GATEWAY_TEST_REDIS_URL": "redis://127.0.0.1:6379/14", "USAGE_SPOOL_DIR": "/srv/spool/gw1"}


def test_without_an_environment_a_worker_still_gets_its_own_folder_and_test_redis():
    assert worker_environment({}, 0, REPO) == {"GATEWAY_VAR_DIR": "/repo/var/gw0",
                                               "GATEWAY_TEST_REDIS_URL": "redis://127.0.0.1:6379/14"}


@pytest.mark.parametrize(("path", "serial"), [
    ("tests/faults/test_faults.py", True), ("tests/scale/test_cluster.py", True),
    ("tests/browser/test_sso_browser.py", True), ("tests/clients/test_codex_cli.py", True),
    ("tests/container/test_image.py", True),
    ("tests/gateway/limits/test_quotas.py", False), ("tests/test_parallel.py", False),
    ("tests/compat/faults_like.py", False),
])
def test_the_stacks_folders_run_alone(path, serial):
    assert is_serial(path) is serial


def test_a_test_outside_those_folders_is_not_marked_serial(request):
    assert request.node.get_closest_marker("serial") is None


def test_no_test_takes_a_redis_database_of_its_own_by_number():
    """The tests' Redis is REDIS_URL or TEST_REDIS_URL, the worker's own: a number written in a test would
    be shared by every worker (the fault and multi-host stacks start Redis servers of their own)."""
    repo = Path(__file__).resolve().parents[1]
    mine = {"tests/conftest.py", "tests/parallel.py", "tests/test_parallel.py"}
    found = [path.relative_to(repo).as_posix() for path in (repo / "tests").rglob("*.py")
             if path.relative_to(repo).as_posix() not in mine
             and "redis://127.0.0.1:6379/14" in path.read_text()]
    assert found == []


def test_the_longest_modules_go_first_in_the_order_measured():
    order = ["tests/browser/test_sso_browser.py::test_a", "tests/scale/test_host_faults.py::test_b",
             "tests/faults/test_faults.py::test_c", "tests/accounts/test_keys.py::test_d",
             "tests/container/test_image.py::test_e"]
    assert sorted(order, key=rank) == [
        "tests/faults/test_faults.py::test_c", "tests/container/test_image.py::test_e",
        "tests/scale/test_host_faults.py::test_b", "tests/browser/test_sso_browser.py::test_a",
        "tests/accounts/test_keys.py::test_d"]


def test_every_name_of_the_longest_still_names_tests():
    """A module renamed or gone would leave its place in the order to nothing, and its tests last."""
    repo = Path(__file__).resolve().parents[1]
    files = [path.relative_to(repo).as_posix() for path in (repo / "tests").rglob("test_*.py")]
    assert [name for name in LONGEST if not any(name in path for path in files)] == []
