"""`/api/v1/mcp`: the gateway itself as an MCP server over Streamable HTTP (JSON-RPC 2.0). This
module is the transport (HTTP checks, sessions, one message or a batch per POST); the messages
and methods are native/mcp_messages.py's, the tools native/tools/'s. Why not the `mcp` package's
server: docs/decisions/0106-one-way-to-do-each-thing.md.

One POST carries one JSON-RPC message (or, at protocol version 2025-03-26 only, a batch);
every answer is `application/json`, never an SSE stream, and no GET stream is offered (GET and
DELETE answer 405). The versions negotiated through `initialize` are the handshake ones,
2024-11-05 to 2025-11-25; `server/discover` (2026-07-28) is an unknown method, so a client
probing for the newer protocol falls back to `initialize`.

What answers what (docs/decisions/0037-mcp-server-a-django-view.md):
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

import secrets
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core import signing
from django.core.exceptions import DisallowedHost
from django.http import HttpRequest, HttpResponse

from accounts.endpoints import endpoint
from gateway.limits import ratelimit
from gateway.web.body import loads_lenient, read_body
from gateway.web.output import respond
from native.mcp_messages import (
    BATCH_VERSIONS,
    INVALID_PARAMS,
    INVALID_REQUEST,
    LATEST_VERSION,
    MAX_BATCH,
    METHOD_NOT_FOUND,
    METHODS,
    PARSE_ERROR,
    SUPPORTED_VERSIONS,
    Exchange,
    InvalidMessage,
    RpcError,
    TransportError,
    answer_message,
    classify,
    params_problem,
)
from native.tools.tool import Caller

SESSION_HEADER = "Mcp-Session-Id"
VERSION_HEADER = "MCP-Protocol-Version"
SESSION_SALT = "native.mcp.session"
SERVER_NAME = "model-gateway"
INSTRUCTIONS = (
    "Tools of the model gateway: list the models you may use and chat with one, search your "
    "document collections, and list or start your routines."
)


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


# -- sessions and versions ---------------------------------------------------------------------


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


def _rpc_response(body: Any, status: int = 200) -> HttpResponse:
    return respond(body, status=status)
