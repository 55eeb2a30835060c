"""What every provider client shares: the failure types, the classification of a model
server's answer, and one pooled HTTP client per event loop (connection reuse across requests):
gateway/upstream/http_client.py, whose failures are mapped here."""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import Mapping
from dataclasses import dataclass

from gateway.registry.snapshot import Server
from gateway.telemetry.redact import credentials_in, redact
from gateway.upstream import http_client as upstream_http
from gateway.upstream.sse import sse_read

REFUSED = "refused"  # the server rejected the request as invalid: not worth retrying elsewhere as-is
UNAVAILABLE = "unavailable"  # rate limit, quota, overload, key refused or missing, 5xx, unreachable
BAD_RESPONSE = "bad_response"  # answered, but with nothing usable

RETRYABLE_STATUSES = {401, 402, 403, 408, 409, 429, 529}


@dataclass
class UpstreamError(Exception):
    """A model server failed before the first byte of a reply."""

    kind: str
    status: int  # the server's own status, or the one we report for it
    message: str
    retry_after: float | None = None
    cooldown_cause: str | None = None  # set when the server could not be reached or timed out
    answered: bool = False  # the server itself answered with this failure (its status and words)

    def __post_init__(self) -> None:
        # whatever built it, no credential-shaped text leaves in a failure's message
        self.message = redact(self.message)

    @property
    def retryable(self) -> bool:
        return self.kind != REFUSED

    def __str__(self) -> str:
        return f"{self.kind} {self.status}: {self.message}"


@dataclass
class StreamCut(Exception):
    """A reply stopped after it had begun: `read_timeout`, `disconnected` or `upstream_error`."""

    reason: str
    message: str

    def __post_init__(self) -> None:
        self.message = redact(self.message)

    def __str__(self) -> str:
        return f"{self.reason}: {self.message}"


def secrets_of(request: upstream_http.Request, server: Server) -> list[str]:
    """The credentials a request to `server` carries: the server's key and every credential
    header that was sent. An answer's text is shown only without them (gateway/telemetry/redact.py)."""
    return [server.api_key, *credentials_in(request.headers)]


def failure_from_response(status: int, body: bytes, headers: Mapping[str, str],
                          secrets: list[str] | tuple[str, ...] = ()) -> UpstreamError:
    """The failure of a model server's answer other than 200. Its error message is passed on to
    the caller, so it is stripped of `secrets` (what the request carried) and of anything shaped
    like a credential first: some servers echo the key they refused."""
    message = _error_message(body, secrets) or f"The model server answered {status}."
    retry_after = _retry_after(headers)
    if status >= 500 or status in RETRYABLE_STATUSES:
        return UpstreamError(UNAVAILABLE, status, message, retry_after)
    return UpstreamError(REFUSED, status, message, retry_after)


def answered_failure(response: upstream_http.Response, body: bytes, request: upstream_http.Request,
                     server: Server) -> UpstreamError:
    """`failure_from_response` of an answer `server` gave, marked as its own answer: a refusal
    it answered (404 for a wrong base URL) is its last failure for the admin, while one the
    gateway made (a field its format cannot carry) says nothing of the server."""
    failure = failure_from_response(response.status_code, body, response.headers, secrets_of(request, server))
    failure.answered = True
    return failure


def failure_from_transport(exc: upstream_http.HTTPError) -> UpstreamError:
    """A connect failure, or a connect or read timeout, also puts the server in cooldown."""
    if isinstance(exc, (upstream_http.ConnectTimeout, upstream_http.ReadTimeout)):
        cause = ("connect timeout" if isinstance(exc, upstream_http.ConnectTimeout)
                 else "read timeout before the first byte")
        return UpstreamError(UNAVAILABLE, 504, "The model server did not answer in time.", cooldown_cause=cause)
    if isinstance(exc, upstream_http.Timeout):
        return UpstreamError(UNAVAILABLE, 504, "The model server did not answer in time.")
    if isinstance(exc, upstream_http.ConnectError):
        return UpstreamError(UNAVAILABLE, 503, "The model server could not be reached.",
                             cooldown_cause=f"connect failed ({str(exc) or type(exc).__name__})")
    return UpstreamError(UNAVAILABLE, 503, "The model server could not be reached.")


def cooling_down(server: Server) -> UpstreamError:
    """The failure of a call skipped because its server is cooling down (no network call)."""
    return UpstreamError(UNAVAILABLE, 503, f"The model server '{server.name}' is cooling down: it could not be "
                                           "reached lately.")


async def send(request: upstream_http.Request, *, stream: bool) -> upstream_http.Response:
    """Send `request` to its model server: the response (its body read, in `content`, unless `stream`),
    or UpstreamError (`cooldown_cause` set when it could not be reached or timed out). It only
    says what happened: the chain that asked (gateway/calls/chain.py) asked the cooldown first
    and records the attempt."""
    try:
        response = await http_client().send(request)
        if not stream:
            try:
                await response.aread()
            finally:
                await response.aclose()
    except upstream_http.HTTPError as exc:
        raise failure_from_transport(exc) from None
    return response


ERROR_TEXT_CHARS = 300  # of a body that is not JSON, the start is shown
ERROR_TEXT_READ = 4096  # ... after redacting this much of it (a key cut at 300 is still found)


def _error_message(body: bytes, secrets: list[str] | tuple[str, ...] = ()) -> str:
    try:
        data = json.loads(body)
    except ValueError:
        text = redact(body[:ERROR_TEXT_READ].decode(errors="replace"), secrets)
        return text[:ERROR_TEXT_CHARS].strip()
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return redact(error["message"], secrets)
    if isinstance(error, str):
        return redact(error, secrets)
    return ""


def _retry_after(headers: Mapping[str, str]) -> float | None:
    try:
        return float(headers["retry-after"])
    except (KeyError, ValueError):
        return None


_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, upstream_http.Client] = weakref.WeakKeyDictionary()


def http_client() -> upstream_http.Client:
    """The process's pooled client for the running event loop."""
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None:
        client = _clients[loop] = upstream_http.Client(max_idle=200, idle_expiry=30)
    return client


def timeouts(server: Server) -> upstream_http.Timeouts:
    return upstream_http.Timeouts(connect=server.connect_timeout, read=server.read_timeout, write=30.0)


def missing_key(server: Server) -> UpstreamError | None:
    """A cloud provider without a key is skipped like one that refused the key."""
    if server.is_remote and not server.api_key:
        return UpstreamError(UNAVAILABLE, 401, f"No API key is configured for server '{server.name}'.")
    return None


async def server_events(request: upstream_http.Request, server: Server, failure=None):
    """(event, data) of a model server's SSE reply. Before the first event every failure is an
    UpstreamError (so the next model can be tried); after it, a StreamCut. A server that times
    out before its first event fails with a `cooldown_cause`, as one that could not be reached.
    `failure` reads an answer other than 200 of a kind with failures of its own (`answered_failure`'s
    arguments); by default, `answered_failure`."""
    response = await send(request, stream=True)
    started = False
    try:
        if response.status_code != 200:
            raise (failure or answered_failure)(response, await response.aread(), request, server)
        async for event, data in sse_read(response.aiter_raw()):
            yield event, data
            started = True
    except upstream_http.Timeout:
        if not started:
            raise UpstreamError(UNAVAILABLE, 504, "The model server did not answer in time.",
                                cooldown_cause="read timeout before the first byte") from None
        raise StreamCut("read_timeout", "The model stopped answering mid-reply.") from None
    except upstream_http.HTTPError:
        if not started:
            raise UpstreamError(UNAVAILABLE, 502, "The model server closed the connection.") from None
        raise StreamCut("disconnected", "The model server closed the connection mid-reply.") from None
    finally:
        await response.aclose()


def broken(started: bool, message: str, cut: str = "disconnected",
           secrets: list[str] | tuple[str, ...] = ()) -> Exception:
    """A malformed or failed stream: a StreamCut once the reply has begun, else an UpstreamError.
    `message` may be the server's own words: it is stripped of `secrets` (`secrets_of`)."""
    message = redact(message, secrets)
    return StreamCut(cut, message) if started else UpstreamError(BAD_RESPONSE, 502, message)


def uncarried(server: Server, fields: list[str] | tuple[str, ...]) -> UpstreamError | None:
    """The refusal of a translated request whose `fields` (names as the client sent them) the
    server's wire format cannot carry, unless the server drops unsupported fields. A refusal: on
    /v1 the chain moves on (spec 7.3); the last one's 400 names the field."""
    if not fields or server.drop_unsupported_fields:
        return None
    names = ", ".join(f"'{name}'" for name in fields)
    several = len(fields) > 1
    return UpstreamError(REFUSED, 400, f"The model server '{server.name}' cannot take the "
                                       f"field{'s' if several else ''} {names} in its wire format; leave "
                                       f"{'them' if several else 'it'} out, or let the operator set the server to drop "
                                       "unsupported fields.")
