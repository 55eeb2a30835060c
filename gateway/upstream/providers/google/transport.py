"""What Google's two kinds share: a model's address, the credentials a call carries, and Google's failures.

Addresses, as Google's own SDKs make them:
- the Gemini API (kind `gemini`): `{base}/v1beta/models/{model}:{method}`, the key in `x-goog-api-key` (never in
  the URL, where a log or a proxy would keep it);
- Vertex AI (kind `vertex`): `{base}/v1/projects/{project}/locations/{location}/publishers/{publisher}/models/
  {model}:{method}`, a Google OAuth access token as a bearer token (gateway/registry/google_auth.py). The
  publisher is the model's own (`publisher`) or, left empty, `anthropic` for a `claude-` name and `google` else.

A base URL the operator wrote with an API version (`…/v1beta`, `…/v1`) is taken without it.

Google's failures are `{"error": {"code", "message", "status"}}` (a streaming method may answer a list of one):
the status name decides whether another model may take the call (`STATUSES`; a key refused is said with a
400 and its ErrorInfo reason, `KEY_REFUSED`), and the words are passed on with it. A `Retry-After` header,
else the `RetryInfo` detail's `retryDelay`, says when to try again."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from gateway.registry import google_auth
from gateway.registry.snapshot import Server, Target
from gateway.telemetry.redact import redact
from gateway.upstream import http_client as upstream_http
from gateway.upstream.http_client import build_request
from gateway.upstream.providers.base import REFUSED, UNAVAILABLE, UpstreamError, secrets_of, timeouts

VERTEX, GEMINI = "vertex", "gemini"
GEMINI_VERSION, VERTEX_VERSION = "v1beta", "v1"
_VERSIONS = ("/v1beta1", "/v1beta", "/v1")

# Google's status names: the status reported for it when the answer has none, and whether another model may
# take the call (the key refused, a quota, an overload: yes; a request the model cannot take: no)
STATUSES: dict[str, tuple[int, str]] = {
    "RESOURCE_EXHAUSTED": (429, UNAVAILABLE),
    "UNAVAILABLE": (503, UNAVAILABLE),
    "INTERNAL": (500, UNAVAILABLE),
    "DEADLINE_EXCEEDED": (504, UNAVAILABLE),
    "PERMISSION_DENIED": (403, UNAVAILABLE),
    "UNAUTHENTICATED": (401, UNAVAILABLE),
    "ABORTED": (409, UNAVAILABLE),
    "CANCELLED": (499, UNAVAILABLE),
    "INVALID_ARGUMENT": (400, REFUSED),
    "FAILED_PRECONDITION": (400, REFUSED),
    "NOT_FOUND": (404, REFUSED),
    "OUT_OF_RANGE": (400, REFUSED),
    "UNIMPLEMENTED": (501, REFUSED),
}


# an ErrorInfo reason that refuses the server's key rather than the request: another model may take the call
KEY_REFUSED = ("API_KEY_INVALID", "API_KEY_SERVICE_BLOCKED", "ACCESS_TOKEN_EXPIRED", "CONSUMER_SUSPENDED")


def root(server: Server) -> str:
    """The server's address without an API version the operator may have written with it."""
    base = server.base_url.rstrip("/")
    for version in _VERSIONS:
        if base.endswith(version):
            return base[: -len(version)]
    return base


def publisher(target: Target) -> str:
    """Who publishes a Vertex AI model: as the operator set it, else by its name."""
    return target.publisher or ("anthropic" if target.name.lower().startswith("claude-") else "google")


def model_url(target: Target, method: str) -> str:
    """The URL of `method` (`streamGenerateContent`, `streamRawPredict`, `predict`, ...) on `target`'s model."""
    server = target.server
    model = quote(target.name, safe="@:")
    if server.kind == VERTEX:
        cloud = server.cloud
        where = f"projects/{quote(cloud.gcp_project, safe='')}/locations/{quote(cloud.region, safe='')}"
        return f"{root(server)}/{VERTEX_VERSION}/{where}/publishers/{quote(publisher(target), safe='')}/models/" \
               f"{model}:{method}"
    return f"{root(server)}/{GEMINI_VERSION}/models/{model}:{method}"


async def credentials(server: Server) -> dict[str, str]:
    """The headers that say who calls: the Gemini API's key, or Vertex AI's access token (UpstreamError when there
    is none: the server's failure, 401, as a key refused)."""
    if server.kind == GEMINI:
        if not server.api_key:
            raise UpstreamError(UNAVAILABLE, 401, f"No API key is configured for server '{server.name}'.")
        return {"x-goog-api-key": server.api_key}
    token = google_auth.cached(server)
    if token is None:
        try:
            token = await google_auth.token(server)
        except google_auth.TokenFailed as exc:
            raise UpstreamError(UNAVAILABLE, 401, str(exc)) from None
    return {"Authorization": f"Bearer {token}"}


async def request(target: Target, method: str, body: dict[str, Any], *, query: str = "",
                  headers: dict[str, str] | None = None) -> upstream_http.Request:
    """A POST of `body` (JSON) to `method` of `target`'s model, with the server's credentials."""
    url = model_url(target, method) + (f"?{query}" if query else "")
    sent = {**(headers or {}), **await credentials(target.server)}
    return build_request("POST", url, json=body, headers=sent, timeouts=timeouts(target.server))


def answered_failure(response: upstream_http.Response, body: bytes, sent: upstream_http.Request,
                     server: Server) -> UpstreamError:
    """The failure of an answer other than 200, by Google's status name (by its HTTP status without one)."""
    error = _error_of(body)
    status = response.status_code
    name = error.get("status") if isinstance(error.get("status"), str) else ""
    known_status, kind = STATUSES.get(name, (status, None))
    status = status or known_status
    if _reason(error) in KEY_REFUSED:  # Google says 400 INVALID_ARGUMENT: the key, not the request
        status, kind = 401, UNAVAILABLE
    if kind is None:
        kind = UNAVAILABLE if status >= 500 or status in (401, 403, 408, 429) else REFUSED
    words = error.get("message") if isinstance(error.get("message"), str) else ""
    if not words and not error:
        words = body[:300].decode(errors="replace").strip()
    words = redact(words, secrets_of(sent, server)) or f"The model server answered {status}."
    failure = UpstreamError(kind, status, f"{name}: {words}" if name else words,
                            _retry_after(response.headers, error))
    failure.answered = True
    return failure


def stream_error(chunk: dict[str, Any]) -> str | None:
    """The words of an error a stream sent in place of a chunk; None for a chunk that is not one."""
    error = chunk.get("error")
    if not isinstance(error, dict):
        return None
    name = error.get("status") if isinstance(error.get("status"), str) else ""
    words = error.get("message") if isinstance(error.get("message"), str) else "The model server reported an error."
    return f"{name}: {words}" if name else words


def _reason(error: dict[str, Any]) -> str:
    """The `reason` of the error's ErrorInfo detail (API_KEY_INVALID, ...)."""
    for detail in error.get("details") or ():
        if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("google.rpc.ErrorInfo"):
            return str(detail.get("reason", ""))
    return ""


def _error_of(body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except ValueError:
        return {}
    if isinstance(data, list) and data:  # a streaming method's failure: a list of one
        data = data[0]
    error = data.get("error") if isinstance(data, dict) else None
    return error if isinstance(error, dict) else {}


def _retry_after(headers: Mapping[str, str], error: dict[str, Any]) -> float | None:
    try:
        return float(headers["retry-after"])
    except (KeyError, ValueError):
        pass
    for detail in error.get("details") or ():
        if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("google.rpc.RetryInfo"):
            delay = detail.get("retryDelay")
            try:
                return float(delay.removesuffix("s")) if isinstance(delay, str) else None
            except ValueError:
                return None
    return None
