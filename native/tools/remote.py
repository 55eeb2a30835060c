"""The tools of the operator's MCP servers, as the agent offers them: `<server>__<tool>`
(characters outside `[A-Za-z0-9_-]` become `_`, cut at 64), run on their server through
native/tools/mcp_client.py. An unreachable server or an `isError` answer is an error result."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

from native.tools.mcp_client import McpEndpoint, McpTool, McpUnavailable, call_tool
from native.tools.tool import Caller, Tool, ToolError, ToolResult

SEPARATOR = "__"
_NOT_ALLOWED = re.compile(r"[^a-zA-Z0-9_-]")


def remote_tool_name(server: str, tool: str) -> str:
    return _NOT_ALLOWED.sub("_", f"{server}{SEPARATOR}{tool}")[:64]


def remote_tool(endpoint: McpEndpoint, listed: McpTool) -> Tool:
    return Tool(remote_tool_name(endpoint.name, listed.name), listed.description or listed.name,
                listed.input_schema or {"type": "object", "properties": {}}, _runner(endpoint, listed.name))


def _runner(endpoint: McpEndpoint, tool_name: str) -> Callable[[Caller, dict[str, Any]], Awaitable[ToolResult]]:
    async def run(caller: Caller, arguments: dict[str, Any]) -> ToolResult:
        try:
            result = await call_tool(endpoint, tool_name, arguments)
        except McpUnavailable as failure:
            raise ToolError(str(failure)) from None
        if result.is_error:
            return ToolResult.error(result.text or "The tool failed.")
        return ToolResult(result.text)

    return run
