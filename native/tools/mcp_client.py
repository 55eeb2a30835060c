"""Talking to an operator-registered MCP server with the official `mcp` client (Streamable
HTTP): list its tools, call one. One short connection per operation, each bounded by the
server's `timeout`; every failure (unreachable, refused, timed out, protocol error) is an
`McpUnavailable` whose message never carries the auth header."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

MAX_PAGES = 20  # tools/list pages read from one server


@dataclass(frozen=True)
class McpEndpoint:
    """What the agent needs of an `McpServer` row, read in the worker hop."""

    name: str
    url: str
    timeout: float
    headers: dict[str, str] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class McpTool:
    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class McpResult:
    text: str
    is_error: bool


class McpUnavailable(Exception):
    pass


def _client(endpoint: McpEndpoint, http: httpx2.AsyncClient) -> Client:
    transport = streamable_http_client(endpoint.url, http_client=http)
    return Client(transport, read_timeout_seconds=endpoint.timeout, cache=None)


def _http_client(endpoint: McpEndpoint) -> tuple[httpx2.AsyncClient, list[int]]:
    """The client of one operation, and the HTTP error statuses it met (the `mcp` client turns
    them into a JSON-RPC error without the status)."""
    statuses: list[int] = []

    async def keep_status(response: httpx2.Response) -> None:
        if response.status_code >= 400:
            statuses.append(response.status_code)

    http = create_mcp_http_client(headers=endpoint.headers, timeout=httpx2.Timeout(endpoint.timeout))
    http.event_hooks = {**http.event_hooks, "response": [*http.event_hooks.get("response", []), keep_status]}
    return http, statuses


def _describe(exc: BaseException, statuses: list[int]) -> str:
    """The innermost failure of an exception group, in one line."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, TimeoutError):
        return "timed out"
    if statuses:
        return f"answered HTTP {statuses[-1]}"
    if isinstance(exc, httpx2.ConnectError):
        return "could not be reached"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:200]


async def list_tools(endpoint: McpEndpoint) -> list[McpTool]:
    tools: list[McpTool] = []
    http, statuses = _http_client(endpoint)
    try:
        with anyio.fail_after(endpoint.timeout):
            async with http, _client(endpoint, http) as client:
                cursor = None
                for _page in range(MAX_PAGES):
                    page = await client.list_tools(cursor=cursor)
                    tools += [McpTool(t.name, t.description or "", dict(t.input_schema or {})) for t in page.tools]
                    cursor = page.next_cursor
                    if not cursor:
                        break
    except Exception as exc:  # noqa: BLE001 — any failure of a server makes it unavailable, not us
        _go_on_cancelling()
        raise McpUnavailable(f"MCP server '{endpoint.name}' {_describe(exc, statuses)}.") from None
    _go_on_cancelling()
    return tools


async def call_tool(endpoint: McpEndpoint, name: str, arguments: dict[str, Any]) -> McpResult:
    http, statuses = _http_client(endpoint)
    try:
        with anyio.fail_after(endpoint.timeout):
            async with http, _client(endpoint, http) as client:
                result = await client.call_tool(name, arguments)
    except Exception as exc:  # noqa: BLE001
        _go_on_cancelling()
        raise McpUnavailable(f"MCP server '{endpoint.name}' {_describe(exc, statuses)}.") from None
    _go_on_cancelling()
    return McpResult(text=_result_text(result), is_error=bool(result.is_error))


def _go_on_cancelling() -> None:
    """Raise CancelledError when our task is being cancelled (a time bound of the agent, a client
    gone). Cancelled while it connects or closes, the `mcp` client may raise a transport error
    (ClosedResourceError, BrokenResourceError) or even return, swallowing the cancellation; 13
    of 200 cancellations at random moments did, and the agent's loop went on past its bound."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


def _result_text(result: Any) -> str:
    """The text parts of a tool result; other parts (images, resources) are named, not sent."""
    parts = []
    for item in result.content or ():
        kind = getattr(item, "type", "")
        if kind == "text":
            parts.append(item.text)
        else:
            parts.append(f"[{kind} content]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)
