"""Gemini CLI (`gemini -p`) run offline against a server of Gemini's own API: straight at the fake Gemini
(tests/clients/gemini_fake.py), or at the gateway's Gemini surface with the gateway key.

Gemini CLI 0.61.0 is the npm registry's newest release here. Its package is one JavaScript bundle (the
@google/genai SDK inside); its optional native dependencies (node-pty, keytar) come from the registry too, so
nothing outside the registry is fetched. It calls Gemini's API as the SDK does, at v1beta:
POST {base}/v1beta/models/{model}:streamGenerateContent?alt=sse with the key in x-goog-api-key.

How it is pointed and kept offline, from its source:
- GOOGLE_GEMINI_BASE_URL is the base URL; GEMINI_API_KEY the key. Set alone, the base URL selects its
  "gateway" auth type, which its non-interactive start refuses ("Invalid auth method selected."), so the
  settings choose the API-key type ("gemini-api-key"), which reads the same two variables.
- The settings file (a fresh HOME's .gemini/settings.json; the system-wide settings and defaults files moved
  into the run's folder, so none of the machine's reaches it) turns off usage statistics (on by default, they
  add an x-gemini-api-privileged-user-id header), telemetry, the update check and the IDE connection, and
  allows one attempt per request (a refusal ends the run at once rather than after ten tries).
- `--yolo` runs the tools without asking; `--skip-trust` trusts the fresh working folder (else Gemini CLI turns
  yolo back to asking, and a headless run cannot be asked).
- TMPDIR is the run's own: Gemini CLI writes a report of each failed call there (gemini-client-error-*.json).
- GEMINI_CLI_NO_RELAUNCH keeps it one process (it relaunches itself with a larger heap otherwise), and the run
  is its own process group, killed whole at the deadline.
- Every connection beyond loopback goes to a proxy that refuses and records it (tests/clients/codex_support.py);
  Gemini CLI routes its fetches through HTTPS_PROXY, NO_PROXY excepted."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.clients.codex_support import refusing_proxy
from tests.clients.npm import npm_binary

VERSION = "0.61.0"
RUN_SECONDS = 120
MODEL = "gemini-2.5-flash"
PROMPT = "Create the file greeting.txt saying hello."
# The scripted call: Gemini CLI's write_file tool (its argument names as it declares them), on a path relative
# to the working folder, which it resolves there. Its answer ("Successfully created and wrote to new file:
# <path>. Here is the updated code:" and the text) names the absolute path, which the tool's arguments do not:
# only the tool can have sent it back.
TOOL_NAME = "write_file"
FILE_NAME = "greeting.txt"
FILE_TEXT = "hello from Gemini CLI\n"
TOOL_ARGUMENTS = {"file_path": FILE_NAME, "content": FILE_TEXT}

_CALL_ID = re.compile(rf"{TOOL_NAME}_\d+_\d+")
_TODAY = re.compile(r"Today's date is [^\n]*")
# Gemini CLI finds its built-in skills by reading its bundle's folder, with no order of its own: two runs on a
# busy machine listed them in either order, in the system prompt and in activate_skill's declaration
_SKILLS = re.compile(r"(<available_skills>\n)(.*?)(\n</available_skills>)", re.S)
_SKILL = re.compile(r"  <skill>\n.*?\n  </skill>", re.S)
_AVAILABLE = re.compile(r"\(Available: ('[^']*'(?:, '[^']*')*)\)")

SETTINGS: dict[str, Any] = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False, "maxAttempts": 1},
    "ide": {"enabled": False},
}


def gemini_binary() -> Path:
    return npm_binary("@google/gemini-cli", VERSION, "gemini")


@dataclass
class Run:
    """One `gemini -p` run: its exit, its output, the working folder, and the hosts it tried beyond loopback."""

    returncode: int
    stdout: str
    stderr: str
    work: Path
    outside: list[str]

    def written(self) -> str:
        """The first line of write_file's answer when it created the scripted file in this run's working folder
        (the rest shows the file's text: "Here is the updated code:" and the text)."""
        return f"Successfully created and wrote to new file: {self.work / FILE_NAME}. Here is the updated code:"


def run_gemini(base_url: str, key: str, model: str, folder: Path, *, prompt: str = PROMPT) -> Run:
    """`gemini -p` with a fresh HOME and working folder under `folder`, its model server at `base_url` (a server
    of Gemini's API: the SDK appends /v1beta/models/...). The environment is built from nothing, so no GEMINI_*
    or GOOGLE_* setting of the machine reaches it."""
    home, work, system, temp = folder / "home", folder / "work", folder / "system", folder / "tmp"
    for path in (home, work, system, temp):
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
    (home / ".gemini").mkdir()
    (home / ".gemini" / "settings.json").write_text(json.dumps(SETTINGS, indent=2))
    with refusing_proxy() as (proxy, seen):
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(home), "TZ": "UTC", "LANG": "C.UTF-8",
               "TMPDIR": str(temp), "NO_COLOR": "1", "GEMINI_CLI_NO_RELAUNCH": "true",
               "GEMINI_CLI_SYSTEM_SETTINGS_PATH": str(system / "settings.json"),
               "GEMINI_CLI_SYSTEM_DEFAULTS_PATH": str(system / "system-defaults.json"),
               "GEMINI_API_KEY": key, "GOOGLE_GEMINI_BASE_URL": base_url,
               **{name: proxy for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                                           "all_proxy")},
               "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
        args = [str(gemini_binary()), "--prompt", prompt, "--model", model, "--yolo", "--skip-trust",
                "--output-format", "text"]
        process = subprocess.Popen(args, cwd=work, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            stdout, stderr = process.communicate(timeout=RUN_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            stdout, stderr = process.communicate()
            raise AssertionError(f"gemini ran past {RUN_SECONDS} s:\n{stderr}\n{stdout}") from None
        return Run(process.returncode, stdout, stderr, work, sorted(set(seen)))


def tool_turns(body: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The functionCall parts of a generateContent body's model turns and the functionResponse parts of its
    user turns."""
    calls, results = [], []
    for content in body.get("contents") or [] if isinstance(body, dict) else []:
        parts = [part for part in content.get("parts") or [] if isinstance(part, dict)]
        if content.get("role") == "model":
            calls += [part["functionCall"] for part in parts if "functionCall" in part]
        elif content.get("role") == "user":
            results += [part["functionResponse"] for part in parts if "functionResponse" in part]
    return calls, results


def declared(body: Any) -> list[str]:
    """The names of the functions a generateContent body declares, in order."""
    return [declaration["name"] for tool in body.get("tools") or []
            for declaration in tool.get("functionDeclarations") or []]


def comparable(requests: list[Any]) -> list[dict[str, Any]]:
    """What a Gemini server received, with the values that differ between two straight runs in the same folders
    replaced, found by running it twice and diffing everything it sent: the id Gemini CLI makes for a call
    (write_file_<milliseconds>_<n>), the date it writes into the first turn (should a run straddle midnight),
    and the order of its built-in skills (put in name order: `_skills_in_order`)."""
    def replace(value: Any) -> Any:
        if isinstance(value, dict):
            found = {k: replace(v) for k, v in value.items()}
            if found.get("name") == "activate_skill":
                _skill_names_in_order(found)
            return found
        if isinstance(value, list):
            return [replace(v) for v in value]
        if isinstance(value, str):
            return _skills_in_order(_TODAY.sub("<today>", _CALL_ID.sub("<call id>", value)))
        return value

    return [{"request": f"{r.method} {r.path}", "query": r.query, "json": replace(r.json)} for r in requests]


def _skills_in_order(text: str) -> str:
    """The skills of a system prompt's <available_skills> and of activate_skill's "(Available: …)", in name order."""
    text = _SKILLS.sub(lambda m: m.group(1) + "\n".join(sorted(_SKILL.findall(m.group(2)))) + m.group(3), text)
    return _AVAILABLE.sub(lambda m: f"(Available: {', '.join(sorted(m.group(1).split(', ')))})", text)


def _skill_names_in_order(declaration: dict[str, Any]) -> None:
    """activate_skill's parameter: the enum of the skills' names, in name order."""
    name = declaration.get("parametersJsonSchema", {}).get("properties", {}).get("name", {})
    if isinstance(name.get("enum"), list):
        name["enum"] = sorted(name["enum"])
