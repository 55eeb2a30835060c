"""Retrieval for native chat: the best chunks of the turn's collections for the user's message
(the caller's own collection and the profile's), ranked together by score.

A collection that cannot be searched (its embedding model changed: 409 `reindex_required`, or the
embedding model failed) refuses the turn before anything is saved or streamed."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from native.models import Collection
from native.search import search_collection


async def retrieve(collections: list[Collection], query: str, *, account, request_id: str = "") -> list[dict[str, Any]]:
    """The top CHAT_RETRIEVAL_TOP_K hits over all `collections`, best first, each with its
    `collection_id`. The query is embedded for `account`, the caller: its group limits and
    quota apply and it is metered, also for a collection a profile lends it."""
    k = settings.CHAT_RETRIEVAL_TOP_K
    hits: list[dict[str, Any]] = []
    for collection in collections:
        for hit in await search_collection(collection, query, k=k, account=account, request_id=request_id):
            hits.append({**hit, "collection_id": collection.pk})
    hits.sort(key=lambda hit: hit["score"], reverse=True)
    return hits[:k]
