"""Command-line clients from the npm registry (Claude Code, Codex CLI, Gemini CLI) for the client tests.

Each pinned package is installed once per machine into GATEWAY_CLIENTS_DIR (default
~/.cache/gateway-clients/<package>@<version>), under a file lock so parallel test processes
install it once, and reused by later runs."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

CLIENTS_DIR = Path(os.environ.get("GATEWAY_CLIENTS_DIR") or Path.home() / ".cache" / "gateway-clients")
INSTALL_SECONDS = 540


def npm_binary(package: str, version: str, binary: str) -> Path:
    """The path of `binary` from `package@version`, installed first when it is not there."""
    root = CLIENTS_DIR / f"{package.replace('/', '+')}@{version}"
    path = root / "node_modules" / ".bin" / binary
    if path.exists():
        return path
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is not installed: the client tests need Node.js and npm (apt-get install nodejs npm)")
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not path.exists():
            subprocess.run([npm, "install", "--prefix", str(root), "--no-audit", "--no-fund", "--no-save",
                            "--loglevel=error", f"{package}@{version}"],
                           check=True, timeout=INSTALL_SECONDS, capture_output=True)
    if not path.exists():
        raise RuntimeError(f"npm installed {package}@{version} but {path} is missing")
    return path
