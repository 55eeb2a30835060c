"""The `storage` marker (tests/storage_marker.py) misses no test that reaches the counters, a cache,
the spool, ingest, the database's locking or the broker: .ci/run's run on the embedded default takes
only those."""

import importlib
from pathlib import Path

import pytest

from tests.parallel import is_serial
from tests.storage_marker import STORAGE_PACKAGES, is_storage, seams_of

REPO = Path(__file__).resolve().parents[1]

# each seam the embedded default keeps its own way, and a module that tries it there
SEAM_TESTS = {
    "counters": "tests/gateway/state/test_counters.py",  # the database cache's counts across processes
    "cache": "tests/compat/test_response_cache.py",
    "spool": "tests/gateway/usage/test_spool.py",
    "ingest": "tests/native/test_collections_embedded.py",
    "locking": "tests/compat/test_budgets.py",  # two processes racing past one budget
    "broker": "tests/routines/test_end_to_end.py",
    "text the database refuses": "tests/compat/test_bad_input.py",
}


@pytest.mark.parametrize("seam", sorted(SEAM_TESTS))
def test_every_seam_has_tests_that_run_on_the_embedded_default(seam):
    assert is_storage(str(REPO / SEAM_TESTS[seam]))


@pytest.mark.parametrize(("source", "seams"), [
    ("from gateway import state", {"gateway.state"}),
    ("import gateway.usage.spool as spool", {"gateway.usage"}),
    ("from django.db import transaction", {"django.db.transaction"}),
    ("from django.core.cache import caches", {"django.core.cache"}),
    ("from tests.servers import wait_for_usage", {"tests.servers.wait_for_usage"}),
    ("def test_it(redis_url):\n    pass", {"redis_url"}),
    ("def test_it(world):\n    world.rows.select_for_update()", {"select_for_update"}),
    ("from gateway.formats import chat\nimport json", set()),
    ("from .support import state", set()),  # a module of the tests' own, not the product's
])
def test_a_seam_is_seen_however_the_import_is_written(source, seams):
    assert seams_of(source) == seams


def test_a_module_of_translations_alone_is_not_marked():
    module = REPO / "tests/gateway/formats/test_formats_anthropic.py"
    assert module.exists() and not is_storage(str(module))


def test_every_test_module_reaching_the_storage_code_carries_the_marker(request):
    """Every collected test of this run: the marker is on exactly the tests of the modules that reach a
    seam, outside the serial stacks (they bring their own storage and run once)."""
    wrong = []
    for item in request.session.items:
        path = Path(str(item.path))
        relative = path.relative_to(REPO).as_posix()
        expected = is_storage(str(path)) and not is_serial(relative)
        if (item.get_closest_marker("storage") is not None) != expected:
            wrong.append(item.nodeid)
    assert wrong == []


def test_no_product_package_named_here_is_gone():
    """A package renamed in the product would silently unmark its tests."""
    missing = [package for package in STORAGE_PACKAGES if package.split(".")[0] != "tests"
               and not _exists(package)]
    assert missing == []


def _exists(package: str) -> bool:
    parts = package.split(".")
    if parts[0] in {"django", "celery", "kombu"}:
        module = importlib.import_module(".".join(parts[:-1]) if parts[0] == "django" and parts[1] == "db" else package)
        return parts[0] != "django" or parts[1] != "db" or hasattr(module, parts[-1])
    path = REPO.joinpath(*parts)
    return path.is_dir() or path.with_suffix(".py").exists()
