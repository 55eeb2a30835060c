"""Claude Code run offline against a server under test, and what the reference upstream received from it,
made comparable between two runs (straight at the upstream, and through the gateway).

Claude Code 2.1.332 is the npm registry's newest release here. Its package holds no program of its own: its
postinstall copies the native binary from the platform package (`@anthropic-ai/claude-code-linux-x64`), which
npm installs from the registry as an optional dependency, so nothing outside the registry is fetched."""

from __future__ import annotations

import datetime
import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.clients.npm import npm_binary
from tests.gateway.upstream.google.fake import PROJECT, REGION

VERSION = "2.1.332"
RUN_SECONDS = 120
PROMPT = "What is six times seven? Work it out with the shell."
# The scripted tool call: the upstream asks for it on the first round, Claude Code runs it in bash, and the
# result ("42", which the command's own text does not contain) can only have come from the shell.
TOOL_NAME = "Bash"
TOOL_ARGUMENTS = {"command": "echo $((6 * 7))", "description": "Multiply six by seven"}
TOOL_OUTPUT = "42"
FINAL_TEXT = f"Tool said: {TOOL_OUTPUT}"

_TOOL_ID = re.compile(r"toolu_[0-9a-f]+")
_PER_RUN_IDS = re.compile(r'"(device_id|session_id)":"[^"]*"')


def claude_binary() -> Path:
    return npm_binary("@anthropic-ai/claude-code", VERSION, "claude")


@dataclass
class Run:
    """One `claude -p` run: its exit, its output, and the days (UTC) it ran on."""

    returncode: int
    stdout: str
    stderr: str
    days: tuple[str, ...]


def run_claude(base_url: str, key: str, model: str, folder: Path, *, cloud: str = "",
               args: tuple[str, ...] = ()) -> Run:
    """Claude Code in print mode, offline, with a fresh HOME and working folder at the same paths every time.

    The paths are reused (emptied, not renamed) because Claude Code writes them into the system prompt and
    the memory folder's name, so two runs in one folder send the same text. Its environment is built from
    nothing rather than inherited, so no ANTHROPIC_* setting of the machine reaches it. With a `cloud`
    ("bedrock" or "vertex"), it calls `base_url` as that cloud (`cloud_settings`), unauthenticated, and `key`
    is not used."""
    home, work = folder / "home", folder / "work"
    for path in (home, work):
        shutil.rmtree(path, ignore_errors=True)
        path.mkdir(parents=True)
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "TZ": "UTC",
        "LANG": "C.UTF-8",
        # any side request for the small model goes to the one model this run is about
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": model,
        "ANTHROPIC_SMALL_FAST_MODEL": model,
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        # one attempt per request: the upstream's log then holds exactly what Claude Code meant to send,
        # and a refused request fails the run at once instead of after a minute of backing off
        "CLAUDE_CODE_MAX_RETRIES": "0",
        "API_TIMEOUT_MS": "60000",
        **(cloud_settings(cloud, base_url) if cloud else {"ANTHROPIC_BASE_URL": base_url, "ANTHROPIC_API_KEY": key}),
    }
    before = _today()
    done = subprocess.run([str(claude_binary()), "-p", PROMPT, "--model", model, "--allowedTools", TOOL_NAME,
                           "--output-format", "text", *args], cwd=work, env=env, capture_output=True, text=True,
                          timeout=RUN_SECONDS, stdin=subprocess.DEVNULL)
    return Run(done.returncode, done.stdout, done.stderr, tuple(sorted({before, _today()})))


def cloud_settings(cloud: str, base_url: str) -> dict[str, str]:
    """Claude Code's settings for calling `base_url` as AWS Bedrock (its runtime and control plane) or as
    Google's Vertex AI (the `/v1` API root; the fake Google's project and region), its own auth skipped."""
    if cloud == "bedrock":
        return {"CLAUDE_CODE_USE_BEDROCK": "1", "ANTHROPIC_BEDROCK_BASE_URL": base_url,
                "CLAUDE_CODE_SKIP_BEDROCK_AUTH": "1", "AWS_REGION": "us-east-1"}
    if cloud == "vertex":
        return {"CLAUDE_CODE_USE_VERTEX": "1", "ANTHROPIC_VERTEX_BASE_URL": f"{base_url}/v1",
                "CLAUDE_CODE_SKIP_VERTEX_AUTH": "1", "ANTHROPIC_VERTEX_PROJECT_ID": PROJECT,
                "CLOUD_ML_REGION": REGION}
    raise ValueError(f"no such cloud: {cloud}")


def _today() -> str:
    return datetime.datetime.now(datetime.timezone.utc).date().isoformat()


def comparable(requests: list[Any], days: tuple[str, ...], model: str | None = None) -> list[dict[str, Any]]:
    """What the upstream received, with only the values that differ between two straight runs replaced,
    and `model` (when given) put in place of the body's: the name a gateway must send it under.

    Two straight runs at the upstream (same prompt, same paths) differ in exactly these, found by running
    it twice and diffing everything it sent:
    - the tool-use id, made at random by the upstream and sent back by Claude Code: named by its order;
    - `metadata.user_id`, a JSON string whose `device_id` is made for each fresh HOME and whose
      `session_id` is new each run: those two values blanked in the string, the rest of it kept as sent;
    - the date, written into the system prompt: today's (UTC) replaced, should a run straddle midnight.
    The `x-claude-code-session-id` header differs too, and is not compared (see `wire`)."""
    ids: dict[str, str] = {}
    out = []
    for request in requests:
        body = _replace_strings(request.json, ids, days)
        if isinstance(body, dict):
            body = _blank_user_id(body)
            if model is not None and "model" in body:
                body = {**body, "model": model}
        out.append({"request": f"{request.method} {request.path}", "query": request.query, **wire(request),
                    "json": body})
    return out


def wire(request: Any) -> dict[str, Any]:
    """The headers that decide what the model server does: the API version and each beta, in order."""
    beta = request.headers.get("anthropic-beta")
    return {"anthropic-version": request.headers.get("anthropic-version"),
            "anthropic-beta": None if beta is None else [part.strip() for part in beta.split(",")]}


def _replace_strings(value: Any, ids: dict[str, str], days: tuple[str, ...]) -> Any:
    if isinstance(value, dict):
        return {k: _replace_strings(v, ids, days) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_strings(v, ids, days) for v in value]
    if isinstance(value, str):
        value = _TOOL_ID.sub(lambda m: ids.setdefault(m.group(0), f"<tool use {len(ids) + 1}>"), value)
        for day in days:
            value = value.replace(day, "<today>")
    return value


def _blank_user_id(body: dict[str, Any]) -> dict[str, Any]:
    metadata = body.get("metadata")
    if not isinstance(metadata, dict) or not isinstance(metadata.get("user_id"), str):
        return body
    return {**body, "metadata": {**metadata, "user_id": _PER_RUN_IDS.sub(r'"\1":"<\1>"', metadata["user_id"])}}


def differences(direct: Any, gateway: Any, where: str = "") -> list[str]:
    """Every place where what the gateway passed on differs from what Claude Code sent straight, one line each."""
    if isinstance(direct, dict) and isinstance(gateway, dict):
        found = []
        for key in [*direct, *(k for k in gateway if k not in direct)]:
            place = f"{where}.{key}" if where else str(key)
            if key not in gateway:
                found.append(f"{place}: dropped (sent {_short(direct[key])})")
            elif key not in direct:
                found.append(f"{place}: added ({_short(gateway[key])})")
            else:
                found += differences(direct[key], gateway[key], place)
        return found
    if isinstance(direct, list) and isinstance(gateway, list):
        found = []
        for index, (one, other) in enumerate(zip(direct, gateway)):
            found += differences(one, other, f"{where}[{index}]")
        if len(direct) != len(gateway):
            found.append(f"{where}: {len(direct)} items sent, {len(gateway)} arrived")
        return found
    if direct != gateway or type(direct) is not type(gateway):
        return [f"{where}: sent {_short(direct)}, arrived {_short(gateway)}"]
    return []


def _short(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 400 else text[:397] + "..."


def tool_turn(request: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The tool_use blocks of a request's assistant turns and the tool_result blocks of its user turns."""
    messages = request.json.get("messages") if isinstance(request.json, dict) else None
    uses, results = [], []
    for message in messages or []:
        if not isinstance(message, dict) or not isinstance(message.get("content"), list):
            continue
        blocks = [b for b in message["content"] if isinstance(b, dict)]
        if message.get("role") == "assistant":
            uses += [b for b in blocks if b.get("type") == "tool_use"]
        elif message.get("role") == "user":
            results += [b for b in blocks if b.get("type") == "tool_result"]
    return uses, results
