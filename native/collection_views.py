"""/api/v1/collections: collections of documents, searched by meaning. Errors
`{status: 'error', code, message}` (validation: 422 `{message, errors}`). Another account's
collection is not found (404).

    GET    /api/v1/collections                          list
    POST   /api/v1/collections                          create {name, description}
    GET    /api/v1/collections/{id}                     one, with its document count
    DELETE /api/v1/collections/{id}                     delete with its documents
    GET    /api/v1/collections/{id}/documents           list
    POST   /api/v1/collections/{id}/documents           write: multipart `file`, or JSON
                                                        {name, text, content_type}; 30/min
    DELETE /api/v1/collections/{id}/documents/{doc_id}  delete
    POST   /api/v1/collections/{id}/search              {query, k}; 60/min
    POST   /api/v1/collections/{id}/reindex             embed again with the current model; 6/min
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpResponse
from django.http.multipartparser import MultiPartParserError
from rest_framework import serializers

from accounts.endpoints import endpoint
from gateway.calls.embeddings import embedding_model_for
from gateway.limits import ratelimit
from gateway.state.workers import in_worker
from gateway.web.body import read_json_object
from gateway.web.errors import ApiError, ValidationFailed
from gateway.web.output import respond
from gateway.web.validation import validated
from native import collections as library
from native import extract
from native.search import search_collection


class CollectionInput(serializers.Serializer):
    name = serializers.CharField(max_length=120)
    description = serializers.CharField(max_length=4000, required=False, allow_blank=True, default="")


class TextDocumentInput(serializers.Serializer):
    name = serializers.CharField(max_length=255)
    text = serializers.CharField(trim_whitespace=False)
    content_type = serializers.CharField(max_length=100, required=False, default=extract.TEXT)


class SearchInput(serializers.Serializer):
    query = serializers.CharField()
    k = serializers.IntegerField(min_value=1, required=False, default=5)

    def validate_query(self, value):
        if len(value) > settings.EMBEDDINGS_MAX_CHARS:
            raise serializers.ValidationError(f"Ensure this field has no more than {settings.EMBEDDINGS_MAX_CHARS} "
                                              "characters.")
        return value

    def validate_k(self, value):
        if value > settings.COLLECTION_SEARCH_MAX_K:
            raise serializers.ValidationError(f"Ensure this value is less than or equal to "
                                              f"{settings.COLLECTION_SEARCH_MAX_K}.")
        return value


# --- Collections -----------------------------------------------------------------------------


@endpoint("GET")
def collection_list(request):
    found = library.collection_list(account=request.principal.account)
    return respond({"data": [library.collection_json(c) for c in found]})


@endpoint("POST")
def collection_create(request):
    data = validated(CollectionInput, read_json_object(request))
    created = library.collection_create(account=request.principal.account, **data)
    return respond(library.collection_json(created), status=201)


@endpoint("GET")
def collection_detail(request, collection_id: int):
    found = library.collection_get(account=request.principal.account, collection_id=collection_id)
    return respond(library.collection_json(found))


@endpoint("DELETE")
def collection_delete(request, collection_id: int):
    library.collection_delete(account=request.principal.account, collection_id=collection_id)
    return HttpResponse(status=204)


# --- Documents ---------------------------------------------------------------------------------


@endpoint("GET")
def document_list(request, collection_id: int):
    found = library.collection_get(account=request.principal.account, collection_id=collection_id)
    return respond({"data": [library.document_json(d) for d in library.document_list(collection=found)]})


@endpoint("DELETE")
def document_delete(request, collection_id: int, document_id: int):
    found = library.collection_get(account=request.principal.account, collection_id=collection_id)
    library.document_delete(collection=found, document_id=document_id)
    return HttpResponse(status=204)


def _prepare_write(request):
    """The collection, the model to embed with (limits and quota before any work), and the
    document's text (in the endpoint's worker hop: reading and extracting are blocking work)."""
    collection = _own(request)
    target = library.model_for_collection(collection, quota_used=request.quota_used)
    return collection, _read_document(request), target


@endpoint("POST", limit=ratelimit.COLLECTION_WRITE, prepare=_prepare_write)
async def document_write(request, collection_id: int):
    collection, document, target = request.prepared
    stored = await library.document_write(collection=collection, document=document, target=target,
                                          request_id=request.request_id, group=request.principal.account.group)
    return respond(library.document_json(stored), status=201)


def _read_document(request) -> library.NewDocument:
    cap = settings.COLLECTION_MAX_DOCUMENT_BYTES
    if _declared_length(request) > cap + 64 * 1024:  # the document and its envelope
        raise _too_large(cap)
    if (request.content_type or "").startswith("multipart/form-data"):
        try:
            upload = request.FILES.get("file")
            name = request.POST.get("name")
        except MultiPartParserError:
            raise ApiError(400, "The multipart body is malformed.", code="bad_request") from None
        if upload is None:
            raise ValidationFailed({"file": ["Send the document as the multipart field 'file'."]})
        if upload.size > cap:
            raise _too_large(cap)
        content_type = extract.content_type_of(upload.content_type, upload.name or "")
        data = upload.read()
        text = extract.extract_text(data, content_type, charset=upload.charset)
        name = (name or upload.name or "document").strip()[:255] or "document"
        return library.NewDocument(name, content_type, len(data), text)
    data = validated(TextDocumentInput, read_json_object(request))
    content_type = extract.content_type_of(data["content_type"])
    if content_type == extract.PDF:
        raise ValidationFailed({"content_type": ["Send a PDF as a multipart file upload (field 'file')."]})
    raw = data["text"].encode()
    if len(raw) > cap:
        raise _too_large(cap)
    text = extract.tidy(extract.html_text(data["text"]) if content_type == extract.HTML else data["text"])
    if not text:
        raise ValidationFailed({"text": ["The document holds no text."]})
    return library.NewDocument(data["name"], content_type, len(raw), text)


def _declared_length(request) -> int:
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0


def _too_large(cap: int) -> ApiError:
    return ApiError(413, f"The document is larger than {cap} bytes.", code="payload_too_large")


# --- Search and reindex ------------------------------------------------------------------------


def _prepare_search(request):
    collection = _own(request)
    data = validated(SearchInput, read_json_object(request))
    return collection, data


@endpoint("POST", limit=ratelimit.COLLECTION_SEARCH, prepare=_prepare_search)
async def collection_search(request, collection_id: int):
    collection, data = request.prepared
    hits = await search_collection(collection, data["query"], k=data["k"], request_id=request.request_id,
                                   quota_used=request.quota_used)
    return respond({"collection_id": collection.pk, "model": collection.embedding_model or None,
                    "results": hits})


def _prepare_reindex(request):
    collection = _own(request)
    return collection, embedding_model_for(account=collection.account, quota_used=request.quota_used)


@endpoint("POST", limit=ratelimit.COLLECTION_REINDEX, prepare=_prepare_reindex)
async def collection_reindex(request, collection_id: int):
    collection, target = request.prepared
    count = await library.collection_reindex(collection=collection, target=target, request_id=request.request_id)
    fresh = await in_worker(library.collection_get)(
        account=request.principal.account, collection_id=collection.pk)
    return respond({**library.collection_json(fresh), "reindexed_chunks": count})


def _own(request):
    return library.collection_get(account=request.principal.account,
                                  collection_id=request.resolver_match.kwargs["collection_id"])
