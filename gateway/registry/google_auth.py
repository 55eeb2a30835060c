"""Google OAuth access tokens for Google Vertex AI servers, by google-auth as Google's own SDKs get them: the
model calls (gateway/upstream/providers/google/) and model discovery share them, so they live below both.

Who the calls are made as: the service account whose JSON key file the operator named
(`service_account.Credentials.from_service_account_file`, the cloud-platform scope), else Google's Application
Default Credentials of the serving process (`google.auth.default`: GOOGLE_APPLICATION_CREDENTIALS, the gcloud
user's, workload identity federation, the metadata server of GCE, GKE and Cloud Run). A service account's key
names its own token endpoint (`token_uri`), so a test's key file points it at a fake.

The token is kept per credential (one per key file, one for the default credentials) in this process and used
until REFRESH_MARGIN_SECONDS before it expires, so a call normally costs nothing here: no thread hop, no
request. When it must be fetched, the blocking fetch runs in a worker thread and every call that wants it
meanwhile awaits that one fetch (gateway/state/kept_token.py, as for Entra ID's tokens). A failure is
`TokenFailed`, which the provider makes the server's failure, 401 (as a key refused): the chain moves on, and
the next call tries again.

The tokens are credentials: `tokens()` gives them to the log filter (gateway/apps.py), so no log line shows
one, and a failure's words are stripped of them. The token endpoint is asked through httpx, as discovery asks
the servers: the environment's proxy and certificates (`HTTPS_PROXY`, `SSL_CERT_FILE`) apply."""

from __future__ import annotations

import threading
import time
from datetime import timezone
from typing import Any

import httpx

from gateway.registry.snapshot import Server
from gateway.state import per_process
from gateway.state.kept_token import KeptToken
from gateway.telemetry.redact import redact

SCOPE = "https://www.googleapis.com/auth/cloud-platform"
REFRESH_MARGIN_SECONDS = 300  # a token is replaced this long before it expires
UNKNOWN_LIFETIME_SECONDS = 3000  # a token that says nothing of its expiry is kept this long


class TokenFailed(Exception):
    """No token for a server: the message says which server and why (never a credential)."""


class _Transport:
    """google-auth's transport (`google.auth.transport.Request`) over httpx, within the server's timeouts."""

    def __init__(self, connect: float, read: float) -> None:
        self.timeout = httpx.Timeout(connect=connect, read=read, write=30.0, pool=30.0)

    def __call__(self, url: str, method: str = "GET", body: Any = None, headers: Any = None, timeout: Any = None,
                 **kwargs: Any):
        from google.auth import exceptions

        try:
            with httpx.Client(timeout=self.timeout, follow_redirects=False) as client:
                response = client.request(method, url, content=body, headers=headers)
        except httpx.HTTPError as exc:
            raise exceptions.TransportError(f"the token endpoint could not be reached ({type(exc).__name__})") \
                from None
        return _Answer(response)


class _Answer:
    """google-auth's view of an answer (`google.auth.transport.Response`)."""

    def __init__(self, response: httpx.Response) -> None:
        self.status = response.status_code
        self.headers = response.headers
        self.data = response.content


class _Source:
    """One credential (a key file, or the default credentials: "") and its kept token."""

    def __init__(self, key_file: str, server: Server) -> None:
        self.key_file = key_file
        self.timeouts = (server.connect_timeout, server.read_timeout)  # the first server's to ask
        self.kept = KeptToken(self._fetch, margin=REFRESH_MARGIN_SECONDS)
        self._credentials = None

    def _fetch(self) -> tuple[str, float]:
        credentials = self.credentials()
        credentials.refresh(_Transport(*self.timeouts))
        expiry = credentials.expiry
        return credentials.token, (expiry.replace(tzinfo=timezone.utc).timestamp() if expiry is not None
                                   else time.time() + UNKNOWN_LIFETIME_SECONDS)

    def credentials(self):
        if self._credentials is None:
            import google.auth  # its import is heavy: only where it is used
            from google.oauth2 import service_account

            if self.key_file:
                self._credentials = service_account.Credentials.from_service_account_file(self.key_file,
                                                                                          scopes=[SCOPE])
            else:
                self._credentials, _project = google.auth.default(scopes=[SCOPE])
        return self._credentials


_sources: dict[str, _Source] = {}
_sources_lock = threading.Lock()


def _forget() -> None:
    _sources.clear()


per_process.register("google-tokens", reset=_forget)


def _source(server: Server) -> _Source:
    key_file = server.cloud.gcp_credentials_file
    with _sources_lock:
        source = _sources.get(key_file)
        if source is None:
            source = _sources[key_file] = _Source(key_file, server)
        return source


def tokens() -> list[str]:
    """The tokens this process holds, for the log filter (no I/O)."""
    return [source.kept.token for source in list(_sources.values()) if source.kept.token]


def cached(server: Server) -> str | None:
    """`server`'s token when it is good for a while yet (no I/O)."""
    return _source(server).kept.current()


async def token(server: Server) -> str:
    """`server`'s access token for Vertex AI, or TokenFailed."""
    source = _source(server)
    return await source.kept.get(lambda exc: _failure(server, source, exc))


def token_now(server: Server) -> str:
    """The same, blocking (model discovery, in a thread of its own)."""
    source = _source(server)
    try:
        return source.kept.fetch_now()
    except Exception as exc:
        raise _failure(server, source, exc) from None


def _failure(server: Server, source: _Source, exc: Exception) -> TokenFailed:
    """google-auth's RefreshError, DefaultCredentialsError, a missing or malformed key file: in words without
    the token."""
    text = str(exc).strip()
    words = redact(text.splitlines()[0] if text else type(exc).__name__, [source.kept.token])
    whose = f"the service account of {source.key_file}" if source.key_file else "Application Default Credentials"
    return TokenFailed(f"Google gave no access token for server '{server.name}' ({whose}): {words}")
