"""The JSON-RPC messages of `/api/v1/mcp` (native/mcp_server.py is the HTTP transport): what a
message is (request, notification, response), the protocol versions, the error codes, and the
methods (`ping`, `tools/list`, `tools/call`), whose tools are native/tools/builtin.py's, checked
and run by native/tools/tool.py. Message errors are JSON-RPC errors (spec 7.1: inside a 200)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from gateway.web.body import BadJsonValue, check_values
from native.tools import builtin
from native.tools.tool import Caller, argument_problem, run_tool

logger = logging.getLogger("native.mcp_server")  # the name its log lines had before the split

SUPPORTED_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_VERSION = SUPPORTED_VERSIONS[-1]
BATCH_VERSIONS = frozenset({"2025-03-26"})  # batches came in 2025-03-26 and left in 2025-06-18
MAX_BATCH = 20  # messages in one batch (one POST counts once against the rate limit)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


class RpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data

    def body(self, message_id: Any) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return {"jsonrpc": "2.0", "id": message_id, "error": error}


class TransportError(RpcError):
    """Refused before any message is handled, with an HTTP status of its own."""

    def __init__(self, status: int, message: str, data: Any = None) -> None:
        super().__init__(INVALID_REQUEST, message, data)
        self.status = status


@dataclass(frozen=True)
class Exchange:
    """What one POST knows about its caller and the protocol version in force."""

    caller: Caller
    version: str


def classify(message: Any) -> tuple[str, Any]:
    """`request`, `initialize`, `notification` or `response`, with the message's id; raises
    InvalidMessage (with the id when it could be read) for anything else."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        raise InvalidMessage("Invalid Request: not a JSON-RPC 2.0 message.", _readable_id(message))
    has_id = "id" in message
    message_id = message.get("id")
    if has_id and not _valid_id(message_id):
        raise InvalidMessage("Invalid Request: 'id' must be a string or an integer.", None)
    if "method" in message:
        if not isinstance(message["method"], str):
            raise InvalidMessage("Invalid Request: 'method' must be a string.", message_id)
        if not has_id:
            return "notification", None
        return ("initialize" if message["method"] == "initialize" else "request"), message_id
    if has_id and ("result" in message or "error" in message):
        return "response", message_id
    raise InvalidMessage("Invalid Request: neither a request, a notification nor a response.", message_id)


class InvalidMessage(RpcError):
    def __init__(self, message: str, message_id: Any) -> None:
        super().__init__(INVALID_REQUEST, message)
        self.message_id = message_id


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _readable_id(message: Any) -> Any:
    if isinstance(message, dict) and _valid_id(message.get("id")):
        return message["id"]
    return None


async def answer_message(exchange: Exchange, message: Any) -> dict[str, Any] | None:
    """The response to one message of a request (None for a notification or a response)."""
    try:
        kind, message_id = classify(message)
    except InvalidMessage as invalid:
        return invalid.body(invalid.message_id)
    if kind in ("notification", "response"):
        return None
    if kind == "initialize":  # only reachable inside a batch
        return RpcError(INVALID_REQUEST, "Invalid Request: initialize must not be part of a batch.").body(message_id)
    try:
        handler = METHODS.get(message["method"])
        if handler is None:
            raise RpcError(METHOD_NOT_FOUND, f"Method not found: {message['method']}")
        params = message.get("params", {})
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise RpcError(INVALID_PARAMS, "Invalid params: 'params' must be an object.")
        params_problem(params)
        result = await handler(exchange, params)
    except RpcError as exc:
        return exc.body(message_id)
    except Exception:  # a bug must not become a 500 or leak a trace: log it, answer -32603
        logger.exception("MCP method %s failed", message.get("method"))
        return RpcError(INTERNAL_ERROR, "Internal error.").body(message_id)
    return {"jsonrpc": "2.0", "id": message_id, "result": result}


def params_problem(params: dict[str, Any]) -> None:
    """Raises -32602 for a value no JSON encoder downstream can write (NaN, Infinity, a number
    too large for a float), a lone surrogate or a NUL, naming where it is."""
    try:
        check_values(params, path=["params"])
    except BadJsonValue as bad:
        raise RpcError(INVALID_PARAMS, f"Invalid params: {bad.where()}: {bad.problem}") from None
    except RecursionError:
        raise RpcError(INVALID_PARAMS, "Invalid params: nested too deeply.") from None


def version_at_least(version: str, oldest: str) -> bool:
    return SUPPORTED_VERSIONS.index(version) >= SUPPORTED_VERSIONS.index(oldest)


# -- methods -----------------------------------------------------------------------------------


async def ping(exchange: Exchange, params: dict[str, Any]) -> dict[str, Any]:
    return {}


async def tools_list(exchange: Exchange, params: dict[str, Any]) -> dict[str, Any]:
    return {"tools": builtin.listing()}


async def tools_call(exchange: Exchange, params: dict[str, Any]) -> dict[str, Any]:
    name = params.get("name")
    arguments = params.get("arguments", {})
    if arguments is None:
        arguments = {}
    if not isinstance(name, str) or not name:
        raise RpcError(INVALID_PARAMS, "Invalid params: 'name' must be the name of a tool.")
    if not isinstance(arguments, dict):
        raise RpcError(INVALID_PARAMS, "Invalid params: 'arguments' must be an object.")
    tool = builtin.TOOLS.get(name)
    if tool is None:
        raise RpcError(INVALID_PARAMS, f"Unknown tool: {name}")
    # Since 2025-11-25 arguments that break the tool's schema are a tool error the model can read
    # and correct (SEP-1303, which run_tool gives); before, the protocol error "invalid params".
    if not version_at_least(exchange.version, "2025-11-25"):
        problem = argument_problem(tool, arguments)
        if problem is not None:
            raise RpcError(INVALID_PARAMS, f"Invalid params: arguments for {name}: {problem}")
    return (await run_tool(tool, exchange.caller, arguments)).as_mcp()


METHODS = {"ping": ping, "tools/list": tools_list, "tools/call": tools_call}
