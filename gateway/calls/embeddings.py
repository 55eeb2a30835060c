"""Embedding texts through a chain of embedding-capable models (OpenAI-style `/embeddings`).

`embedding_chain` (sync: registry, group limits, quota) picks the models; `embed` (async) asks
them in turn, the first usable answer wins; `embed_batched` sends a long list in batches to one
model, for collections, whose vectors must all come from the same model, and keeps them packed
as float32 bytes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.conf import settings

from gateway.calls.chain import try_chain
from gateway.calls.plan import call_plan
from gateway.calls.tokens import count_text
from gateway.registry.routing import usable_targets
from gateway.registry.snapshot import Target, registry
from gateway.upstream import providers
from gateway.upstream.providers.base import BAD_RESPONSE, UpstreamError
from gateway.web.errors import ApiError, ValidationFailed

CAPABILITY = "embeddings"


@dataclass(frozen=True)
class Embedded:
    vectors: list[list[float]]  # one per text, in the order of the texts
    target: Target  # the model that answered
    prompt_tokens: int


def default_embedding_model(group) -> str:
    """EMBEDDING_MODEL, else the first embedding-capable model (by `server/model`) the group may use."""
    if settings.EMBEDDING_MODEL:
        return settings.EMBEDDING_MODEL
    usable = usable_targets(group, capability=CAPABILITY)
    if usable:
        return usable[0].public_id
    if any(CAPABILITY in t.capabilities for t in registry().by_id.values()):
        raise ApiError(403, "Your account group may not use any embedding model.", code="permission_denied")
    raise ApiError(503, "No embedding model is configured.", code="no_embedding_model")


def parse_input(body: dict) -> tuple[list[str], str | None]:
    """The texts and the requested model, or 422 `{message, errors}`: the input's limits, the same
    for /api/v1/embeddings (native/embeddings.py) and /v1/embeddings (compat/embeddings.py)."""
    value = body.get("input")
    texts = [value] if isinstance(value, str) else value
    most, longest = settings.EMBEDDINGS_MAX_ITEMS, settings.EMBEDDINGS_MAX_CHARS
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        raise ValidationFailed({"input": ["The input must be a string or a non-empty list of strings."]})
    if len(texts) > most:
        raise ValidationFailed({"input": [f"The input may hold at most {most} items; it has {len(texts)}."]})
    for index, text in enumerate(texts):
        if not text:
            raise ValidationFailed({"input": [f"Item {index} is empty."]})
        if len(text) > longest:
            raise ValidationFailed({"input": [f"Item {index} is longer than {longest} characters ({len(text)})."]})
    model = body.get("model")
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise ValidationFailed({"model": ["The model must be a non-empty string."]})
    return texts, model


def embedding_chain(*, account, model_id: str | None = None, quota_used=None) -> list[Target]:
    """The models to try: the requested (or default embedding) model, its fallbacks, the default
    model when it embeds. Group limits and the token quota are checked (403)."""
    return call_plan(account=account, model_id=model_id or default_embedding_model(account.group),
                     capability=CAPABILITY, quota_used=quota_used)


def embedding_model_for(*, account, quota_used=None) -> Target:
    """The one model a collection of this account is embedded with now (no fallbacks: vectors
    of different models cannot be compared). Group limits and the token quota are checked."""
    return embedding_chain(account=account, quota_used=quota_used)[0]


async def embed(chain: list[Target], texts: list[str], *, refusals_fall_through: bool = False) -> Embedded:
    """The first model of `chain` that answers with one vector per text. A retryable failure or
    an unusable answer moves to the next; a refusal (the request is invalid) is answered at once
    with the server's status, except on /v1 (`refusals_fall_through`, spec 7.3: there it keeps its
    status only when no other model answers)."""
    answered = await try_chain(chain, CAPABILITY, lambda target: _ask(target, texts),
                               refusals_fall_through=refusals_fall_through)
    embedded = answered.result
    if answered.reply is not None:
        answered.reply.input_tokens = embedded.prompt_tokens
    answered.land()
    return embedded


@dataclass(frozen=True)
class Packed:
    blobs: list[bytes]  # one per text, in the order of the texts, as `pack` made them
    target: Target
    prompt_tokens: int


def float32_blobs(vectors: list[list[float]]) -> list[bytes]:
    """Vectors as little-endian float32 bytes, unchanged otherwise."""
    return [np.asarray(vector, dtype="<f4").tobytes() for vector in vectors]


async def embed_batched(target: Target, texts: list[str], *, batch_size: int | None = None,
                        pack: Callable[[list[list[float]]], list[bytes]] = float32_blobs) -> Packed:
    """All of `texts` embedded by `target` alone, `batch_size` texts per call. Each batch's
    vectors are packed (`pack`: one bytes per vector) as they arrive and only the bytes kept:
    a vector of Python floats takes about eight times the memory of its float32 bytes."""
    size = batch_size or settings.EMBEDDING_BATCH_SIZE
    blobs: list[bytes] = []
    tokens = 0
    for start in range(0, len(texts), size):
        part = await embed([target], texts[start:start + size])
        packed = pack(part.vectors)
        if blobs and len(packed[0]) != len(blobs[0]):
            raise ApiError(502, "The embedding model changed its vector size midway.", code="bad_gateway")
        blobs.extend(packed)
        tokens += part.prompt_tokens
    return Packed(blobs, target, tokens)


async def _ask(target: Target, texts: list[str]) -> Embedded:
    body = await providers.embeddings(target, texts)
    vectors = _vectors_of(body, len(texts))
    if vectors is None:
        raise UpstreamError(BAD_RESPONSE, 502, f"Server '{target.server.name}' sent an unusable embeddings reply.")
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
    tokens = usage.get("prompt_tokens")
    if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
        tokens = sum(count_text(t) for t in texts)
    return Embedded(vectors, target, tokens)


def _vectors_of(body: Any, count: int) -> list[list[float]] | None:
    """The vectors of an OpenAI-style reply in input order, or None when the reply is unusable:
    wrong count, missing indexes, vectors of different sizes, values that are not finite numbers."""
    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list) or len(data) != count:
        return None
    by_index: dict[int, list[float]] = {}
    for position, item in enumerate(data):
        if not isinstance(item, dict):
            return None
        index = item.get("index", position)
        vector = item.get("embedding")
        if not isinstance(index, int) or not 0 <= index < count or index in by_index:
            return None
        if not isinstance(vector, list) or not vector:
            return None
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in vector):
            return None
        by_index[index] = vector
    vectors = [by_index[i] for i in range(count)]
    if len({len(v) for v in vectors}) != 1:
        return None
    return vectors
