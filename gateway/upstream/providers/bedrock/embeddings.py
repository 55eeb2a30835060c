"""Embeddings from Bedrock's text embedding models through InvokeModel (`POST /model/{id}/invoke`): Amazon
Titan Text Embeddings, one text a call (the texts of a request asked side by side, at most
TITAN_AT_ONCE at a time), and Cohere Embed, up to 96 texts a call. Their bodies and replies are
gateway/formats/converse/embeddings.py's; the reply is an OpenAI embeddings body, as every kind gives
gateway/calls/embeddings.py. Cohere's token count is the reply's `X-Amzn-Bedrock-Input-Token-Count`."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from gateway.formats.converse import embeddings as bodies
from gateway.registry.snapshot import Target
from gateway.upstream.providers.base import BAD_RESPONSE, REFUSED, UpstreamError, send
from gateway.upstream.providers.bedrock.claude import invoke_url
from gateway.upstream.providers.bedrock.transport import answered_failure, signed_request

TITAN_AT_ONCE = 8  # Titan calls of one request in flight together
TOKEN_COUNT = "x-amzn-bedrock-input-token-count"


async def embeddings(target: Target, texts: list[str]) -> dict[str, Any]:
    family = bodies.embedding_family(target.name)
    try:
        if family == bodies.TITAN:
            limit = asyncio.Semaphore(TITAN_AT_ONCE)

            async def one(text: str) -> Any:
                async with limit:
                    reply, _ = await _invoke(target, bodies.titan_embedding_request(text))
                    return reply

            replies = await asyncio.gather(*(one(text) for text in texts))
            return bodies.titan_embeddings_reply(list(replies), model=target.name)
        if family == bodies.COHERE:
            data: list[dict[str, Any]] = []
            tokens: int | None = 0
            for start in range(0, len(texts), bodies.COHERE_MAX_TEXTS):
                part = texts[start:start + bodies.COHERE_MAX_TEXTS]
                reply, counted = await _invoke(target, bodies.cohere_embedding_request(part))
                body = bodies.cohere_embeddings_reply(reply, model=target.name, count=len(part), input_tokens=counted)
                data += [{**item, "index": start + item["index"]} for item in body["data"]]
                tokens = tokens + body["usage"]["prompt_tokens"] if tokens is not None and "usage" in body else None
            return {"object": "list", "model": target.name, "data": data,
                    **({"usage": {"prompt_tokens": tokens, "total_tokens": tokens}} if tokens is not None else {})}
    except ValueError as exc:  # a reply that is not what the model sends
        raise UpstreamError(BAD_RESPONSE, 502, f"Server '{target.server.name}' sent an unusable embeddings reply: "
                                               f"{exc}") from None
    raise UpstreamError(REFUSED, 400, f"The model '{target.name}' on server '{target.server.name}' is not one of "
                                      "Bedrock's text embedding models (Amazon Titan Text Embeddings, Cohere Embed).")


async def _invoke(target: Target, body: dict[str, Any]) -> tuple[Any, int | None]:
    """One InvokeModel call: its JSON reply and the input token count its header gives (None without one)."""
    content = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    request = await signed_request(target.server, "POST", invoke_url(target, "invoke"), content,
                                   headers={"Accept": "application/json"})
    response = await send(request, stream=False)
    if response.status_code != 200:
        raise answered_failure(response, response.content, request, target.server)
    try:
        reply = json.loads(response.content)
    except ValueError:
        raise ValueError("the reply is not JSON") from None
    counted = response.headers.get(TOKEN_COUNT, "")
    return reply, int(counted) if counted.isdigit() else None
