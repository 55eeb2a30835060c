"""Which app may import which (.importlinter, docs/architecture.md), held in the suite: Import
Linter's contracts are kept by today's code, and they do refuse an import they forbid (so a
config that silently checks nothing cannot pass). And one route style: an endpoint takes one
method, a route that takes several joins them with `by_method` (accounts/endpoints.py)."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / ".importlinter"
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"  # the test run's own environment


def lint_imports(config: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--no-logo", str(config)], cwd=REPO,
                          env={**os.environ, "COLUMNS": "200"},  # no report line wrapped
                          capture_output=True, text=True, timeout=120)


CONTRACTS = ("The API apps over accounts over gateway; compat and native apart KEPT",
             "Nothing imports compat or native KEPT",
             "No circles between the modules of a package KEPT",
             "Inside gateway: the rooms import one way, top to bottom KEPT")


def test_the_import_contracts_are_kept():
    result = lint_imports(CONFIG)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    for name in CONTRACTS:
        assert name in output, output
    assert "Contracts: 4 kept, 0 broken." in output, output
    assert "ignored imports" not in output, output  # no exception left to any contract


def test_an_import_outside_the_contracts_breaks_them(tmp_path):
    """With two of gateway's rooms swapped (telemetry above the HTTP edge), the edge's use of the
    logs is refused, and the report names the very imports."""
    config = tmp_path / "importlinter.ini"
    text = CONFIG.read_text()
    assert "    web\n    telemetry\n" in text
    config.write_text(text.replace("    web\n    telemetry\n", "    telemetry\n    web\n"))
    result = lint_imports(config)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "Contracts: 3 kept, 1 broken." in output, output
    assert "gateway.web is not allowed to import gateway.telemetry:" in output, output
    assert "gateway.web.middleware -> gateway.telemetry.logjson (l." in output, output


# --- The tree is the map: gateway's root holds the Django shell, its rooms stay small ------------

GATEWAY = REPO / "gateway"
SHELL = {"__init__.py", "settings", "urls.py", "asgi.py", "celery.py", "gunicorn_conf.py", "apps.py", "admin.py",
         "models", "migrations", "management"}
ROOMS = {"web", "telemetry", "state", "registry", "usage", "limits", "upstream", "calls", "formats", "console",
         "ops", "openapi", "cache", "guard", "files"}
ROOM_LINES, ROOM_MODULES = 1500, 12


def test_gateways_root_holds_only_the_django_shell_and_its_rooms():
    entries = {p.name for p in GATEWAY.iterdir() if p.name != "__pycache__"}
    assert entries == SHELL | ROOMS


@pytest.mark.parametrize("room", sorted(ROOMS))
def test_each_room_says_what_it_holds_and_is_small_enough_to_read(room):
    folder = GATEWAY / room
    doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text()))
    assert doc and "May import" in doc, f"gateway/{room}/__init__.py: a docstring saying what it may import"
    for package in [folder, *(p for p in folder.iterdir() if p.is_dir() and (p / "__init__.py").exists())]:
        modules = [p for p in package.glob("*.py") if p.name != "__init__.py"]
        lines = sum(len(p.read_text().splitlines()) for p in modules)
        assert len(modules) <= ROOM_MODULES, f"{package}: {len(modules)} modules"
        nested = [p for p in package.iterdir() if p.is_dir() and (p / "__init__.py").exists()]
        if not nested:
            assert lines <= ROOM_LINES, f"{package}: {lines} lines"


# --- One route style: a view per method -----------------------------------------------------------

APPS = ("accounts", "admin_api", "compat", "native", "routines", "gateway")

# The functions that may compare `request.method`, and why none of them is a choice of behaviour
# by method (that is `by_method`'s job):
METHOD_CHECKS_ALLOWED = {
    ("accounts/endpoints.py", "check_method"): "the endpoint wrapper's own 405",
    ("accounts/admin_login.py", "login"): "the Django admin's login form (out of the API's routes)",
    ("routines/views.py", "hook"): "a malformed webhook token is the plain 404 for every method: "
                                   "before the 405 for the others, after the per-address count for POST",
    ("gateway/ops/health.py", "livez"): "probe outside `endpoint` (no credential, no ceiling): 405 guard",
    ("gateway/ops/health.py", "readyz"): "probe outside `endpoint` (no credential, no ceiling): 405 guard",
    ("gateway/ops/metrics_view.py", "metrics"): "scrape outside `endpoint` (its own credential): 405 guard",
    ("gateway/openapi/views.py", "openapi_json"): "document outside `endpoint` (no ceiling): 405 guard",
}


def _product_modules():
    for app in APPS:
        for path in sorted((REPO / app).rglob("*.py")):
            if "migrations" not in path.parts:
                yield path.relative_to(REPO).as_posix(), ast.parse(path.read_text(), filename=str(path))


def _functions(tree):
    """Every function of the module with its own nodes (those of the functions inside it excluded)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inner, stack = [], list(ast.iter_child_nodes(node))
            while stack:
                child = stack.pop()
                inner.append(child)
                if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                    stack.extend(ast.iter_child_nodes(child))
            yield node, inner


def _is_request_method(node) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "method"
            and isinstance(node.value, ast.Name) and node.value.id == "request")


def test_every_endpoint_takes_one_method():
    several = []
    for name, tree in _product_modules():
        for function, _ in _functions(tree):
            for decorator in function.decorator_list:
                if (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Name)
                        and decorator.func.id == "endpoint" and len(decorator.args) != 1):
                    several.append(f"{name}:{decorator.lineno} {function.name}")
    assert several == [], "one endpoint per method, joined in urls.py with by_method"


def test_no_view_chooses_by_request_method():
    found = set()
    for name, tree in _product_modules():
        for function, nodes in _functions(tree):
            for node in nodes:
                compared = (isinstance(node, ast.Compare)
                            and any(map(_is_request_method, [node.left, *node.comparators])))
                matched = isinstance(node, ast.Match) and _is_request_method(node.subject)
                if compared or matched:
                    found.add((name, function.name))
    assert found - set(METHOD_CHECKS_ALLOWED) == set(), "one endpoint per method, joined with by_method"
    assert set(METHOD_CHECKS_ALLOWED) - found == set(), "an allowed exception that is gone: drop it"


@pytest.mark.parametrize(("path", "allow"), [
    ("/api/v1/conversations/1", "GET, DELETE"),
    ("/api/v1/collections", "GET, POST"),
    ("/api/v1/routines", "GET, POST"),
    ("/api/v1/routines/1", "GET, PUT, DELETE"),
])
def test_a_method_a_joined_route_does_not_take_is_405_before_the_credential(client, db, path, allow):
    response = client.patch(path, {}, content_type="application/json", headers={"Accept": "application/json"})
    assert response.status_code == 405
    assert response["Allow"] == allow
    assert response.json() == {"message": "Method Not Allowed."}
    assert "X-RateLimit-Limit" not in response


MAX_MODULE_LINES = 400


def test_no_module_is_over_400_lines():
    """Product code, tests and benchmarks: a module that grows past 400 lines is split by what it
    holds (docs/architecture.md)."""
    tracked = subprocess.run(["git", "ls-files", "*.py"], cwd=REPO, capture_output=True, text=True, check=True)
    sizes = {name: len((REPO / name).read_text().splitlines()) for name in tracked.stdout.split()}
    assert len(sizes) > 300
    assert {name: lines for name, lines in sizes.items() if lines > MAX_MODULE_LINES} == {}
