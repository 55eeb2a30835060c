"""Searching a collection: the query is embedded with the collection's model and the chunks are
ranked by cosine similarity over the collection's cached matrix (native/vectors.py).

    hits = await search_collection(collection, "how do I reset my password", k=5)

Used by the search endpoint and by native chat, the agent and MCP for retrieval. Another
account searching the collection (a profile lends it) uses the collection's model while its
group may. Raises `ApiError`: 409 `reindex_required` when the embedding model is no longer the
collection's, 403 for group limits or a used-up token quota, 502/503 when the embedding model
failed.
"""

from __future__ import annotations

from gateway.calls.embeddings import CAPABILITY, embed
from gateway.calls.metering import meter
from gateway.calls.plan import call_plan
from gateway.calls.screened import screened_texts, screening_for
from gateway.registry.routing import group_may_use
from gateway.registry.snapshot import Target, registry
from gateway.state.workers import in_worker
from native import vectors as vector_store
from native.collections import SURFACE, model_for_collection
from native.models import Chunk, Collection


async def search_collection(collection: Collection, query: str, *, k: int = 5, account=None, request_id: str = "",
                            quota_used=None) -> list[dict]:
    """The `k` chunks closest to `query`, best first: `{chunk_id, document_id, document_name,
    position, text, score}` (score: cosine similarity, -1..1). An empty collection gives [].

    `account` is who searches (group limits, quota, metering): by default the collection's owner;
    pass the caller when a profile lends its collection to other accounts."""
    target, matrix, group = await in_worker(_prepare)(collection, account, quota_used)
    if not len(matrix.ids) or k <= 0:
        return []
    if (screening := screening_for(group, request_id)) is not None:  # the searcher's guardrails read the query
        query = (await screened_texts(screening, [query]))[0]
    embedded = await embed([target], [query])
    return await in_worker(_rank_and_meter)(
        collection, account, matrix, embedded.vectors[0], k, target, embedded.prompt_tokens, request_id)


def _prepare(collection: Collection, account, quota_used) -> tuple[Target, vector_store.Matrix, object]:
    group = (account or collection.account).group
    return _query_model(collection, account, quota_used), vector_store.matrix_for(collection), group


def _query_model(collection: Collection, account, quota_used) -> Target:
    """The model the query is embedded with. For a collection another account searches (a
    profile lends it), the model its vectors came from, when that model is still enabled and the
    searcher's group may use it: the searcher cannot reindex it. Otherwise the current embedding
    model, which must be the collection's (409 `reindex_required`)."""
    if account is not None and account.pk != collection.account_id and collection.embedding_model:
        reg = registry()
        recorded = reg.by_public_id.get(collection.embedding_model)
        if recorded is not None and CAPABILITY in recorded.capabilities and group_may_use(account.group, recorded, reg):
            return call_plan(account=account, model_id=recorded.public_id, capability=CAPABILITY,
                             quota_used=quota_used)[0]
    return model_for_collection(collection, account=account, quota_used=quota_used)


def _rank_and_meter(collection: Collection, account, matrix: vector_store.Matrix, query_vector: list[float], k: int,
                    target: Target, tokens: int, request_id: str) -> list[dict]:
    meter(account_id=account.pk if account is not None else collection.account_id, model=target.public_id,
          surface=SURFACE, input_tokens=tokens, output_tokens=0, request_id=request_id, price=target.price)
    ranked = vector_store.top_k(matrix, query_vector, k)
    chunks = {
        c.pk: c for c in Chunk.objects.filter(pk__in=[chunk_id for chunk_id, _ in ranked]).select_related("document")
        .only("id", "position", "text", "document__id", "document__name")
    }
    hits = []
    for chunk_id, score in ranked:
        chunk = chunks.get(chunk_id)
        if chunk is None:  # deleted since the matrix was read
            continue
        hits.append({
            "chunk_id": chunk.pk,
            "document_id": chunk.document.pk,
            "document_name": chunk.document.name,
            "position": chunk.position,
            "text": chunk.text,
            "score": round(score, 6),
        })
    return hits
