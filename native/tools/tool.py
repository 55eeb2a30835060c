"""What a tool is, how its arguments are checked and how it is run: the one way for the
gateway's own tools (native/tools/builtin.py) and those of the operator's MCP servers
(native/tools/remote.py), whoever calls them: agent chat and run (native/tools/toolbox.py) or
the MCP server endpoint (native/mcp_server.py).

A tool has a JSON Schema for its arguments and answers a `ToolResult`: a text (the reply, or
the JSON of what was asked), optional structured content, and whether it is an error. A failure
the caller can act on (a model not allowed, a quota used up, a collection or routine that is not
theirs, a paused routine, arguments that break the schema) is an error result whose text says
why; the agent gives it to the model, the MCP endpoint answers it with `isError: true`.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from jsonschema.exceptions import SchemaError, best_match
from jsonschema.validators import validator_for

from gateway.web.errors import ApiError


@dataclass(frozen=True)
class Caller:
    account: Any  # accounts.Account, with its group loaded
    request_id: str = ""


@dataclass(frozen=True)
class ToolResult:
    text: str
    structured: dict[str, Any] | None = None
    is_error: bool = False

    @classmethod
    def data(cls, structured: dict[str, Any]) -> ToolResult:
        """Structured content, with its JSON as the text for clients that read only text."""
        return cls(json.dumps(structured, ensure_ascii=False, default=str), structured)

    @classmethod
    def error(cls, text: str) -> ToolResult:
        return cls(text, is_error=True)

    def as_mcp(self) -> dict[str, Any]:
        """The MCP `tools/call` result."""
        result: dict[str, Any] = {"content": [{"type": "text", "text": self.text}], "isError": self.is_error}
        if self.structured is not None:
            result["structuredContent"] = self.structured
        return result


class ToolError(Exception):
    """A tool's own refusal; its message is the text of the error result."""


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any]
    run: Callable[[Caller, dict[str, Any]], Awaitable[ToolResult]] = field(repr=False, compare=False)
    read_only: bool = True

    def listed(self) -> dict[str, Any]:
        """The tool in the MCP `tools/list` form."""
        return {"name": self.name, "description": self.description, "inputSchema": self.input_schema,
                "annotations": {"readOnlyHint": self.read_only}}

    def spec(self) -> dict[str, Any]:
        """The tool in the OpenAI function form, as the agent offers it to a model."""
        return {"type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": self.input_schema}}

    @cached_property
    def validator(self) -> Any:
        """The schema's validator, made once per tool (the draft the schema names, 2020-12 by
        default); None for a schema that is not valid JSON Schema (an MCP server's), which is left
        to the tool's server."""
        kind = validator_for(self.input_schema)
        try:
            kind.check_schema(self.input_schema)
        except SchemaError:
            return None
        return kind(self.input_schema)


def argument_problem(tool: Tool, arguments: dict[str, Any]) -> str | None:
    """What is wrong with `arguments` by the tool's schema, in one line; None when nothing is."""
    if tool.validator is None:
        return None
    error = best_match(tool.validator.iter_errors(arguments))
    if error is None:
        return None
    where = "/".join(str(part) for part in error.absolute_path)
    return f"{where}: {error.message}" if where else error.message


async def run_tool(tool: Tool, caller: Caller, arguments: dict[str, Any]) -> ToolResult:
    """Check the arguments, then run the tool; a refusal is an error result."""
    problem = argument_problem(tool, arguments)
    if problem is not None:
        return ToolResult.error(f"Invalid arguments for {tool.name}: {problem}")
    try:
        return await tool.run(caller, arguments)
    except ApiError as refused:
        return ToolResult.error(refused.message)
    except ToolError as refused:
        return ToolResult.error(str(refused))
