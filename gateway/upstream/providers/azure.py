"""Azure OpenAI model servers. `base_url` is the resource (https://myresource.openai.azure.com), a
model is a deployment (the model's name is the deployment's name), and `cloud.api_version` is a dated
API version (2024-10-21) or `v1`, Azure's OpenAI-style API.

The wire format is OpenAI's, so every call is openai.py's (a same-format pass-through on
/v1/chat/completions, the chat form for the other surfaces, embeddings and audio); only the address and
the credentials are Azure's (`endpoint`), as Azure's own clients make them (the tests hold the gateway's
requests to theirs):
- a dated version, as `openai.AzureOpenAI`: `{resource}/openai/deployments/{deployment}/chat/completions
  ?api-version={version}`, likewise /embeddings and /audio/...; the key in the `api-key` header;
- `v1`, as `openai.OpenAI(base_url="{resource}/openai/v1/")`: `{resource}/openai/v1/chat/completions`
  with the deployment as the body's `model` and no api-version; the key as a bearer token (Azure's v1
  API takes it there as it takes `api-key`);
- without a key, Microsoft Entra ID's client credentials: a bearer token (providers/entra.py).

Azure's own ways pass as they are: its content filter's refusal (400, code `content_filter`) is the
server's refusal with its words; a reply it stops says `finish_reason: "content_filter"`; its 429
says when to retry (`retry-after`)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from gateway.registry.snapshot import Server, Target
from gateway.upstream.providers import entra, openai
from gateway.upstream.providers.base import UNAVAILABLE, UpstreamError

V1 = "v1"


def wire(target: Target) -> str:
    return "openai"


def resource(server: Server) -> str:
    """The resource's address, also when the operator wrote it with Azure's /openai or /openai/v1."""
    base = server.base_url.rstrip("/")
    for suffix in ("/openai/v1", "/openai"):
        if base.endswith(suffix):
            return base[: -len(suffix)]
    return base


async def endpoint(target: Target, path: str) -> tuple[str, dict[str, str]]:
    """The URL of `path` (an OpenAI API path: "/chat/completions") for `target`'s deployment, and the
    credential headers; UpstreamError when there are none."""
    server = target.server
    version = server.cloud.api_version
    if version == V1:
        url = f"{resource(server)}/openai/v1{path}"
    else:
        url = (f"{resource(server)}/openai/deployments/{quote(target.name, safe='')}{path}"
               f"?api-version={quote(version, safe='')}")
    return url, await _credentials(server, bearer_key=version == V1)


async def _credentials(server: Server, *, bearer_key: bool) -> dict[str, str]:
    if server.api_key:
        return {"Authorization": f"Bearer {server.api_key}"} if bearer_key else {"api-key": server.api_key}
    if entra.configured(server):
        return {"Authorization": f"Bearer {await entra.token(server)}"}
    raise UpstreamError(UNAVAILABLE, 401, f"No API key and no Microsoft Entra ID client are configured for "
                                          f"server '{server.name}'.")


def chat_stream(target: Target, body: dict[str, Any], headers: dict[str, str] | None = None):
    return openai.chat_stream(target, body, headers, at=endpoint)


def forward(target: Target, path: str, **payload: Any):
    return openai.forward(target, path, **payload, at=endpoint)


def embeddings(target: Target, texts: list[str]):
    return openai.embeddings(target, texts, at=endpoint)
