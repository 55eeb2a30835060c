"""For the agent tests: a real MCP server on loopback (the `mcp` SDK's MCPServer over Streamable
HTTP, served by uvicorn from a thread) that refuses requests without its auth header and keeps
the calls it received; and the test world of the agent (the native `world` plus the MCP server
registered as `calc`). Test modules import the fixtures `agent_fixture` and `mcp_server_fixture`.
Also a model server whose model asks for several tool calls in one round (`many_calls_fixture`)."""

from __future__ import annotations

import json
import threading
import time
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
import uvicorn
from mcp.server.mcpserver import MCPServer

from tests.factories import McpServerFactory
from tests.servers import free_port

TOKEN_HEADER = "X-Mcp-Token"
TOKEN = "mcp-secret-7f3a9c"
AGENT_CHAT = "/api/v1/agent/chat"
AGENT_RUN = "/api/v1/agent/run"


class LoopbackMcp:
    """Tools `add(a, b)`, `weather(city)` and `explode()` (which fails); with `slow_tool`, also
    `slow(seconds)`, which answers after that long."""

    def __init__(self, *, slow_tool: bool = False) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.refused = 0
        server = MCPServer("test-tools")

        if slow_tool:
            @server.tool()
            async def slow(seconds: float) -> str:
                """Answer after `seconds`."""
                self.calls.append(("slow", {"seconds": seconds}))
                await anyio.sleep(seconds)
                return "done"

        @server.tool()
        def add(a: int, b: int) -> str:
            """Add two integers."""
            self.calls.append(("add", {"a": a, "b": b}))
            return str(a + b)

        @server.tool()
        def weather(city: str) -> str:
            """Today's weather in a city."""
            self.calls.append(("weather", {"city": city}))
            return f"{city}: sunny, 21 C"

        @server.tool()
        def explode() -> str:
            """Always fails."""
            self.calls.append(("explode", {}))
            raise ValueError("the tool broke")

        self._app = server.streamable_http_app()
        self.server: uvicorn.Server | None = None
        self.thread: threading.Thread | None = None
        self.url = ""

    async def _guarded(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            if headers.get(TOKEN_HEADER.lower().encode()) != TOKEN.encode():
                self.refused += 1
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"text/plain")]})
                await send({"type": "http.response.body", "body": b"missing or wrong token"})
                return
        await self._app(scope, receive, send)

    def start(self) -> LoopbackMcp:
        port = free_port()
        config = uvicorn.Config(self._guarded, host="127.0.0.1", port=port, log_level="warning", log_config=None,
                                interface="asgi3")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name=f"mcp-{port}", daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the MCP server did not start")
            time.sleep(0.01)
        self.url = f"http://127.0.0.1:{port}/mcp"
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
        if self.thread is not None:
            self.thread.join(timeout=5)


def _serve(app, name: str) -> tuple[uvicorn.Server, threading.Thread, int]:
    """Run an ASGI app under uvicorn in a thread on a free loopback port."""
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", log_config=None,
                            interface="asgi3", lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"{name}-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError(f"the {name} server did not start")
        time.sleep(0.01)
    return server, thread, port


class ManyCallsUpstream:
    """An OpenAI-kind model server (streamed chat only): answering a user message with tools on
    offer, its model asks for `calls` calls of `calc__add` ({a: i, b: 1}) in one round; after the
    tool results it answers "done". Each round's usage is 1 prompt and 1 completion token."""

    def __init__(self, calls: int) -> None:
        self.calls = calls
        self.requests: list[dict[str, Any]] = []
        self.server, self.thread, port = _serve(self._app, "many-calls")
        self.url = f"http://127.0.0.1:{port}/v1"

    async def _app(self, scope, receive, send) -> None:
        raw = b""
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        body = json.loads(raw or b"{}")
        self.requests.append(body)
        asks = body.get("tools") and body.get("tool_choice") != "none" and body["messages"][-1]["role"] == "user"
        if asks:
            calls = [{"index": i, "id": f"call_{i}", "type": "function",
                      "function": {"name": "calc__add", "arguments": json.dumps({"a": i, "b": 1})}}
                     for i in range(self.calls)]
            deltas, finish = [{"role": "assistant", "tool_calls": calls}], "tool_calls"
        else:
            deltas, finish = [{"role": "assistant", "content": "done"}], "stop"

        def frame(choices, **extra) -> bytes:
            chunk = {"id": "chatcmpl-many", "object": "chat.completion.chunk", "created": 0,
                     "model": body.get("model"), "choices": choices, **extra}
            return f"data: {json.dumps(chunk)}\n\n".encode()

        frames = [frame([{"index": 0, "delta": d, "finish_reason": None}]) for d in deltas]
        frames.append(frame([{"index": 0, "delta": {}, "finish_reason": finish}]))
        frames.append(frame([], usage={"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}))
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")]})
        await send({"type": "http.response.body", "body": b"".join(frames) + b"data: [DONE]\n\n"})

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=5)


@pytest.fixture(name="many_calls")
def many_calls_fixture(agent):
    """A model `many/caller-1` (server `many`) whose model asks for 12 tool calls in one round."""
    from tests.factories import ModelFactory, ModelServerFactory

    upstream = ManyCallsUpstream(12)
    server = ModelServerFactory(name="many", kind="openai", base_url=upstream.url, read_timeout=5.0)
    ModelFactory(server=server, name="caller-1")
    yield upstream
    upstream.stop()


@pytest.fixture(name="mcp_server", scope="session")
def mcp_server_fixture():
    server = LoopbackMcp().start()
    yield server
    server.stop()


@pytest.fixture(name="agent")
def agent_fixture(world, mcp_server):
    """The native `world` with the loopback MCP server registered as `calc` (every group)."""
    mcp_server.calls.clear()
    mcp_server.refused = 0
    calc = McpServerFactory(name="calc", url=mcp_server.url, auth_header_name=TOKEN_HEADER,
                            auth_header_value=TOKEN, timeout=5)
    return SimpleNamespace(world=world, mcp=mcp_server, calc=calc, api=world.api, upstream=world.upstream)


def offered(request) -> list[str]:
    """The tool names an upstream request offered the model."""
    return [tool["function"]["name"] for tool in request.json.get("tools") or ()]
