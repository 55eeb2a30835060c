"""Collections of documents: create, read, delete; write a document (extracted, chunked,
embedded, stored); reindex with the current embedding model.

Every vector of a collection comes from one model, recorded in `embedding_model`. Writes and
reindexing lock the collection row while they store (a write from before its chunks get their
ids), and move `vectors_version` on in the same transaction (deletes and reindexing also
`vectors_generation`), so every process's cached matrix (native/vectors.py) is refreshed by its
next search.
When the current embedding model is not the one the collection was made with, writes and searches
answer 409 `reindex_required` (docs/decisions/0044-collections-one-model.md) until the collection is reindexed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from django.db import transaction
from django.db.models import Count, F
from django.utils import timezone

from gateway.calls.embeddings import embed_batched, embedding_model_for
from gateway.calls.metering import meter
from gateway.calls.screened import screened_texts, screening_for
from gateway.registry.snapshot import Target
from gateway.state.workers import in_worker
from gateway.web.errors import ApiError
from gateway.web.output import timestamp
from native import vectors as vector_store
from native.chunking import chunk_text
from native.models import Chunk, Collection, Document

SURFACE = "native_collections"  # usage records of embedding calls made for collections
REINDEX_ROUNDS = 3  # rounds a reindex makes to catch documents written while it embedded


def not_found() -> ApiError:
    return ApiError(404, "Collection not found.", code="not_found")


# --- Reads ---------------------------------------------------------------------------------------


def collection_list(*, account) -> list[Collection]:
    return list(Collection.objects.filter(account=account).annotate(document_count=Count("documents"))
                .order_by("-created_at", "-id"))


def collection_get(*, account, collection_id: int) -> Collection:
    """The caller's collection (with `document_count`), else 404: another account's is not found."""
    found = (Collection.objects.filter(account=account, pk=collection_id).select_related("account__group")
             .annotate(document_count=Count("documents")).first())
    if found is None:
        raise not_found()
    return found


def document_list(*, collection: Collection) -> list[Document]:
    return list(collection.documents.annotate(chunk_count=Count("chunks")).defer("text").order_by("-created_at", "-id"))


# --- Writes without embedding ------------------------------------------------------------------


def collection_create(*, account, name: str, description: str = "") -> Collection:
    collection = Collection.objects.create(account=account, name=name, description=description)
    collection.document_count = 0
    return collection


def collection_delete(*, account, collection_id: int) -> None:
    deleted, _ = Collection.objects.filter(account=account, pk=collection_id).delete()
    if not deleted:
        raise not_found()
    transaction.on_commit(lambda: vector_store.forget(collection_id))


def document_delete(*, collection: Collection, document_id: int) -> None:
    with transaction.atomic():
        locked = _lock(collection.pk)
        deleted, _ = Document.objects.filter(collection=locked, pk=document_id).delete()
        if not deleted:
            raise ApiError(404, "Document not found.", code="not_found")
        _bump(locked.pk, changed=True)


# --- The embedding model of a collection ---------------------------------------------------------


def model_for_collection(collection: Collection, *, account=None, quota_used=None) -> Target:
    """The current embedding model for `account` (default: the owner; group limits and quota
    checked), which must be the one the collection's vectors came from (409 `reindex_required`
    otherwise)."""
    target = embedding_model_for(account=account or collection.account, quota_used=quota_used)
    if collection.embedding_model and collection.embedding_model != target.public_id:
        raise reindex_required(collection, target)
    return target


def reindex_required(collection: Collection, target: Target) -> ApiError:
    return ApiError(
        409,
        f"The collection's vectors were made with '{collection.embedding_model}' but the embedding model is "
        f"now '{target.public_id}'; reindex the collection (POST /api/v1/collections/{collection.pk}/reindex).",
        code="reindex_required",
    )


# --- Writing a document --------------------------------------------------------------------------


@dataclass(frozen=True)
class NewDocument:
    name: str
    content_type: str
    size: int
    text: str


async def document_write(*, collection: Collection, document: NewDocument, target: Target,
                         request_id: str = "", group=None) -> Document:
    """Chunk, embed (in batches, with `target` alone) and store a document; its tokens are metered.
    `group`: the writer's, whose guardrails' input checks read the document first (a block refuses
    it, a redaction is what is embedded and kept: the embedding model never sees what was found)."""
    if (screening := screening_for(group, request_id)) is not None:
        text = (await screened_texts(screening, [document.text]))[0]
        document = replace(document, text=text)
    chunks = chunk_text(document.text)
    embedded = await embed_batched(target, chunks, pack=vector_store.to_blobs)
    stored = await in_worker(_document_store)(collection.pk, document, chunks, embedded.blobs, target.public_id)
    await in_worker(meter)(
        account_id=collection.account_id, model=target.public_id, surface=SURFACE,
        input_tokens=embedded.prompt_tokens, output_tokens=0, request_id=request_id)
    return stored


def _document_store(collection_id: int, document: NewDocument, chunks: list[str], blobs: list[bytes],
                    model: str) -> Document:
    try:
        with transaction.atomic():
            collection = _lock(collection_id)
            if collection.embedding_model and collection.embedding_model != model:
                raise ApiError(409, "The collection was reindexed with another model while the document was "
                                    "being written; send it again.", code="conflict")
            stored = Document.objects.create(collection=collection, name=document.name,
                                             content_type=document.content_type, size=document.size,
                                             text=document.text)
            Chunk.objects.bulk_create(
                [Chunk(collection=collection, document=stored, position=i, text=text, embedding=blob)
                 for i, (text, blob) in enumerate(zip(chunks, blobs))],
                batch_size=500,
            )
            _bump(collection_id, embedding_model=model)
    except Collection.DoesNotExist:
        raise not_found() from None
    stored.chunk_count = len(chunks)
    return stored


# --- Reindexing ----------------------------------------------------------------------------------


async def collection_reindex(*, collection: Collection, target: Target, request_id: str = "") -> int:
    """Embed every chunk again with `target` and record it as the collection's model. Chunks
    written meanwhile are caught in a further round. Returns the number of chunks embedded."""
    done: dict[int, bytes] = {}
    tokens = 0
    try:
        for _ in range(REINDEX_ROUNDS):
            pending = await in_worker(_chunks_missing)(collection.pk, set(done))
            if pending:
                embedded = await embed_batched(target, [text for _, text in pending], pack=vector_store.to_blobs)
                tokens += embedded.prompt_tokens
                done.update(zip([chunk_id for chunk_id, _ in pending], embedded.blobs))
            if await in_worker(_reindex_store)(collection.pk, done, target.public_id):
                return len(done)
        raise ApiError(409, "Documents kept arriving while the collection was reindexed; try again.",
                       code="conflict")
    finally:
        if tokens:
            await in_worker(meter)(
                account_id=collection.account_id, model=target.public_id, surface=SURFACE, input_tokens=tokens,
                output_tokens=0, request_id=request_id)


def _chunks_missing(collection_id: int, done: set[int]) -> list[tuple[int, str]]:
    rows = Chunk.objects.filter(collection_id=collection_id).order_by("id").values_list("id", "text")
    return [(chunk_id, text) for chunk_id, text in rows.iterator(chunk_size=2000) if chunk_id not in done]


def _reindex_store(collection_id: int, done: dict[int, bytes], model: str) -> bool:
    """Store the new vectors when they cover every chunk of the collection; False otherwise."""
    try:
        with transaction.atomic():
            _lock(collection_id)
            current = set(Chunk.objects.filter(collection_id=collection_id).values_list("id", flat=True))
            if current - done.keys():
                return False
            Chunk.objects.bulk_update([Chunk(pk=chunk_id, embedding=done[chunk_id]) for chunk_id in current],
                                      ["embedding"], batch_size=500)
            _bump(collection_id, changed=True, embedding_model=model)
    except Collection.DoesNotExist:
        raise not_found() from None
    return True


# --- Shared steps --------------------------------------------------------------------------------


def _lock(collection_id: int) -> Collection:
    return Collection.objects.select_for_update().get(pk=collection_id)


def _bump(collection_id: int, *, changed: bool = False, **fields: Any) -> None:
    """Move the vectors' version on, inside the caller's transaction: every process, this one
    too, adds the new chunks to its copy, or (`changed`: stored vectors changed or went) reads it
    all again, so this process drops its copy at once."""
    if changed:
        fields["vectors_generation"] = F("vectors_generation") + 1
        transaction.on_commit(lambda: vector_store.forget(collection_id))
    Collection.objects.filter(pk=collection_id).update(
        vectors_version=F("vectors_version") + 1, updated_at=timezone.now(), **fields)


# --- What the API shows --------------------------------------------------------------------------


def collection_json(collection: Collection) -> dict[str, Any]:
    return {
        "id": collection.pk,
        "name": collection.name,
        "description": collection.description,
        "embedding_model": collection.embedding_model or None,
        "document_count": getattr(collection, "document_count", None),
        "created_at": timestamp(collection.created_at),
        "updated_at": timestamp(collection.updated_at),
    }


def document_json(document: Document) -> dict[str, Any]:
    return {
        "id": document.pk,
        "collection_id": document.collection_id,
        "name": document.name,
        "content_type": document.content_type,
        "size": document.size,
        "chunk_count": getattr(document, "chunk_count", None),
        "created_at": timestamp(document.created_at),
    }
