"""For the agent tests: a real MCP server on loopback (the `mcp` SDK's MCPServer over Streamable
HTTP, served by uvicorn from a thread) that refuses requests without its auth header and keeps
the calls it received; and the test world of the agent (the native `world` plus the MCP server
registered as `calc`). Test modules import the fixtures `agent_fixture` and `mcp_server_fixture`."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest
import uvicorn
from mcp.server.mcpserver import MCPServer

from native.models import McpServer
from tests.servers import free_port

TOKEN_HEADER = "X-Mcp-Token"
TOKEN = "mcp-secret-7f3a9c"
AGENT_CHAT = "/api/v1/agent/chat"
AGENT_RUN = "/api/v1/agent/run"


class LoopbackMcp:
    """Tools `add(a, b)`, `weather(city)` and `explode()` (which fails)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.refused = 0
        server = MCPServer("test-tools")

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
    calc = McpServer.objects.create(name="calc", url=mcp_server.url, auth_header_name=TOKEN_HEADER,
                                    auth_header_value=TOKEN, timeout=5)
    return SimpleNamespace(world=world, mcp=mcp_server, calc=calc, api=world.api, upstream=world.upstream)


def offered(request) -> list[str]:
    """The tool names an upstream request offered the model."""
    return [tool["function"]["name"] for tool in request.json.get("tools") or ()]
