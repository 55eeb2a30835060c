"""Which app may import which (.importlinter, docs/architecture.md), held in the suite: Import
Linter's contracts are kept by today's code, and they do refuse an import they forbid (so a
config that silently checks nothing cannot pass)."""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONFIG = REPO / ".importlinter"
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"  # the test run's own environment


def lint_imports(config: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--no-logo", str(config)], cwd=REPO,
                          env={**os.environ, "COLUMNS": "200"},  # no report line wrapped
                          capture_output=True, text=True, timeout=120)


def test_the_import_contracts_are_kept():
    result = lint_imports(CONFIG)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    for name in ("The API apps over accounts over gateway; compat and native apart KEPT",
                 "Nothing imports compat or native KEPT",
                 "No circles between the modules of a package KEPT"):
        assert name in output, output
    assert "Contracts: 3 kept, 0 broken." in output, output


def test_an_import_outside_the_contracts_breaks_them(tmp_path):
    """Without its declared exception, gateway's read of the accounts' table is refused, and the
    report names the very import."""
    config = tmp_path / "importlinter.ini"
    config.write_text("".join(line for line in CONFIG.read_text().splitlines(keepends=True)
                              if line.strip() != "gateway.usage_writer -> accounts.models"))
    result = lint_imports(config)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "Contracts: 2 kept, 1 broken." in output, output
    assert "gateway is not allowed to import accounts:" in output, output
    assert "gateway.usage_writer -> accounts.models (l." in output, output
