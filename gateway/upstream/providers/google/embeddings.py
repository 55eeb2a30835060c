"""Embeddings from Google's embedding models: on the Gemini API through `batchEmbedContents` (up to
GEMINI_BATCH texts a call), on Vertex AI through `predict` (up to VERTEX_BATCH instances a call; Gemini's own
embedding model on Vertex AI takes one). The bodies and replies are gateway/formats/gemini/'s (`embed_request`,
`embeddings_reply`); the reply is an OpenAI embeddings body, as every kind gives gateway/calls/embeddings.py."""

from __future__ import annotations

import json
from typing import Any

from gateway.formats import gemini
from gateway.registry.snapshot import Target
from gateway.upstream.providers.base import BAD_RESPONSE, UpstreamError, send
from gateway.upstream.providers.google import transport

GEMINI_BATCH = 100  # batchEmbedContents' limit
VERTEX_BATCH = 250  # predict's limit for the text embedding models


def batch_size(target: Target) -> int:
    if target.server.kind == transport.GEMINI:
        return GEMINI_BATCH
    return 1 if target.name.startswith("gemini-embedding") else VERTEX_BATCH


async def embeddings(target: Target, texts: list[str]) -> dict[str, Any]:
    vertex = target.server.kind == transport.VERTEX
    method = "predict" if vertex else "batchEmbedContents"
    size = batch_size(target)
    data: list[dict[str, Any]] = []
    tokens: int | None = 0
    for start in range(0, len(texts), size):
        body = gemini.embed_request(texts[start:start + size], model=target.name, vertex=vertex)
        reply = await _post(target, method, body)
        try:
            part = gemini.embeddings_reply(reply, model=target.name, vertex=vertex)
        except ValueError as exc:  # a reply that is not what the model sends
            raise UpstreamError(BAD_RESPONSE, 502, f"Server '{target.server.name}' sent an unusable embeddings "
                                                   f"reply: {exc}") from None
        data += [{**item, "index": start + item["index"]} for item in part["data"]]
        counted = (part.get("usage") or {}).get("prompt_tokens")
        tokens = tokens + counted if tokens is not None and isinstance(counted, int) else None
    return {"object": "list", "model": target.name, "data": data,
            **({"usage": {"prompt_tokens": tokens, "total_tokens": tokens}} if tokens is not None else {})}


async def _post(target: Target, method: str, body: dict[str, Any]) -> Any:
    request = await transport.request(target, method, body)
    response = await send(request, stream=False)
    if response.status_code != 200:
        raise transport.answered_failure(response, response.content, request, target.server)
    try:
        return json.loads(response.content)
    except ValueError:
        raise UpstreamError(BAD_RESPONSE, 502, f"Server '{target.server.name}' sent an embeddings reply that is "
                                               "not JSON.") from None
