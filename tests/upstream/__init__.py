"""A reference upstream model server speaking the OpenAI and Anthropic wire formats, for tests and benchmarks.

In-process:

    with running_upstream(reply="Hi there") as upstream:
        openai.OpenAI(base_url=upstream.url + "/v1", api_key="x").chat.completions.create(...)
        upstream.configure(fail_status=529, fail_times=1)
        upstream.requests[-1].json

On its own: `python -m tests.upstream --port 9100` (knobs then via flags or `POST /_control`).
Knob names and defaults: `tests.upstream.core.DEFAULTS`.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, Iterator

from .app import UpstreamApp
from .core import DEFAULTS, RecordedRequest, State

__all__ = ["DEFAULTS", "RecordedRequest", "Upstream", "UpstreamApp", "UpstreamServer", "running_upstream"]


class Upstream:
    """The controller a test holds: where the server is, its knobs, and what it received."""

    def __init__(self, state: State, url: str):
        self.state = state
        self.url = url  # http://127.0.0.1:PORT, no trailing slash, no /v1

    def configure(self, **knobs: Any) -> Upstream:
        """Change knobs at run time (unknown names raise TypeError)."""
        self.state.configure(**knobs)
        return self

    def reset(self) -> Upstream:
        """Knobs back to their defaults, request log emptied."""
        self.state.reset()
        return self

    @property
    def knobs(self) -> dict[str, Any]:
        return self.state.knobs

    @property
    def requests(self) -> list[RecordedRequest]:
        return self.state.requests

    @property
    def last(self) -> RecordedRequest | None:
        return self.state.requests[-1] if self.state.requests else None

    def wait_for_requests(self, count: int, timeout: float = 5.0) -> list[RecordedRequest]:
        """Block until at least `count` requests have arrived (for requests made by another process)."""
        deadline = time.monotonic() + timeout
        while len(self.state.requests) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"the upstream got {len(self.state.requests)} request(s), expected {count}")
            time.sleep(0.005)
        return self.state.requests

    def __repr__(self) -> str:
        return f"<Upstream {self.url}>"


class UpstreamServer:
    """uvicorn serving an UpstreamApp from a daemon thread on a free loopback port."""

    def __init__(self, **knobs: Any):
        self.state = State()
        self.state.configure(**knobs)
        self.server: Any = None
        self.thread: threading.Thread | None = None
        self.controller: Upstream | None = None

    def start(self) -> Upstream:
        import uvicorn

        from tests.servers import free_port

        for _attempt in range(5):  # free_port() can race with another process taking the port
            port = free_port()
            config = uvicorn.Config(UpstreamApp(self.state), host="127.0.0.1", port=port, log_level="warning",
                                    lifespan="off", log_config=None, access_log=False, timeout_keep_alive=30)
            self.server = uvicorn.Server(config)
            self.thread = threading.Thread(target=self.server.run, name=f"upstream-{port}", daemon=True)
            self.thread.start()
            deadline = time.monotonic() + 10
            while not self.server.started and self.thread.is_alive() and time.monotonic() < deadline:
                time.sleep(0.002)
            if self.server.started:
                self.controller = Upstream(self.state, f"http://127.0.0.1:{port}")
                return self.controller
            self.stop()
        raise RuntimeError("the upstream server did not start")

    @property
    def alive(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def stop(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
            self.server.force_exit = True  # don't wait for stalled streams; asyncio.run cancels them
        if self.thread is not None:
            self.thread.join(timeout=5)
        self.server = self.thread = None


@contextlib.contextmanager
def running_upstream(**knobs: Any) -> Iterator[Upstream]:
    """Start a private upstream server with these knobs; yield its controller; stop it on exit."""
    server = UpstreamServer(**knobs)
    try:
        yield server.start()
    finally:
        server.stop()
