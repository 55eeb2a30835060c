"""Each pytest-xdist worker gets a house of its own, before Django's settings are read.

Loaded with `-p tests.parallel` (pyproject.toml's addopts), in every test process. In a worker
(`-n N`: xdist names it `gw0`, `gw1`, … in PYTEST_XDIST_WORKER before it reads its configuration),
it moves what the tests of one process share and would step on in another's:

- GATEWAY_VAR_DIR (the SQLite test database, the usage and calls spools, the broker's folders, the
  metrics files, the server processes' logs): a folder per worker inside the run's own;
- USAGE_SPOOL_DIR and PROMETHEUS_MULTIPROC_DIR, when the environment sets them: likewise;
- the Redis database: REDIS_URL's (or, without it, the local one's database 14 that the tests
  needing a Redis take: GATEWAY_TEST_REDIS_URL) plus the worker's number, modulo 16, so the reset of
  one worker's counters (`gw:*` deleted) never empties another's. Run 1 of .ci/run (database 13) and run 2 (14) come one
  after the other, so their workers' databases may overlap in number, never in time.

The PostgreSQL test database needs nothing: pytest-django names it per worker (`test_<name>_gw0`).
Ports are free ones picked per server (tests/servers.py free_port). Without xdist nothing changes.

The `serial` marker: tests that must not run beside another test process, given here to every test
of the folders that start whole stacks of their own (SERIAL_FOLDERS: the fault stacks, the
multi-host stack in network namespaces, a browser, the coding agents, the container image built and
run), which never run beside the other tests; a module elsewhere with such a promise marks itself
(`pytestmark = pytest.mark.serial`: bin/serve's shutdown within 10 s). .ci/run runs `-m "not serial"`
with `-n 3`, then `-m serial` by themselves, a module at a time in each of two processes (`--dist
loadscope`): each module's stack is its own, and most of their time is spent waiting on a restart, a
lease or a failover.

The `storage` marker (tests/storage_marker.py): the tests whose outcome can depend on the storage
backend, which .ci/run runs a second time on the embedded default.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

REDIS_DATABASES = 16
SERIAL_FOLDERS = ("faults", "scale", "browser", "clients", "container")  # under tests/
# minutes where the rest take seconds: given out first, longest first (a stable sort keeps the others'
# order). The parallel part's, then the serial part's modules, measured (.ci/run prints the durations)
LONGEST = ("tests/fuzz/", "test_collections_embedded.py", "test_procfile.py", "test_end_to_end.py", "test_traces.py",
           "tests/faults/test_faults.py", "tests/container/", "tests/faults/test_sentinel_failover.py",
           "tests/faults/test_pgbouncer.py", "tests/gateway/shell/test_bin_serve.py",
           "tests/faults/test_batch_faults.py", "tests/scale/test_host_faults.py",
           "tests/scale/test_seen_everywhere.py",
           "tests/browser/test_console_walk_browser.py", "tests/scale/test_redis_failover.py",
           "tests/scale/test_across_hosts.py", "tests/browser/test_console_forms_browser.py",
           "tests/clients/test_claude_code.py", "tests/clients/test_gemini_cli_gateway.py")
DEFAULT_TEST_REDIS = "redis://127.0.0.1:6379/14"  # tests/conftest.py redis_url's, without REDIS_URL


def worker_number() -> int | None:
    """0 for gw0, 1 for gw1, …; None outside an xdist worker."""
    found = re.fullmatch(r"gw(\d+)", os.environ.get("PYTEST_XDIST_WORKER", ""))
    return int(found.group(1)) if found else None


def redis_url_for(url: str, number: int) -> str:
    """`url` on its database plus `number` (modulo 16); the rest of it as it was."""
    found = re.fullmatch(r"(rediss?://[^/]*)(?:/(\d*))?(\?.*)?", url)
    if found is None:
        return url  # a unix socket or sentinel URL: left as it is
    base, database, query = found.group(1), int(found.group(2) or 0), found.group(3) or ""
    return f"{base}/{(database + number) % REDIS_DATABASES}{query}"


def worker_environment(environ: dict[str, str], number: int, repo: Path) -> dict[str, str]:
    """The variables worker `number` sets, from the run's environment `environ`."""
    name = f"gw{number}"
    var_dir = Path(environ.get("GATEWAY_VAR_DIR") or repo / "var") / name
    changes = {"GATEWAY_VAR_DIR": str(var_dir),
               "GATEWAY_TEST_REDIS_URL": redis_url_for(environ.get("GATEWAY_TEST_REDIS_URL") or DEFAULT_TEST_REDIS,
                                                       number)}
    if environ.get("REDIS_URL"):  # the worker's tests that need a Redis take its own, as without xdist
        changes["REDIS_URL"] = changes["GATEWAY_TEST_REDIS_URL"] = redis_url_for(environ["REDIS_URL"], number)
    for folder in ("USAGE_SPOOL_DIR", "PROMETHEUS_MULTIPROC_DIR"):
        if environ.get(folder):
            changes[folder] = str(Path(environ[folder]) / name)
    return changes


def _settle() -> None:
    number = worker_number()
    if number is None:
        return
    changes = worker_environment(dict(os.environ), number, Path(__file__).resolve().parents[1])
    os.environ.update(changes)
    Path(changes["GATEWAY_VAR_DIR"]).mkdir(parents=True, exist_ok=True)


def is_serial(relative_path: str) -> bool:
    """Whether a test file (its path from the repository's root) is in a folder whose tests run alone."""
    parts = Path(relative_path).parts
    return len(parts) > 2 and parts[0] == "tests" and parts[1] in SERIAL_FOLDERS


def rank(nodeid: str) -> int:
    """Where a test goes in the order: the place of the first LONGEST name it holds, the others after."""
    return next((place for place, name in enumerate(LONGEST) if name in nodeid), len(LONGEST))


def pytest_collection_modifyitems(config, items):
    import pytest

    from tests.storage_marker import is_storage

    root = Path(str(config.rootpath))
    for item in items:
        if is_serial(Path(str(item.path)).relative_to(root).as_posix()):
            item.add_marker(pytest.mark.serial)
        elif is_storage(str(item.path)):
            item.add_marker(pytest.mark.storage)
    # the longest tests first, so that neither process is left running one alone at the end
    items.sort(key=lambda item: rank(item.nodeid))


_settle()  # at import: `-p` plugins are imported before pytest-django reads the settings
