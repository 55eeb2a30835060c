"""LiteLLM's proxy as a third target of `gateway_latency.py`, beside the upstream and the gateway.

`litellm[proxy]==1.91.1` is installed by the benchmark into a throwaway venv of its own, outside
the working tree and never into .venv: /tmp/bench-litellm-1.91.1 (or BENCH_LITELLM_VENV), kept
between runs and marked complete only once the install and an import succeeded. The proxy runs as
one process (`--num_workers 1`, its own uvicorn), with a master key and nothing else: no database,
no Redis, no callbacks. Its config points one model at the reference upstream as an OpenAI-compatible
server. Before anything is measured, `check()` proves it answers through the upstream."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
import shutil
import subprocess
from pathlib import Path

from harness import PY, Proc, free_port, wait_http
from stack import REPLY

VERSION = "1.91.1"
SPEC = f"litellm[proxy]=={VERSION}"
VENV = Path(os.environ.get("BENCH_LITELLM_VENV", f"/tmp/bench-litellm-{VERSION}"))
MODEL = "echo-1"  # the name callers use on the proxy
# uvicorn's access log off, as the gateway runs with --no-access-log; LiteLLM's own logging at its default.
LOG_CONFIG = {
    "version": 1, "disable_existing_loggers": False,
    "formatters": {"default": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"default": {"class": "logging.StreamHandler", "formatter": "default", "stream": "ext://sys.stderr"}},
    "loggers": {"uvicorn": {"handlers": ["default"], "level": "INFO", "propagate": False},
                "uvicorn.error": {"level": "INFO"},
                "uvicorn.access": {"handlers": ["default"], "level": "WARNING", "propagate": False}},
}
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def ensure_venv() -> Path:
    """The venv with LiteLLM's proxy, installed on first use (about a minute) and reused after."""
    ready = VENV / ".bench-ready"
    VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(VENV.parent / f".{VENV.name}.lock", "w") as lock:  # two benchmarks never install at once
        fcntl.flock(lock, fcntl.LOCK_EX)
        if ready.exists() and ready.read_text().strip() == SPEC and (VENV / "bin" / "litellm").exists():
            return VENV
        if VENV.exists():  # an install that did not finish
            shutil.rmtree(VENV)
        print(f"bench: installing {SPEC} into {VENV} (a throwaway venv; once)", flush=True)
        subprocess.run([PY, "-m", "venv", str(VENV)], check=True, capture_output=True, timeout=180)
        done = subprocess.run([str(VENV / "bin" / "python"), "-m", "pip", "install", "-q",
                               "--disable-pip-version-check", SPEC], capture_output=True, text=True, timeout=1200)
        if done.returncode != 0:
            raise RuntimeError(f"pip install {SPEC} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
        check = subprocess.run([str(VENV / "bin" / "python"), "-c",
                                "import importlib.metadata as m; import litellm; print(m.version('litellm'))"],
                               capture_output=True, text=True, timeout=300, env=clean_env())
        if check.returncode != 0 or check.stdout.strip().splitlines()[-1:] != [VERSION]:
            raise RuntimeError(f"litellm does not import from {VENV}: {check.stdout[-500:]} {check.stderr[-2000:]}")
        ready.write_text(SPEC + "\n")
    return VENV


def clean_env() -> dict:
    """Nothing of the gateway's environment: LiteLLM reads DATABASE_URL, REDIS_* and provider keys by itself."""
    env = {k: os.environ[k] for k in ("HOME", "LANG", "LC_ALL", "TMPDIR", "TZ") if k in os.environ}
    env["PATH"] = f"{VENV / 'bin'}:/usr/local/bin:/usr/bin:/bin"
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # the bundled cost map: no fetch from the internet at start
    return env


class LiteLLM:
    def __init__(self, stack):
        self.stack = stack
        self.base = ""
        self.key = "sk-bench-" + secrets.token_hex(16)
        self.proc: Proc | None = None
        self.versions = ""
        self.checked = ""

    def start(self) -> Proc:
        venv = ensure_venv()
        folder = self.stack.tmp / "litellm"
        folder.mkdir(exist_ok=True)
        config = folder / "config.yaml"
        config.write_text(  # JSON is YAML
            json.dumps({"model_list": [{"model_name": MODEL, "litellm_params": {
                "model": f"openai/{MODEL}", "api_base": f"{self.stack.upstream}/v1", "api_key": "unused"}}],
                "general_settings": {"master_key": self.key}}, indent=1))
        log_config = folder / "log.json"
        log_config.write_text(json.dumps(LOG_CONFIG))
        port = free_port()
        self.argv = [str(venv / "bin" / "litellm"), "--config", str(config), "--host", "127.0.0.1", "--port",
                     str(port), "--num_workers", "1", "--telemetry", "False", "--log_config", str(log_config)]
        self.proc = Proc("litellm", self.argv, clean_env(), self.stack.tmp, cwd=folder)
        self.stack.procs.append(self.proc)
        self.base = f"http://127.0.0.1:{port}"
        wait_http(self.base + "/health/liveliness", self.proc, timeout=180)
        self.versions = self._versions(venv)
        self.check()
        return self.proc

    def _versions(self, venv: Path) -> str:
        code = ("import importlib.metadata as m\nout = []\n"
                "for p in ('litellm', 'uvicorn', 'uvloop', 'httptools', 'h11', 'fastapi', 'openai', 'httpx',\n"
                "          'aiohttp'):\n"
                "    try: out.append(f'{p} {m.version(p)}')\n    except m.PackageNotFoundError: pass\n"
                "print(', '.join(out))")
        with contextlib.suppress(subprocess.SubprocessError, OSError):
            done = subprocess.run([str(venv / "bin" / "python"), "-c", code], capture_output=True, text=True,
                                  timeout=60, env=clean_env())
            return done.stdout.strip()
        return "unknown"

    def check(self) -> None:
        """One non-streamed and one streamed call through LiteLLM, answered by the upstream (its fixed
        reply, and the upstream's own request log shows both), and a wrong key refused."""
        import httpx

        up = self.stack.upstream
        httpx.post(up + "/_control", json={"record": True}, timeout=5).raise_for_status()
        try:
            seen_before = httpx.get(up + "/_control", timeout=5).json()["requests"]
            headers = {"Authorization": f"Bearer {self.key}"}
            body = {"model": MODEL, "messages": [{"role": "user", "content": "Say something short."}],
                    "max_tokens": 64}
            r = httpx.post(self.base + "/v1/chat/completions", json=body, headers=headers, timeout=30)
            text = r.json()["choices"][0]["message"]["content"] if r.status_code == 200 else None
            if text != REPLY:
                raise RuntimeError(f"LiteLLM non-streamed check: status {r.status_code}, {r.text[:500]}")
            parts, done = [], False
            with httpx.stream("POST", self.base + "/v1/chat/completions", json={**body, "stream": True},
                              headers=headers, timeout=30) as s:
                for line in s.iter_lines():
                    if line == "data: [DONE]":
                        done = True
                    elif line.startswith("data: "):
                        for choice in json.loads(line[6:]).get("choices", []):
                            parts.append((choice.get("delta") or {}).get("content") or "")
            if s.status_code != 200 or not done or "".join(parts) != REPLY:
                raise RuntimeError(f"LiteLLM streamed check: status {s.status_code}, [DONE] {done}, "
                                   f"text {''.join(parts)!r}")
            seen = httpx.get(up + "/_control/requests", timeout=5).json()[seen_before:]
            calls = [(q["path"], (q.get("json") or {}).get("model"), bool((q.get("json") or {}).get("stream")))
                     for q in seen]
            if calls != [("/v1/chat/completions", MODEL, False), ("/v1/chat/completions", MODEL, True)]:
                raise RuntimeError(f"the upstream did not see LiteLLM's two calls as expected: {calls}")
            wrong = httpx.post(self.base + "/v1/chat/completions", json=body,
                               headers={"Authorization": "Bearer sk-wrong"}, timeout=30)
            if wrong.status_code == 200:
                raise RuntimeError("LiteLLM answered a wrong key with 200: the master key is not enforced")
        finally:
            httpx.post(up + "/_control", json={"record": False}, timeout=5)
        self.checked = (f"checked before measuring: a non-streamed and a streamed call came back with the upstream's "
                        f"reply, the upstream logged both (`POST /v1/chat/completions`, model `{MODEL}`), and a wrong "
                        f"key was refused ({wrong.status_code})")
        print(f"bench: LiteLLM {self.base} {self.checked}", flush=True)

    def describe(self) -> str:
        argv = " ".join(["litellm", *self.argv[1:]]).replace(str(self.stack.tmp), "$TMP")
        return (f"- LiteLLM: `{SPEC}` in a throwaway venv (`{VENV}`; {self.versions}), one process: `{argv}` "
                f"(its uvicorn, access log off through --log_config as for the gateway); master key only: no "
                f"database, no Redis, no callbacks, a clean environment. Its config maps model `{MODEL}` to "
                f"`openai/{MODEL}` at the upstream's `/v1`. It was {self.checked}.")

    def log_tail(self, chars: int = 2000) -> str:
        return ANSI.sub("", self.proc.log_tail(chars)) if self.proc else ""
