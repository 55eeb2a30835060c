"""Bounded load for the fault tests: signed webhook events and chat completions, paced, in
threads, each call with a timeout; every answer is kept for the checks afterwards."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import httpx

CALL_TIMEOUT = 20.0


@dataclass
class Answer:
    kind: str  # "event" or "chat"
    ident: str  # the event id, or the chat call's own marker
    status: int | None  # None: no HTTP answer (connection refused or reset, timeout)
    body: dict | str | None
    request_id: str = ""
    retry_after: str | None = None
    started: float = 0.0
    elapsed: float = 0.0
    error: str = ""

    @property
    def queued(self) -> bool:
        return self.status == 200 and isinstance(self.body, dict) and self.body.get("queued") is True


@dataclass
class Load:
    """`count` calls made by `concurrency` threads at about `rate` calls a second (0: as fast as
    they go). `make(i)` gives `(kind, ident, method, path, headers, body bytes)` of call `i`."""

    base_url: str
    make: object
    count: int
    rate: float = 0.0
    concurrency: int = 4
    answers: list[Answer] = field(default_factory=list)
    deadline_seconds: float = 120.0

    def __post_init__(self):
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._clients = threading.local()

    def start(self) -> Load:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _client(self) -> httpx.Client:
        client = getattr(self._clients, "client", None)
        if client is None:
            client = self._clients.client = httpx.Client(base_url=self.base_url, timeout=CALL_TIMEOUT)
        return client

    def _one(self, i: int) -> None:
        kind, ident, method, path, headers, body = self.make(i)
        started = time.monotonic()
        try:
            response = self._client().request(method, path, headers=headers, content=body)
            try:
                parsed = response.json()
            except ValueError:
                parsed = response.text[:500]
            answer = Answer(kind, ident, response.status_code, parsed, response.headers.get("x-request-id", ""),
                            response.headers.get("retry-after"), started, time.monotonic() - started)
        except httpx.HTTPError as exc:
            answer = Answer(kind, ident, None, None, "", None, started, time.monotonic() - started, repr(exc))
            # a dead connection must not be reused by this thread
            self._clients.client = None
        with self._lock:
            self.answers.append(answer)

    def _run(self) -> None:
        begin = time.monotonic()
        with ThreadPoolExecutor(self.concurrency) as pool:
            futures = []
            for i in range(self.count):
                if self._stop.is_set() or time.monotonic() - begin > self.deadline_seconds:
                    break
                if self.rate:
                    delay = begin + i / self.rate - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                futures.append(pool.submit(self._one, i))
                # never more than a few calls waiting for a thread: the pace is the pace
                while sum(1 for f in futures[-4 * self.concurrency:] if not f.done()) > 2 * self.concurrency:
                    time.sleep(0.005)
            for f in futures:
                f.result()

    def stop(self) -> None:
        """No more calls are started; those under way finish."""
        self._stop.set()

    def answered(self) -> int:
        with self._lock:
            return len(self.answers)

    def wait_answered(self, n: int, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while self.answered() < n:
            assert self._thread is not None and (self._thread.is_alive() or self.answered() >= n), "load ended early"
            assert time.monotonic() < deadline, f"only {self.answered()} of {n} calls answered in {timeout}s"
            time.sleep(0.02)

    def join(self, timeout: float = 180) -> list[Answer]:
        assert self._thread is not None
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"the load did not end in {timeout}s"
        return list(self.answers)


def event_maker(routines: list[dict], prefix: str):
    """Signed webhook events with distinct ids, spread over the routines."""
    run_tag = uuid.uuid4().hex[:6]

    def make(i: int):
        routine = routines[i % len(routines)]
        event_id = f"{prefix}-{run_tag}-{i}"
        body = json.dumps({"id": event_id, "n": i, "text": f"fault test event {i}"}).encode()
        signature = hmac.new(routine["secret"].encode(), body, hashlib.sha256).hexdigest()
        headers = {"Content-Type": "application/json", "X-Svc-Signature": f"sha256={signature}"}
        return "event", event_id, "POST", f"/api/v1/hooks/{routine['token']}", headers, body

    return make


def chat_maker(key: str, model: str, prefix: str):
    run_tag = uuid.uuid4().hex[:6]

    def make(i: int):
        marker = f"{prefix}-{run_tag}-{i}"
        body = json.dumps({"model": model, "messages": [{"role": "user", "content": f"hello {marker}"}]}).encode()
        headers = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
        return "chat", marker, "POST", "/v1/chat/completions", headers, body

    return make
