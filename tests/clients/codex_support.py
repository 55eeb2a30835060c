"""Codex CLI (`codex exec`) run offline against a gateway's /v1/responses, and a proxy that refuses and
records every connection it tries beyond loopback.

Codex CLI 0.169.0 is the npm registry's newest release here. Its package holds a launcher only; the native
binary comes from the registry too, as the optional dependency `@openai/codex-linux-x64`, so nothing outside
the registry is fetched. Codex speaks only the Responses API to a provider (`wire_api = "responses"`)."""

from __future__ import annotations

import contextlib
import shutil
import socketserver
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

from tests.clients.npm import npm_binary

VERSION = "0.169.0"
RUN_SECONDS = 120
KEY_VARIABLE = "GATEWAY_API_KEY"
PROMPT = "Run `echo hi` in the shell and tell me what it printed."
# The scripted call: Codex's shell tool (exec_command, the first tool it offers) with a harmless command.
TOOL_NAME = "exec_command"
TOOL_ARGUMENTS = {"cmd": "echo hi"}

# Codex's provider for the gateway, asked for no retries (a refusal ends the run at once), no update check,
# no analytics, no feedback, no plugins (the plugins feature, on by default, reaches github.com,
# api.github.com and chatgpt.com). `web_search = "disabled"` is added unless a test wants Codex's default,
# in which it offers OpenAI's hosted web search on every call (docs/decisions/0107-responses-with-tools.md).
CONFIG = """\
model = "{model}"
model_provider = "gateway"
approval_policy = "never"
sandbox_mode = "read-only"
check_for_update_on_startup = false
{web_search}
[analytics]
enabled = false

[feedback]
enabled = false

[features]
plugins = false

[model_providers.gateway]
name = "gateway"
base_url = "{base_url}"
wire_api = "responses"
env_key = "{key_variable}"
request_max_retries = 0
stream_max_retries = 0
"""


def codex_binary() -> Path:
    return npm_binary("@openai/codex", VERSION, "codex")


@dataclass
class Run:
    """One `codex exec` run: its exit, its output, and the hosts it tried to reach beyond loopback."""

    returncode: int
    stdout: str
    stderr: str
    outside: list[str]


class _Refuser(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        first = self.request.makefile("rb").readline(4096).decode("latin-1").split()
        self.server.seen.append(first[1] if len(first) > 1 else "?")  # CONNECT host:port, or GET http://host/…
        self.request.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")


@contextlib.contextmanager
def refusing_proxy():
    """An HTTP proxy on loopback that answers every request 403; yields (its URL, the targets asked for)."""
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Refuser)
    server.daemon_threads = True
    server.seen = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", server.seen
    finally:
        server.shutdown()
        server.server_close()


def run_codex(base_url: str, key: str, model: str, folder: Path, *, web_search_off: bool = True) -> Run:
    """`codex exec` with a fresh HOME/CODEX_HOME and working folder, its provider at `base_url` (the
    gateway's /v1), every connection beyond loopback sent to a proxy that refuses it. The environment is
    built from nothing, so no OPENAI_* or CODEX_* setting of the machine reaches it. Commands run in
    Codex's read-only sandbox (its bundled bubblewrap works here), without asking."""
    home, work = folder / "home", folder / "work"
    for path in (home, work):
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
    (home / ".codex").mkdir()
    (home / ".codex" / "config.toml").write_text(CONFIG.format(
        model=model, web_search='web_search = "disabled"\n' if web_search_off else "", base_url=base_url,
        key_variable=KEY_VARIABLE))
    with refusing_proxy() as (proxy, seen):
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "CODEX_HOME": str(home / ".codex"),
               "TZ": "UTC", "LANG": "C.UTF-8", KEY_VARIABLE: key,
               **{name: proxy for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                                           "all_proxy")},
               "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
        args = [str(codex_binary()), "exec", "--strict-config", "--skip-git-repo-check", "--color", "never", PROMPT]
        done = subprocess.run(args, cwd=work, env=env, capture_output=True, text=True, timeout=RUN_SECONDS,
                              stdin=subprocess.DEVNULL)
        return Run(done.returncode, done.stdout, done.stderr, sorted(set(seen)))
