"""The fake Google served: an ASGI app over `fake.route` (errors in Google's shape, SSE streams cut or failed
midway on demand), and uvicorn running it from a daemon thread on a free loopback port."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

from tests.faults.services import wait_for
from tests.gateway.upstream.google.fake import GoogleError, Recorded, State, route
from tests.upstream.core import Reply, Stream


class GoogleApp:
    def __init__(self, state: State):
        self.state = state

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body, more = b"", True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            data = json.loads(body) if body else None
        except ValueError:
            data = None
        raw_path = (scope.get("raw_path") or scope["path"].encode()).decode("latin-1").partition("?")[0]
        req = Recorded(scope["method"], scope["path"], raw_path, scope.get("query_string", b"").decode("latin-1"),
                       headers, body, data)
        state = self.state
        knobs = state.knobs
        state.requests.append(req)
        try:
            result = route(req, state)
        except GoogleError as exc:
            extra = ((b"retry-after", exc.retry_after.encode()),) if exc.retry_after else ()
            error = {"error": {"code": exc.code, "message": exc.message, "status": exc.status,
                               **({"details": exc.details} if exc.details else {})}}
            result = Reply(json.dumps(error).encode(), status=exc.code, headers=extra)
        if isinstance(result, Reply):
            await send({"type": "http.response.start", "status": result.status, "headers": [
                (b"content-type", result.content_type), (b"content-length", str(len(result.body)).encode()),
                *result.headers]})
            await send({"type": "http.response.body", "body": result.body})
            return
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]})
        await self._stream(result, knobs, send, receive)

    async def _stream(self, result: Stream, knobs: dict[str, Any], send: Any, receive: Any) -> None:
        cut, fail = knobs["cut_after_tokens"], knobs["error_after_tokens"]
        for index, frame in enumerate([*result.head, *result.tokens, *result.tail]):
            token = index - len(result.head)
            if cut is not None and token == cut:
                transport = getattr(getattr(send, "__self__", None), "transport", None)
                transport.close()
                await asyncio.wait_for(receive(), timeout=1)
                return
            if fail is not None and token == fail:
                error = {"error": {"code": 503, "message": "The model is overloaded. Please try again later.",
                                   "status": "UNAVAILABLE"}}
                await send({"type": "http.response.body", "body": b"data: " + json.dumps(error).encode() + b"\r\n\r\n",
                            "more_body": False})
                return
            await send({"type": "http.response.body", "body": frame, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


class FakeGoogle:
    """uvicorn serving a GoogleApp from a daemon thread on a free loopback port."""

    def __init__(self) -> None:
        self.state = State()
        self.server: Any = None
        self.thread: threading.Thread | None = None
        self.url = ""

    def start(self) -> FakeGoogle:
        import uvicorn

        from tests.servers import free_port

        port = free_port()
        config = uvicorn.Config(GoogleApp(self.state), host="127.0.0.1", port=port, log_level="warning",
                                lifespan="off", log_config=None, access_log=False)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name=f"google-{port}", daemon=True)
        self.thread.start()
        wait_for(lambda: self.server.started or not self.thread.is_alive(), 10, "the fake Google starting",
                 interval=0.005)
        assert self.server.started, "the fake Google did not start"
        self.url = f"http://127.0.0.1:{port}"
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.should_exit = self.server.force_exit = True
        if self.thread is not None:
            self.thread.join(timeout=5)

    @property
    def alive(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def configure(self, **knobs: Any) -> FakeGoogle:
        self.state.configure(**knobs)
        return self

    def reset(self) -> FakeGoogle:
        self.state.reset()
        return self

    @property
    def requests(self) -> list[Recorded]:
        return self.state.requests

    def calls(self) -> list[Recorded]:
        """The model calls received (not the token requests nor the listings)."""
        return [r for r in self.state.requests if ":" in r.path]

    def token_requests(self) -> list[Recorded]:
        return [r for r in self.state.requests if r.path == "/token"]
