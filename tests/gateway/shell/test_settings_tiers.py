"""The settings' two tiers (docs/configuration.md): every environment variable the settings read
(gateway/settings/) is an operator setting or an internal one, each in its table there, and every name in
those tables is read; the operator settings are all in `.env.example`. And the settings read the
environment and do nothing else: `gateway.settings.from_env` of any environment makes no folder or file
and changes nothing in the process's environment (gateway/ops/process_start.py does, as a process starts)."""

import ast
import os
import re
from pathlib import Path

from gateway.settings import from_env

REPO = Path(__file__).resolve().parents[3]
SETTINGS = REPO / "gateway" / "settings"
CONFIGURATION = REPO / "docs" / "configuration.md"
OPERATOR, INTERNAL = "Operator settings", "Internal (for tests and benchmarks)"
NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")
# django-environ's readers: env.str("NAME", ...), env.int, ..., and env("NAME") itself
ENV_READERS = {"str", "bool", "int", "float", "list", "tuple", "dict", "json", "url", "db_url", "db", "email_url",
               "email", "cache_url", "cache", "search_url", "path", "bytes", "get_value"}


def literal_name(call: ast.Call) -> str | None:
    first = call.args[0] if call.args else None
    return first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None


def environment_reads(source: str) -> tuple[set[str], list[int]]:
    """The variables `source` reads (`env.<type>("NAME")`, `env("NAME")`, `os.environ["NAME"]`,
    `os.environ.get("NAME")`, `os.getenv("NAME")`), and the lines of a read whose name is not written
    out (which this test could not hold to the docs)."""
    names, unnamed = set(), []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            on_env = (isinstance(func, ast.Name) and func.id == "env") or (
                isinstance(func, ast.Attribute) and func.attr in ENV_READERS
                and not (isinstance(func.value, ast.Name) and func.value.id != "env"))
            on_os = isinstance(func, ast.Attribute) and (
                (func.attr == "get" and ast.unparse(func.value) == "os.environ")
                or ast.unparse(func) == "os.getenv")
            if on_env or on_os:
                name = literal_name(node)
                if name is None:
                    unnamed.append(node.lineno)
                elif NAME.match(name):
                    names.add(name)
        elif isinstance(node, ast.Subscript) and ast.unparse(node.value) == "os.environ":
            key = node.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                names.add(key.value)
            else:
                unnamed.append(node.lineno)
    return names, unnamed


def settings_reads() -> dict[str, set[str]]:
    """Each variable the settings read, with the modules that read it."""
    found: dict[str, set[str]] = {}
    for path in sorted(SETTINGS.rglob("*.py")):
        names, unnamed = environment_reads(path.read_text())
        assert unnamed == [], f"{path.relative_to(REPO)}: a read whose name is not a literal, lines {unnamed}"
        for name in names:
            found.setdefault(name, set()).add(path.relative_to(REPO).as_posix())
    return found


def tier(heading: str, text: str | None = None) -> list[str]:
    """The variables of the tables under `heading` (a `###`), up to the next heading of its level or above:
    the code spans of each row's first cell."""
    lines = (CONFIGURATION.read_text() if text is None else text).splitlines()
    start = lines.index(f"### {heading}")
    names = []
    for line in lines[start + 1:]:
        if re.match(r"^#{1,3} ", line):
            break
        if line.startswith("| `"):
            names += [span for span in re.findall(r"`([^`]+)`", line.split("|")[1]) if NAME.match(span)]
    return names


def test_the_readers_find_each_kind_of_read_and_the_tables_their_names():
    source = ('import os\nenv.str("A", default="")\nenv.list("B_2")\nenv("C")\nreader(env).int("D")\n'
              'os.environ["E"] = "x"\nos.environ.get("F")\nos.getenv("G")\nenv.bool(name)\nsettings.get("H")\n'
              'os.environ[key]\n"I".lower()\n')
    assert environment_reads(source) == ({"A", "B_2", "C", "D", "E", "F", "G"}, [9, 11])
    doc = ("### Operator settings\n\n#### Group\n\n| Variable | Default |\n|---|---|\n| `A`, `B_2` | `x` |\n"
           "| `C` | `D` |\n\n### Internal (for tests and benchmarks)\n\n| `E` | 1 |\n\n## Next\n\n| `F` | |\n")
    assert tier(OPERATOR, doc) == ["A", "B_2", "C"]
    assert tier(INTERNAL, doc) == ["E"]


def test_every_variable_the_settings_read_is_in_one_of_the_two_tiers():
    operator, internal = tier(OPERATOR), tier(INTERNAL)
    reads = settings_reads()
    undocumented = {name: sorted(where) for name, where in reads.items() if name not in {*operator, *internal}}
    assert undocumented == {}, f"list each in docs/configuration.md, under {OPERATOR!r} or {INTERNAL!r}"
    assert set(operator) & set(internal) == set(), "a variable is in one tier"
    assert len(operator) == len(set(operator)) and len(internal) == len(set(internal)), "each listed once"


def test_every_documented_variable_is_read_by_the_settings():
    reads = settings_reads()
    assert [name for name in tier(OPERATOR) if name not in reads] == []
    assert [name for name in tier(INTERNAL) if name not in reads] == []


def test_every_operator_setting_is_in_env_example_with_its_comment():
    lines = (REPO / ".env.example").read_text().splitlines()
    listed = {match.group(1): number for number, line in enumerate(lines)
              if (match := re.match(r"^#? ?([A-Z][A-Z0-9_]*)=", line))}
    assert [name for name in tier(OPERATOR) if name not in listed] == []
    # each under a comment: the line above it is one, or another setting of the same comment
    for name in tier(OPERATOR):
        number = listed[name]
        while number > 0 and re.match(r"^#? ?[A-Z][A-Z0-9_]*=", lines[number - 1]):
            number -= 1
        assert number > 0 and lines[number - 1].startswith("# "), f".env.example: {name} has no comment"


def test_the_settings_read_the_environment_and_do_nothing_else(tmp_path):
    """What a process start does (the folders, the metrics folder in the environment, the secret key
    file) is not done by computing the settings, whatever the environment."""
    before = dict(os.environ)
    for environment in ({}, {"DEBUG": "true"}, {"PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "metrics"),
                                                 "USAGE_SPOOL_DIR": str(tmp_path / "spool"),
                                                 "CELERY_BROKER_URL": "filesystem://"}):
        found = from_env({"GATEWAY_VAR_DIR": str(tmp_path / "var"), **environment})
        assert found["VAR_DIR"] == tmp_path / "var" and found["SECRET_KEY_FILE"] == tmp_path / "var" / "secret-key"
    assert list(tmp_path.iterdir()) == []
    assert dict(os.environ) == before
