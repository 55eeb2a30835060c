"""One request to Bedrock's runtime and its binary event stream back, through the gateway's own upstream
client (gateway/upstream/http_client.py: its pool, timeouts and egress proxy).

Authentication: a Bedrock API key is sent as `Authorization: Bearer` and nothing is signed; else the
request is signed with SigV4 for the service `bedrock` in the server's region, by botocore
(gateway/registry/aws_auth.py), with the server's own access key pair or AWS's credential chain. A chain
due for a refresh is refreshed in a thread, never in the event loop.

The reply, `application/vnd.amazon.eventstream`, is parsed by botocore's own parser
(`EventStreamBuffer`: prelude, headers, CRCs) as it arrives. An exception frame (`:message-type`
`exception` or `error`) ends it: before anything of the reply was passed on it is an UpstreamError
(classified as an HTTP error of the same name would be, so a throttled call falls through to the next
model), after it a StreamCut `upstream_error`; a body that ends before the reply did is a StreamCut
`disconnected`, as for the SSE kinds (gateway/upstream/providers/base.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

from botocore.eventstream import EventStreamBuffer, ParserError

from gateway.registry import aws_auth
from gateway.registry.snapshot import Server
from gateway.telemetry.redact import redact
from gateway.upstream import http_client as upstream_http
from gateway.upstream.http_client import build_request
from gateway.upstream.providers.base import (
    REFUSED,
    UNAVAILABLE,
    StreamCut,
    UpstreamError,
    broken,
    secrets_of,
    send,
    timeouts,
)

SERVICE = "bedrock"  # the signing name of both the runtime and the control plane
JSON = "application/json"

# Bedrock's error names (x-amzn-ErrorType, or an exception frame's `:exception-type`), lower-cased:
# the status reported for it when the frame has none, and whether another model may take the call
_ERRORS: dict[str, tuple[int, str]] = {
    "validationexception": (400, REFUSED),
    "resourcenotfoundexception": (404, REFUSED),
    "throttlingexception": (429, UNAVAILABLE),
    "modelnotreadyexception": (429, UNAVAILABLE),
    "servicequotaexceededexception": (429, UNAVAILABLE),
    "serviceunavailableexception": (503, UNAVAILABLE),
    "internalserverexception": (500, UNAVAILABLE),
    "modelstreamerrorexception": (424, UNAVAILABLE),
    "modelerrorexception": (424, UNAVAILABLE),
    "modeltimeoutexception": (408, UNAVAILABLE),
    "accessdeniedexception": (403, UNAVAILABLE),
    "unrecognizedclientexception": (403, UNAVAILABLE),
    "expiredtokenexception": (403, UNAVAILABLE),
    "invalidsignatureexception": (403, UNAVAILABLE),
    "incompletesignatureexception": (403, UNAVAILABLE),
}


@dataclass(frozen=True)
class Frame:
    """One message of the event stream: its `:message-type`, `:event-type` (or exception type) and payload."""

    message_type: str
    event_type: str
    payload: bytes
    headers: Mapping[str, Any]


async def signed_request(server: Server, method: str, url: str, body: bytes | None = None,
                         headers: dict[str, str] | None = None) -> upstream_http.Request:
    """`url` asked of `server` with its credentials: the API key as a bearer token, else SigV4."""
    sent = {"Content-Type": JSON, **(headers or {})} if body is not None else dict(headers or {})
    if server.api_key:
        sent["Authorization"] = f"Bearer {server.api_key}"
        return build_request(method, url, content=body, headers=sent, timeouts=timeouts(server))
    cloud = server.cloud
    credentials = (await asyncio.to_thread(aws_auth.frozen, cloud) if aws_auth.needs_io(cloud)
                   else aws_auth.frozen(cloud))
    if credentials is None:
        raise UpstreamError(UNAVAILABLE, 401, f"No AWS credentials for server '{server.name}': give it an access key "
                                              "or a Bedrock API key, or give the gateway's processes AWS credentials.")
    sent = aws_auth.signed_headers(credentials, service=SERVICE, region=cloud.region, method=method, url=url,
                                   headers=sent, body=body or b"")
    return build_request(method, url, content=body, headers=sent, timeouts=timeouts(server))


def secrets(request: upstream_http.Request, server: Server) -> list[str]:
    """Everything of the credentials an answer's words must not show (the signature's parts included)."""
    return [*secrets_of(request, server), *aws_auth.secrets(server.cloud),
            *(value for name, value in request.headers.items() if name.lower() == "x-amz-security-token")]


def failure(status: int, error_type: str, message: str, headers: Mapping[str, str],
            secret_values: list[str]) -> UpstreamError:
    """The failure of an answer other than 200, or of an exception frame, by Bedrock's error name."""
    name = error_type.partition(":")[0].strip().lower()
    known_status, kind = _ERRORS.get(name, (status, None))
    status = status or known_status
    if kind is None:  # a name Bedrock did not document: by its status, as for the other kinds
        kind = UNAVAILABLE if status >= 500 or status in (401, 403, 408, 429) else REFUSED
    label = error_type.partition(":")[0].strip()
    words = redact(message, secret_values) if message else f"The model server answered {status}."
    error = UpstreamError(kind, status, f"{label}: {words}" if label else words, _retry_after(headers))
    error.answered = True
    return error


def answered_failure(response: upstream_http.Response, body: bytes, request: upstream_http.Request,
                     server: Server) -> UpstreamError:
    message = ""
    try:
        data = json.loads(body)
        if isinstance(data, dict):
            found = data.get("message") or data.get("Message")
            message = found if isinstance(found, str) else ""
    except ValueError:
        message = body[:300].decode(errors="replace").strip()
    return failure(response.status_code, response.headers.get("x-amzn-errortype", ""), message, response.headers,
                   secrets(request, server))


def frame_failure(frame: Frame, started: bool, secret_values: list[str]) -> Exception:
    """An exception frame: UpstreamError before the reply began, StreamCut `upstream_error` after."""
    message = ""
    try:
        data = json.loads(frame.payload)
        if isinstance(data, dict) and isinstance(data.get("message"), str):
            message = data["message"]
    except ValueError:
        pass
    if frame.message_type == "error":  # the generic form: its code and words are headers
        message = str(frame.headers.get(":error-message") or message)
    error = failure(0, frame.event_type, message, {}, secret_values)
    return StreamCut("upstream_error", error.message) if started else error


async def frames(request: upstream_http.Request, server: Server) -> AsyncIterator[Frame]:
    """The event stream's frames. Before the first frame every failure is an UpstreamError; after it a
    transport failure or a malformed frame is a StreamCut. `started` below is the consumer's to say
    (`frame_failure`): a frame is not yet part of the client's reply."""
    response = await send(request, stream=True)
    yielded = False
    try:
        if response.status_code != 200:
            raise answered_failure(response, await response.aread(), request, server)
        buffer = EventStreamBuffer()
        async for data in response.aiter_raw():
            buffer.add_data(data)
            for message in buffer:
                headers = message.headers
                kind = str(headers.get(":message-type", "event"))
                name = headers.get(":exception-type") if kind == "exception" else (
                    headers.get(":error-code") if kind == "error" else headers.get(":event-type"))
                yielded = True
                yield Frame(kind, str(name or ""), bytes(message.payload), headers)
    except ParserError:
        raise broken(yielded, "The model server sent a malformed event stream.") from None
    except upstream_http.Timeout:
        if not yielded:
            raise UpstreamError(UNAVAILABLE, 504, "The model server did not answer in time.",
                                cooldown_cause="read timeout before the first byte") from None
        raise StreamCut("read_timeout", "The model stopped answering mid-reply.") from None
    except upstream_http.HTTPError:
        if not yielded:
            raise UpstreamError(UNAVAILABLE, 502, "The model server closed the connection.") from None
        raise StreamCut("disconnected", "The model server closed the connection mid-reply.") from None
    finally:
        await response.aclose()


def _retry_after(headers: Mapping[str, str]) -> float | None:
    try:
        return float(headers["retry-after"])
    except (KeyError, ValueError):
        return None
