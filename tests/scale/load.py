"""Load on the multi-host stack from its client host: the plan of calls is made here (signed events,
chat completions, any request), run by tests/scale/drive.py in a process under `ip netns exec`, and
its answers read back line by line while it runs. `Drive` has the interface of tests/faults/load.py's
Load (answered, wait_answered, join), so tests/faults/checks.py's checks take its answers."""

from __future__ import annotations

import hashlib
import hmac
import json
import subprocess
import tempfile
import threading
import time
import uuid

from tests.faults.load import Answer
from tests.faults.services import PYTHON, ROOT


def chat(key: str, model: str, marker: str, url: str = "/v1/chat/completions") -> list:
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": f"hello {marker}"}]})
    return ["chat", marker, "POST", url, {"Content-Type": "application/json", "Accept": "application/json",
                                     "Authorization": f"Bearer {key}"},
            body]


def chats(key: str, model: str, prefix: str, count: int) -> list[list]:
    tag = uuid.uuid4().hex[:6]
    return [chat(key, model, f"{prefix}-{tag}-{i}") for i in range(count)]


def event(routine: dict, event_id: str, base: str = "") -> list:
    body = json.dumps({"id": event_id, "text": f"scale test event {event_id}"})
    signature = hmac.new(routine["secret"].encode(), body.encode(), hashlib.sha256).hexdigest()
    headers = {"Content-Type": "application/json", "X-Svc-Signature": f"sha256={signature}"}
    return ["event", event_id, "POST", f"{base}/api/v1/hooks/{routine['token']}", headers, body]


def get(key: str, path: str, ident: str, kind: str = "get") -> list:
    return [kind, ident, "GET", path, {"Authorization": f"Bearer {key}", "Accept": "application/json"}, ""]


class Drive:
    def __init__(self, cluster, requests: list[list], *, rate: float = 0, concurrency: int = 4,
                 deadline: float = 60, base: str | None = None):
        self.cluster = cluster
        self.answers: list[Answer] = []
        self._lock = threading.Lock()
        plan = {"base": base or cluster.url, "requests": requests, "rate": rate, "concurrency": concurrency,
                "deadline": deadline}
        self._plan = tempfile.NamedTemporaryFile("w", suffix=".json", dir=cluster.base, delete=False)  # noqa: SIM115
        json.dump(plan, self._plan)
        self._plan.close()
        self.count = len(requests)
        self.deadline = deadline
        self.proc: subprocess.Popen | None = None
        self._reader: threading.Thread | None = None

    def start(self) -> Drive:
        self.proc = subprocess.Popen([*self.cluster.prefix("client"), PYTHON, "-m", "tests.scale.drive",
                                      self._plan.name], cwd=ROOT, env=self.cluster.env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, start_new_session=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                answer = Answer(**json.loads(line))
            except (ValueError, TypeError):
                continue
            with self._lock:
                self.answers.append(answer)

    def answered(self) -> int:
        with self._lock:
            return len(self.answers)

    def wait_answered(self, n: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while self.answered() < n:
            assert self.proc is not None and (self.proc.poll() is None or self.answered() >= n), \
                f"the load ended early: {self.proc.stderr.read()[-2000:] if self.proc.stderr else ''}"
            assert time.monotonic() < deadline, f"only {self.answered()} of {n} calls answered in {timeout}s"
            time.sleep(0.02)

    def join(self) -> list[Answer]:
        assert self.proc is not None
        try:
            self.proc.wait(timeout=self.deadline + 60)
        finally:
            if self.proc.poll() is None:
                import os
                import signal

                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        assert self._reader is not None
        self._reader.join(10)
        err = self.proc.stderr.read() if self.proc.stderr else ""
        assert self.proc.returncode == 0, f"the load generator failed ({self.proc.returncode}):\n{err[-3000:]}"
        with self._lock:
            return list(self.answers)


def run(cluster, requests: list[list], **kwargs) -> list[Answer]:
    return Drive(cluster, requests, **kwargs).start().join()
