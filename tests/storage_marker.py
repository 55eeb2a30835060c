"""The `storage` marker: the tests whose outcome can depend on the storage backend.

.ci/run runs the whole parallel suite on PostgreSQL and Redis, then again on the embedded default
(SQLite, the database cache for the counters, the file broker) only the tests marked `storage`: the
second run is there for what behaves differently there, and a test of a translation or a console
form behaves the same on both.

A module is marked when it reaches a storage seam itself, read from its source (no import, no run):
- it imports from the code that keeps state: the counters, windows and slots (`gateway.state`,
  `gateway.limits`), the caches (`gateway.cache`, `django.core.cache`, the credential and principal
  caches), the spool and its drain (`gateway.usage`), ingest (the collections' documents, vectors,
  search), the database's locking and transactions (`django.db.transaction` and `connection`), the
  broker (`celery`, `kombu`, the routines' and batches' queues), stored files, the settings that choose
  the backends, the health checks of each;
- it asks for a fixture that hands it one of those (`redis_url`, `usage_of`, `call_of`);
- it calls one by name (`select_for_update`, `flush_all`, `wait_for_usage`);
- or it is named for one (`test_response_cache.py`, `test_collections_embedded.py`, `test_outages.py`,
  `test_bad_input.py`, whose text PostgreSQL keeps and SQLite does not):
  those drive the seam through HTTP alone, as a client does.
A test that reaches them only through a call's common path (every proxied call counts and spools)
is covered by the marked tests of each seam; tests/test_storage_marker.py holds the rule to the
suite: every seam has marked tests, and an import written another way (`from gateway import state`)
is seen too.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

STORAGE_PACKAGES = (
    "gateway.state", "gateway.limits",  # counters, windows, slots, loads
    "gateway.cache", "django.core.cache", "accounts.principal_cache", "accounts.key_use",  # caches
    "accounts.idempotency",
    "gateway.usage", "tests.servers.wait_for_usage",  # the spool and its drain
    "native.collections", "native.vectors", "native.search", "native.retrieval",  # ingest
    "django.db.transaction", "django.db.connection", "django.db.connections",  # locking
    "celery", "kombu", "routines.tasks", "batches",  # the broker and what it carries
    "gateway.files",  # stored files
    "gateway.settings", "gateway.ops",  # which backend is chosen, and its health
)
STORAGE_FIXTURES = frozenset({"redis_url", "usage_of", "call_of"})
STORAGE_CALLS = frozenset({"select_for_update", "flush_all", "wait_for_usage"})
STORAGE_WORDS = ("cache", "spool", "usage", "collection", "ingest", "files", "batch", "budget", "quota", "limit",
                 "idempot", "counter", "slot", "window", "embedded", "outage", "procfile", "deploy", "health",
                 "worker", "fuzz", "bad_input")


def _names(tree: ast.AST) -> tuple[set[str], set[str], set[str]]:
    """The module names it imports (each `from a import b` as a and a.b), the arguments of its
    functions, and the attributes and names it uses."""
    imported, arguments, used = set(), set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            imported.add(node.module)
            imported.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments.update(arg.arg for arg in node.args.args + node.args.kwonlyargs)
        elif isinstance(node, ast.Attribute):
            used.add(node.attr)
        elif isinstance(node, ast.Name):
            used.add(node.id)
    return imported, arguments, used


def seams_of(source: str) -> set[str]:
    """What of the storage a module's source reaches: the packages, fixtures and calls it names."""
    imported, arguments, used = _names(ast.parse(source))
    found = {package for package in STORAGE_PACKAGES
             if any(name == package or name.startswith(package + ".") for name in imported)}
    return found | (arguments & STORAGE_FIXTURES) | (used & STORAGE_CALLS)


@lru_cache(maxsize=None)
def is_storage(path: str) -> bool:
    """Whether the test module at `path` reaches a storage seam, or is named for one."""
    return any(word in Path(path).name for word in STORAGE_WORDS) or bool(seams_of(Path(path).read_text()))
