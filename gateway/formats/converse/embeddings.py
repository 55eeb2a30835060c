"""The InvokeModel bodies of Bedrock's text embedding models, and their replies as an OpenAI embeddings
reply body (`{"object": "list", "data": [...], "model", "usage"}`), which gateway/calls/embeddings.py
reads for every kind of server.

- Amazon Titan Text Embeddings (`amazon.titan-embed-text-v2:0`, `-v1`): one text a call,
  `{"inputText", "dimensions"?}` → `{"embedding": [...], "inputTextTokenCount": n}`.
- Cohere Embed (`cohere.embed-english-v3`, `cohere.embed-multilingual-v3`, `cohere.embed-v4:0`): up to
  96 texts a call, `{"texts", "input_type"}` → `{"embeddings": [[...]]}`, or `{"embeddings": {"float":
  [[...]]}}` by type. Its body counts no tokens: the count is the InvokeModel reply's
  `X-Amzn-Bedrock-Input-Token-Count` header when the transport passes it. Without one the reply has
  no `usage`, and gateway/calls/embeddings.py counts the texts itself (gateway/calls/tokens.py is
  above this room, so it is not called from here).

A reply that is not what the model sends raises ValueError, which the provider reads as a bad reply."""

from __future__ import annotations

import math
from typing import Any

from gateway.formats.anthropic.to_chat import bad_request

TITAN, COHERE = "titan", "cohere"
TITAN_DIMENSIONS = (256, 512, 1024)  # Titan Text Embeddings V2; V1 has 1536 and takes no `dimensions`
COHERE_DIMENSIONS = (256, 512, 1024, 1536)  # Cohere Embed v4's output_dimension
COHERE_MAX_TEXTS = 96
COHERE_INPUT_TYPE = "search_document"  # texts stored to be searched, as a collection's are


def embedding_family(model_id: Any) -> str | None:
    """TITAN or COHERE for a Bedrock embedding model id (a cross-region prefix allowed), else None."""
    model = model_id.lower() if isinstance(model_id, str) else ""
    if "amazon.titan-embed-text" in model:
        return TITAN
    if "cohere.embed" in model:
        return COHERE
    return None


def titan_embedding_request(text: str, dimensions: int | None = None) -> dict:
    """The InvokeModel body embedding one text with Titan Text Embeddings."""
    body: dict[str, Any] = {"inputText": text}
    if dimensions is not None:
        if dimensions not in TITAN_DIMENSIONS:
            raise bad_request(f"dimensions: Titan Text Embeddings takes {', '.join(map(str, TITAN_DIMENSIONS))}.")
        body["dimensions"] = dimensions
    return body


def titan_embedding(reply: Any) -> tuple[list[float], int | None]:
    """The vector and token count of one Titan reply."""
    if not isinstance(reply, dict):
        raise ValueError("A Titan embeddings reply is a JSON object.")
    count = reply.get("inputTextTokenCount")
    return _vector(reply.get("embedding")), count if _count(count) else None


def titan_embeddings_reply(replies: list[Any], *, model: str) -> dict:
    """The OpenAI reply for the Titan replies of texts 0, 1, ... in order (one call each)."""
    found = [titan_embedding(reply) for reply in replies]
    counts = [count for _, count in found if count is not None]
    tokens = sum(counts) if len(counts) == len(found) else None
    return openai_embeddings_reply([vector for vector, _ in found], model=model, prompt_tokens=tokens)


def cohere_embedding_request(texts: list[str], *, input_type: str = COHERE_INPUT_TYPE,
                             dimensions: int | None = None) -> dict:
    """The InvokeModel body embedding up to 96 texts with Cohere Embed (`dimensions`: v4 only)."""
    if not texts or len(texts) > COHERE_MAX_TEXTS:
        raise bad_request(f"input: Cohere Embed takes 1 to {COHERE_MAX_TEXTS} texts a call, not {len(texts)}.")
    body: dict[str, Any] = {"texts": list(texts), "input_type": input_type}
    if dimensions is not None:
        if dimensions not in COHERE_DIMENSIONS:
            raise bad_request(f"dimensions: Cohere Embed takes {', '.join(map(str, COHERE_DIMENSIONS))}.")
        body["output_dimension"] = dimensions
    return body


def cohere_embeddings_reply(reply: Any, *, model: str, count: int, input_tokens: int | None = None) -> dict:
    """The OpenAI reply for a Cohere reply to `count` texts. `input_tokens`: the reply's
    X-Amzn-Bedrock-Input-Token-Count header; a count in the body itself (Cohere's own
    `meta.billed_units.input_tokens`) wins."""
    if not isinstance(reply, dict):
        raise ValueError("A Cohere embeddings reply is a JSON object.")
    vectors = reply.get("embeddings")
    if isinstance(vectors, dict):  # by type (Embed v4, or v3 asked for embedding_types)
        vectors = vectors.get("float")
    if not isinstance(vectors, list) or len(vectors) != count:
        raise ValueError(f"A Cohere embeddings reply has {count} float vectors.")
    meta = reply.get("meta")
    billed = meta.get("billed_units") if isinstance(meta, dict) else None
    tokens = billed.get("input_tokens") if isinstance(billed, dict) else None
    tokens = tokens if _count(tokens) else input_tokens if _count(input_tokens) else None
    return openai_embeddings_reply([_vector(vector) for vector in vectors], model=model, prompt_tokens=tokens)


def openai_embeddings_reply(vectors: list[list[float]], *, model: str, prompt_tokens: int | None = None) -> dict:
    """An OpenAI embeddings reply body; no `usage` when the count is not known."""
    body: dict[str, Any] = {"object": "list", "model": model,
                            "data": [{"object": "embedding", "index": i, "embedding": vector}
                                     for i, vector in enumerate(vectors)]}
    if prompt_tokens is not None:
        body["usage"] = {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens}
    return body


def _vector(value: Any) -> list[float]:
    if not isinstance(value, list) or not value or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value):
        raise ValueError("An embedding is a non-empty list of finite numbers.")
    return value


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
