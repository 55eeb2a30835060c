"""Microsoft Entra ID access tokens for Azure OpenAI servers that authenticate by client credentials
(a service principal's tenant, client id and secret) rather than an API key. The token's audience is
Azure OpenAI (Cognitive Services) of the cloud the resource is in: Azure's public cloud, or the
sovereign cloud its address names (`.azure.us`, `.azure.cn`), whose authority the operator sets.

azure-identity's `ClientSecretCredential` asks the tenant's token endpoint (msal underneath, with its
own checks of the answer and its own retries). The token is kept per server in this process and used
until REFRESH_MARGIN_SECONDS before it expires, so a call normally costs nothing here: no thread hop,
no request. When it must be fetched, the blocking fetch runs in a worker thread and every call that
wants it meanwhile awaits that one fetch (gateway/state/kept_token.py, as for Google's tokens). A failure
is the server's failure, 401 (the key refused, as for a server with a wrong API key): the chain moves on, and
the next call tries again.

The token and the client secret are credentials: they are never logged, and the words of a failure are
stripped of them (gateway/telemetry/redact.py). The fetch goes through the environment's proxy
(`HTTPS_PROXY`, `NO_PROXY`), as the model calls do, and trusts the certificates they trust
(`SSL_CERT_FILE`, `SSL_CERT_DIR`). The authority is the one the operator set, taken as it is: msal's
instance discovery (a call to login.microsoftonline.com that vets hosts it does not know) is off, which
changes nothing for Microsoft's own clouds and lets a private one (Azure Stack) be named."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from gateway.registry.snapshot import Server
from gateway.state import per_process
from gateway.state.kept_token import KeptToken
from gateway.telemetry.redact import redact
from gateway.upstream.providers.base import UNAVAILABLE, UpstreamError

SCOPE = "https://cognitiveservices.azure.com/.default"
# a resource in a sovereign cloud (https://name.openai.azure.us) is an audience of that cloud's own
SOVEREIGN_SCOPES = {".azure.us": "https://cognitiveservices.azure.us/.default",
                    ".azure.cn": "https://cognitiveservices.azure.cn/.default"}
DEFAULT_AUTHORITY = "https://login.microsoftonline.com"
REFRESH_MARGIN_SECONDS = 300  # a token is replaced this long before it expires (azure-identity's own margin)


@dataclass(frozen=True)
class Client:
    """What a server's credential is made of: a change to any of it makes a new credential."""

    tenant: str
    client_id: str
    secret: str = field(repr=False)
    authority: str
    scope: str
    connect_timeout: float
    read_timeout: float

    @classmethod
    def of(cls, server: Server) -> Client:
        cloud = server.cloud
        return cls(cloud.azure_tenant_id, cloud.azure_client_id, cloud.azure_client_secret,
                   cloud.azure_authority_host or DEFAULT_AUTHORITY, scope_of(server), server.connect_timeout,
                   server.read_timeout)


def scope_of(server: Server) -> str:
    """The token's audience: Azure OpenAI of the cloud the resource is in."""
    host = (urlsplit(server.base_url).hostname or "").lower()
    return next((scope for suffix, scope in SOVEREIGN_SCOPES.items() if host.endswith(suffix)), SCOPE)


def configured(server: Server) -> bool:
    cloud = server.cloud
    return bool(cloud.azure_tenant_id and cloud.azure_client_id and cloud.azure_client_secret)


class _Source:
    """One server's credential and its kept token."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.kept = KeptToken(self._fetch, margin=REFRESH_MARGIN_SECONDS)
        self._credential = None

    def _fetch(self) -> tuple[str, float]:
        info = self.credential().get_token_info(self.client.scope)
        return info.token, float(info.expires_on)

    def credential(self):
        if self._credential is None:
            from azure.identity import ClientSecretCredential  # its import is heavy: only where it is used

            c = self.client
            trusted = os.environ.get("SSL_CERT_FILE") or os.environ.get("SSL_CERT_DIR") or True
            self._credential = ClientSecretCredential(
                c.tenant, c.client_id, c.secret, authority=c.authority, disable_instance_discovery=True,
                connection_timeout=c.connect_timeout, read_timeout=c.read_timeout, connection_verify=trusted)
        return self._credential


_sources: dict[int, _Source] = {}


def _forget() -> None:
    _sources.clear()


per_process.register("entra-tokens", reset=_forget)


async def token(server: Server) -> str:
    """`server`'s access token for Azure OpenAI, or UpstreamError (UNAVAILABLE 401)."""
    client = Client.of(server)
    source = _sources.get(server.id)
    if source is None or source.client != client:
        source = _sources[server.id] = _Source(client)
    return await source.kept.get(lambda exc: _failure(server, source, exc))


def _failure(server: Server, source: _Source, exc: Exception) -> UpstreamError:
    """azure-identity's ClientAuthenticationError, a transport failure, a bad authority: in words without the
    secret or the token."""
    words = redact(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__,
                   [source.client.secret, source.kept.token])
    return UpstreamError(UNAVAILABLE, 401, f"Microsoft Entra ID gave no token for server '{server.name}' "
                                           f"(tenant {source.client.tenant}): {words}")
