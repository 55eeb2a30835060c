"""A Microsoft Entra ID tenant of our own, for the client-credentials flow as msal walks it: the tenant's
OpenID configuration (`GET {authority}/{tenant}/v2.0/.well-known/openid-configuration`), then the token
endpoint (`POST {authority}/{tenant}/oauth2/v2.0/token`), which checks the form's `grant_type`,
`client_id`, `client_secret` and `scope` as Entra does and answers Entra's error body (AADSTS codes)
otherwise. Served over TLS (msal takes only https authorities), with a certificate made on the spot.

Every token request is kept (`fetches`), and every token it issued (`issued`, JSON Web Token shaped as
Entra's are), so a fake Azure server can accept exactly those. `lifetimes`: the `expires_in` of the next
tokens, one per fetch (then 3600); `latency`: how long a token takes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs

from tests.gateway.upstream.azure.asgi_io import read_body, reply
from tests.gateway.upstream.egress_support import certificate
from tests.servers import serving

TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
CLIENT_ID = "0b8ffc1e-45a1-4b5c-9d2e-3f4a5b6c7d8e"
CLIENT_SECRET = "Xy8Q~entra-client-secret-Val9ue.42"
SCOPE = "https://cognitiveservices.azure.com/.default"


@dataclass
class Tenant:
    url: str = ""  # the authority host: https://127.0.0.1:PORT
    cert: Path | None = None  # the CA bundle a client trusts
    fetches: list[dict[str, str]] = field(default_factory=list)  # each token request's form
    issued: list[str] = field(default_factory=list)
    lifetimes: list[int] = field(default_factory=list)
    secret: str = CLIENT_SECRET
    latency: float = 0.0  # seconds the token endpoint takes to answer, so that fetches made together overlap
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def reset(self) -> None:
        with self.lock:
            self.fetches.clear()
            self.issued.clear()
            self.lifetimes.clear()
            self.secret = CLIENT_SECRET
            self.latency = 0.0

    async def __call__(self, scope, receive, send) -> None:
        body = await read_body(receive)
        if self.latency and scope["path"].endswith("/token"):
            await asyncio.sleep(self.latency)
        status, answer = self.answer(scope["method"], scope["path"], body)
        await reply(send, status, json.dumps(answer).encode())

    def answer(self, method: str, path: str, body: bytes) -> tuple[int, dict]:
        base = f"{self.url}/{TENANT}"
        if method == "GET" and path == f"/{TENANT}/v2.0/.well-known/openid-configuration":
            return 200, {"token_endpoint": f"{base}/oauth2/v2.0/token", "issuer": f"{base}/v2.0",
                         "authorization_endpoint": f"{base}/oauth2/v2.0/authorize"}
        if method == "POST" and path == f"/{TENANT}/oauth2/v2.0/token":
            form = {name: values[0] for name, values in parse_qs(body.decode()).items()}
            with self.lock:
                self.fetches.append(form)
                if form.get("grant_type") != "client_credentials":
                    return error(400, "unsupported_grant_type", "AADSTS70003: The app requested an unsupported "
                                                                "grant type.")
                if form.get("client_id") != CLIENT_ID:
                    return error(400, "unauthorized_client", f"AADSTS700016: Application with identifier "
                                                             f"'{form.get('client_id')}' was not found.")
                if form.get("client_secret") != self.secret:
                    return error(401, "invalid_client", "AADSTS7000215: Invalid client secret provided. Ensure "
                                                        "the secret being sent in the request is the client "
                                                        "secret value.\r\nTrace ID: 0000")
                if form.get("scope") != SCOPE:
                    return error(400, "invalid_scope", f"AADSTS1002012: The provided value for scope "
                                                       f"{form.get('scope')} is not valid.")
                lifetime = self.lifetimes.pop(0) if self.lifetimes else 3600
                token = f"eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.eyJhdWQiOiJjb2duaXRpdmUifQ.sig{len(self.issued)}"
                self.issued.append(token)
            return 200, {"token_type": "Bearer", "expires_in": lifetime, "ext_expires_in": lifetime,
                         "access_token": token}
        return 404, {"error": "not_found", "error_description": f"{method} {path}"}


def error(status: int, code: str, description: str) -> tuple[int, dict]:
    number = int(description[len("AADSTS"):].split(":")[0])
    return status, {"error": code, "error_description": description, "error_codes": [number]}


@contextlib.contextmanager
def running_tenant(directory: Path):
    cert, key = certificate(directory)
    tenant = Tenant(cert=cert)
    with serving(tenant, cert=cert, key=key, name="entra") as url:
        tenant.url = url
        yield tenant
