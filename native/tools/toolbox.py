"""The tools an agent request offers the model and runs for it: the gateway's own
(`AGENT_TOOLS` of native/tools/builtin.py) and those of the operator's MCP servers the caller's
group may use (native/tools/remote.py), all run through native/tools/tool.py.

Two steps, so the database is read in the request's worker hop and the network in the view:

    plan = tool_plan(account=..., wanted=body.get("tools"), request_id=...)  # sync: which servers, 400/403
    toolbox = await open_toolbox(plan)                           # async: list the servers' tools
    toolbox.specs(); await toolbox.call(name, raw_arguments)

MCP tools are named `<server>__<tool>`. A group sees the servers granted to it (none granted:
every server) and, without `remote_servers_allowed`, only local ones. A server that cannot be
reached is skipped and reported in `toolbox.skipped`.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.models import Q

from gateway.web.errors import ApiError
from native.models import McpServer
from native.tools.builtin import AGENT_TOOLS, agent_tools
from native.tools.mcp_client import McpEndpoint, McpUnavailable, list_tools
from native.tools.remote import SEPARATOR, remote_tool, remote_tool_name
from native.tools.tool import Caller, Tool, run_tool


@dataclass(frozen=True)
class ToolPlan:
    caller: Caller
    servers: list[McpEndpoint]
    builtins: list[str]
    only: frozenset[str] | None  # tool names asked for one by one (None: every tool of the servers)


@dataclass
class Toolbox:
    caller: Caller
    tools: dict[str, Tool]
    skipped: list[dict[str, str]]  # [{server, error}]

    def specs(self) -> list[dict[str, Any]]:
        return [tool.spec() for tool in self.tools.values()]

    async def call(self, name: str, raw_arguments: str, *, refused: str | None = None) -> dict[str, Any]:
        """Run one call the model asked for: `{name, arguments, result}` or `{..., error}`; with
        `refused`, do not run it and give that error."""
        try:
            arguments = json.loads(raw_arguments) if raw_arguments.strip() else {}
        except ValueError:
            return {"name": name, "arguments": raw_arguments, "error": "The arguments are not valid JSON."}
        if not isinstance(arguments, dict):
            return {"name": name, "arguments": arguments, "error": "The arguments must be a JSON object."}
        if refused is not None:
            return {"name": name, "arguments": arguments, "error": refused}
        tool = self.tools.get(name)
        if tool is None:
            return {"name": name, "arguments": arguments, "error": f"There is no tool named '{name}'."}
        result = await run_tool(tool, self.caller, arguments)
        if result.is_error:
            return {"name": name, "arguments": arguments, "error": result.text}
        return {"name": name, "arguments": arguments, "result": result.text[: settings.AGENT_TOOL_RESULT_MAX_CHARS]}


def visible_servers(group):
    """The enabled MCP servers a group may use."""
    servers = McpServer.objects.filter(Q(groups__isnull=True) | Q(groups=group), enabled=True).distinct()
    if not group.remote_servers_allowed:
        servers = servers.filter(is_remote=False)
    return servers


def tool_plan(*, account, wanted: Any, request_id: str = "") -> ToolPlan:
    """Which tools a request gets. `wanted` (the request's `tools`) restricts them: built-in tool
    names, MCP tool names (`<server>__<tool>`) or server names (all of its tools). A name no
    server or tool has is 400 (spec 7.2); a server the group may not use is 403."""
    caller = Caller(account, request_id)
    group = account.group
    visible = {s.name: s for s in visible_servers(group)}
    if wanted is None:
        return ToolPlan(caller, [_endpoint(s) for s in visible.values()], list(AGENT_TOOLS), None)
    if not isinstance(wanted, list) or not all(isinstance(n, str) and n for n in wanted):
        raise ApiError(400, "'tools' must be a list of tool or MCP server names.", code="invalid_request_error")
    builtins, servers, only, whole = [], {}, set(), set()
    for name in wanted:
        if name in AGENT_TOOLS:
            builtins.append(name)
            continue
        server = _server_named(name)
        if server is None:
            raise ApiError(400, f"No tool or MCP server named '{name}' exists.", code="invalid_request_error")
        if server.name not in visible:
            if server.is_remote and not group.remote_servers_allowed:
                raise ApiError(403, f"Your account group may not use remote servers ('{server.name}').",
                               code="permission_denied")
            raise ApiError(403, f"The MCP server '{server.name}' is not available to your account group.",
                           code="permission_denied")
        servers[server.name] = _endpoint(server)
        if name == server.name:
            whole.add(server.name)
        else:
            only.add(remote_tool_name(server.name, name[len(server.name) + len(SEPARATOR):]))
    only |= {f"{name}{SEPARATOR}*" for name in whole}
    return ToolPlan(caller, list(servers.values()), builtins, frozenset(only))


def _server_named(name: str) -> McpServer | None:
    """The enabled server `name` is, or whose tool it names (`<server>__<tool>`)."""
    candidates = [name] + [name[:m.start()] for m in re.finditer(SEPARATOR, name) if m.start()]
    found = {s.name: s for s in McpServer.objects.filter(enabled=True, name__in=candidates)}
    return next((found[c] for c in candidates if c in found), None)


def _endpoint(server: McpServer) -> McpEndpoint:
    headers = {}
    if server.auth_header_name and server.auth_header_value:
        headers[server.auth_header_name] = server.auth_header_value
    return McpEndpoint(name=server.name, url=server.url, timeout=server.timeout, headers=headers)


async def open_toolbox(plan: ToolPlan) -> Toolbox:
    """List the tools of the plan's servers (all at once); unreachable servers are skipped."""
    tools = {tool.name: tool for tool in agent_tools(plan.builtins)}
    skipped: list[dict[str, str]] = []
    listings = await asyncio.gather(*(list_tools(s) for s in plan.servers), return_exceptions=True)
    for endpoint, listing in zip(plan.servers, listings):
        if isinstance(listing, McpUnavailable):
            skipped.append({"server": endpoint.name, "error": str(listing)})
            continue
        if isinstance(listing, BaseException):
            raise listing
        for listed in listing:
            tool = remote_tool(endpoint, listed)
            if plan.only is None or tool.name in plan.only or f"{endpoint.name}{SEPARATOR}*" in plan.only:
                tools[tool.name] = tool
    if plan.only is not None:
        reached = {e.name for e in plan.servers} - {s["server"] for s in skipped}
        missing = sorted(n for n in plan.only if not n.endswith("*") and n not in tools
                         and any(n.startswith(f"{s}{SEPARATOR}") for s in reached))
        if missing:
            raise ApiError(400, f"No tool named '{missing[0]}' exists.", code="invalid_request_error")
    return Toolbox(caller=plan.caller, tools=tools, skipped=skipped)
