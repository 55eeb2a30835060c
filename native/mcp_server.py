"""`/api/v1/mcp`: the gateway itself as an MCP server over Streamable HTTP (JSON-RPC 2.0).

One POST carries one JSON-RPC message (or, at protocol version 2025-03-26 only, a batch);
every answer is `application/json`, never an SSE stream, and no GET stream is offered (GET and
DELETE answer 405). The versions negotiated through `initialize` are the handshake ones,
2024-11-05 to 2025-11-25; `server/discover` (2026-07-28) is an unknown method, so a client
probing for the newer protocol falls back to `initialize`.

What answers what (docs/decisions.md, "MCP server"):
- the endpoint wrapper first: 405 for other methods, 401/403 for a credential (spec 5.3,
  `{message: 'Unauthenticated.'}`), 429 of the general 300-per-minute row;
- transport errors with the status the MCP transport names and a JSON-RPC error body
  (`id: null`): a foreign Origin 403, an Accept without JSON 406, a body that is not JSON 415,
  a missing session id 400, an unsupported `MCP-Protocol-Version` 400, an unknown session 404;
- message errors (parse error, invalid request, unknown method, invalid params, internal)
  as JSON-RPC errors inside a 200 (spec 7.1);
- a notification or a client's response: 202 with no body.

Sessions hold no server state: the `Mcp-Session-Id` given on `initialize` is signed and names
the account and the negotiated version, so every web process can check it; another account's
or a forged one is unknown (404).
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core import signing
from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponse

from accounts.endpoints import endpoint
from gateway import ratelimit
from gateway.http import BadJsonValue, check_values, loads_lenient, read_body
from gateway.output import respond
from native.tools import builtin
from native.tools.tool import Caller, argument_problem, run_tool

logger = logging.getLogger(__name__)

SUPPORTED_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_VERSION = SUPPORTED_VERSIONS[-1]
BATCH_VERSIONS = frozenset({"2025-03-26"})  # batches came in 2025-03-26 and left in 2025-06-18
MAX_BATCH = 20  # messages in one batch (one POST counts once against the rate limit)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603

SESSION_HEADER = "Mcp-Session-Id"
VERSION_HEADER = "MCP-Protocol-Version"
SESSION_SALT = "native.mcp.session"
SERVER_NAME = "model-gateway"
INSTRUCTIONS = (
    "Tools of the model gateway: list the models you may use and chat with one, search your "
    "document collections, and list or start your routines."
)


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


@endpoint("POST", limit=ratelimit.DEFAULT)
async def mcp(request: HttpRequest) -> HttpResponse:
    try:
        check_transport(request)
        payload = parse_payload(read_body(request))
    except TransportError as exc:
        return _rpc_response(exc.body(None), status=exc.status)
    except RpcError as exc:
        return _rpc_response(exc.body(None))
    caller = Caller(account=request.principal.account, request_id=getattr(request, "request_id", ""))
    try:
        if isinstance(payload, list):
            return await handle_batch(request, caller, payload)
        return await handle_single(request, caller, payload)
    except TransportError as exc:
        return _rpc_response(exc.body(None), status=exc.status)


def check_transport(request: HttpRequest) -> None:
    origin = request.headers.get("Origin")
    if origin is not None and not _origin_allowed(request, origin):
        raise TransportError(403, "Forbidden: the Origin of this request is not allowed.")
    accept = request.headers.get("Accept", "")
    kinds = {part.split(";")[0].strip().lower() for part in accept.split(",")}
    if not kinds & {"application/json", "application/*", "*/*"}:
        raise TransportError(406, "Not Acceptable: the client must accept application/json.")
    if (request.content_type or "").lower() != "application/json":
        raise TransportError(415, "Unsupported Media Type: the body must be sent as application/json.")


def _origin_allowed(request: HttpRequest, origin: str) -> bool:
    if origin in settings.MCP_ALLOWED_ORIGINS:
        return True
    try:
        own_host = request.get_host()
    except DisallowedHost:
        return False
    return urlsplit(origin).netloc.lower() == own_host.lower()


def parse_payload(raw: bytes) -> Any:
    """The message or batch. NaN, Infinity, an overflowing number, a lone surrogate or a NUL are
    not refused here but in the message that holds them (`params_problem`), so its id is known."""
    try:
        payload, _suspect = loads_lenient(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise RpcError(PARSE_ERROR, "Parse error: the body is not valid JSON.") from None
    if not isinstance(payload, (dict, list)):
        raise RpcError(INVALID_REQUEST, "Invalid Request: expected a JSON-RPC message or a batch of them.")
    return payload


async def handle_single(request: HttpRequest, caller: Caller, message: dict[str, Any]) -> HttpResponse:
    try:
        kind, message_id = classify(message)
    except InvalidMessage as invalid:
        return _rpc_response(invalid.body(invalid.message_id))
    if kind == "initialize":
        return initialize_response(caller, message_id, message.get("params"))
    if kind == "request" and message["method"] not in METHODS:
        # Before the session checks, so a probe for a newer protocol learns the method is unknown.
        return _rpc_response(RpcError(METHOD_NOT_FOUND, f"Method not found: {message['method']}").body(message_id))
    exchange = Exchange(caller=caller, version=session_version(request, caller))
    answer = await answer_message(exchange, message)
    return _rpc_response(answer) if answer is not None else HttpResponse(status=202)


async def handle_batch(request: HttpRequest, caller: Caller, batch: list[Any]) -> HttpResponse:
    exchange = Exchange(caller=caller, version=session_version(request, caller))
    if exchange.version not in BATCH_VERSIONS:
        error = RpcError(INVALID_REQUEST, f"Invalid Request: protocol version {exchange.version} has no batches.")
        return _rpc_response(error.body(None))
    if not batch:
        return _rpc_response(RpcError(INVALID_REQUEST, "Invalid Request: the batch is empty.").body(None))
    if len(batch) > MAX_BATCH:
        error = RpcError(INVALID_REQUEST, f"Invalid Request: batch too large (at most {MAX_BATCH} messages).")
        return _rpc_response(error.body(None))
    answers = [answer for message in batch if (answer := await answer_message(exchange, message)) is not None]
    return _rpc_response(answers) if answers else HttpResponse(status=202)


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


# -- sessions and versions ---------------------------------------------------------------------


def params_problem(params: dict[str, Any]) -> None:
    """Raises -32602 for a value no JSON encoder downstream can write (NaN, Infinity, a number
    too large for a float), a lone surrogate or a NUL, naming where it is."""
    try:
        check_values(params, path=["params"])
    except BadJsonValue as bad:
        raise RpcError(INVALID_PARAMS, f"Invalid params: {bad.where()}: {bad.problem}") from None
    except RecursionError:
        raise RpcError(INVALID_PARAMS, "Invalid params: nested too deeply.") from None


def initialize_response(caller: Caller, message_id: Any, params: Any) -> HttpResponse:
    """The negotiated version, the server's capabilities, and a new session id in its header."""
    if not isinstance(params, dict) or not isinstance(params.get("protocolVersion"), str):
        error = RpcError(INVALID_PARAMS, "Invalid params: 'protocolVersion' must be a string.")
        return _rpc_response(error.body(message_id))
    try:
        params_problem(params)
    except RpcError as error:
        return _rpc_response(error.body(message_id))
    requested = params["protocolVersion"]
    version = requested if requested in SUPPORTED_VERSIONS else LATEST_VERSION
    result = {
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": {"name": SERVER_NAME, "version": settings.SERVICE_VERSION},
        "instructions": INSTRUCTIONS,
    }
    response = _rpc_response({"jsonrpc": "2.0", "id": message_id, "result": result})
    response[SESSION_HEADER] = signing.dumps({"a": caller.account.pk, "v": version, "n": secrets.token_hex(8)},
                                             salt=SESSION_SALT)
    return response


def session_version(request: HttpRequest, caller: Caller) -> str:
    """The version of the caller's session; 400 without a session id or with a version header
    that is not supported or not the session's, 404 for a session that is not the caller's."""
    session_id = request.headers.get(SESSION_HEADER)
    if not session_id:
        raise TransportError(400, "Bad Request: missing Mcp-Session-Id header; send initialize first.")
    try:
        session = signing.loads(session_id, salt=SESSION_SALT, max_age=settings.MCP_SESSION_MAX_AGE_SECONDS)
    except signing.BadSignature:
        session = None
    mine = isinstance(session, dict) and session.get("a") == caller.account.pk
    if not mine or session.get("v") not in SUPPORTED_VERSIONS:
        raise TransportError(404, "Not Found: unknown or expired session; send initialize again.")
    version = session["v"]
    header = request.headers.get(VERSION_HEADER)
    if header is not None and header != version:
        supported = header in SUPPORTED_VERSIONS
        reason = "is not the version negotiated for this session" if supported else "is not supported"
        raise TransportError(400, f"Bad Request: protocol version {header!r} {reason}.",
                             data={"supported": list(SUPPORTED_VERSIONS), "negotiated": version})
    return version


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


def _rpc_response(body: Any, status: int = 200) -> HttpResponse:
    return respond(body, status=status)
