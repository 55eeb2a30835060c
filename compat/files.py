"""OpenAI's Files API, for the batches that read and write them: `POST /v1/files` (multipart `file` and `purpose`,
`batch` or `user_data`), `GET /v1/files` (a page, newest first by default, with `after`, `limit`, `order` and
`purpose`), `GET /v1/files/{id}`, `GET /v1/files/{id}/content` (the bytes) and `DELETE /v1/files/{id}`.
An upload may ask to expire (`expires_after[anchor]` = created_at, `expires_after[seconds]` from 3600 to 2592000,
OpenAI's bounds): from its `expires_at` on it is the 404 of an unknown file, and the hourly sweep removes it.

Each file is its account's: another account's id is the 404 of an unknown one. A file over FILES_MAX_BYTES is a
413 (a body announced larger than it and its form's few fields is refused before it is read); one that would pass
the group's file storage quota a 403 naming it. The storing itself (bytes and row together) is
gateway/files/store.py's. Django's upload handlers spool a large upload to a temporary file, so no file is held
whole in memory, and its content is sent in chunks; both on worker threads of the shared executor."""

from __future__ import annotations

import mimetypes
from datetime import datetime, timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import JsonResponse, StreamingHttpResponse
from django.http.multipartparser import MultiPartParserError
from django.utils import timezone

from accounts.endpoints import endpoint
from gateway.files import store
from gateway.limits import ratelimit
from gateway.models import StoredFile
from gateway.state.workers import in_worker
from gateway.web.errors import ApiError

FORM_SLACK = 64 * 1024  # bytes a multipart body holds besides the file itself: boundaries, headers, `purpose`
MAX_LIMIT, DEFAULT_LIMIT = 10_000, 10_000  # OpenAI's page size: at most 10,000, and 10,000 unless asked
CHUNK = 64 * 1024
EXPIRES_MIN, EXPIRES_MAX = 3600, 30 * 24 * 3600  # OpenAI's bounds of `expires_after[seconds]`: an hour, 30 days
ANCHOR, SECONDS = "expires_after[anchor]", "expires_after[seconds]"


def file_object(stored: StoredFile) -> dict[str, Any]:
    return {"id": stored.id, "object": "file", "bytes": stored.bytes, "created_at": int(stored.created_at.timestamp()),
            "filename": stored.filename, "purpose": stored.purpose, "status": "processed",
            "expires_at": int(stored.expires_at.timestamp()) if stored.expires_at else None, "status_details": None}


def _too_large(limit: int) -> ApiError:
    return ApiError(413, f"The file is larger than {limit} bytes, the most this gateway stores.",
                    code="request_too_large", param="file")


@endpoint("POST", limit=ratelimit.V1)
async def create_file(request):
    """Read and stored on a worker thread of the shared executor: a large file's copy to the storage (an object
    storage's upload) holds no thread other requests wait for."""
    return await in_worker(_create)(request)


def _create(request):
    limit = settings.FILES_MAX_BYTES
    if int(request.META.get("CONTENT_LENGTH") or 0) > limit + FORM_SLACK:
        raise _too_large(limit)
    if not (request.content_type or "").startswith("multipart/form-data"):
        raise ApiError(400, "Send the file as multipart/form-data, with `file` and `purpose`.",
                       code="invalid_request_error")
    try:
        fields, files = request.POST, request.FILES
    except MultiPartParserError:
        raise ApiError(400, "The multipart body is malformed.", code="invalid_request_error") from None
    purpose = fields.get("purpose")
    if not purpose:
        raise ApiError(400, "'purpose' is required: one of " + ", ".join(store.PURPOSES) + ".", param="purpose")
    if purpose not in store.PURPOSES:
        raise ApiError(400, f"'{purpose}' is not a purpose this gateway stores: one of "
                            + ", ".join(store.PURPOSES) + ".", param="purpose")
    now = timezone.now()
    expires_at = _expiry(fields, now)
    upload = files.get("file")
    if upload is None:
        raise ApiError(400, "'file' is required.", param="file")
    if upload.size > limit:
        raise _too_large(limit)
    with upload:
        stored = store.save_file(request.principal.account, upload, filename=upload.name or "file",
                                 purpose=purpose, size=upload.size, expires_at=expires_at,
                                 created_at=now if expires_at else None)
    return JsonResponse(file_object(stored))


def _expiry(fields, now: datetime) -> datetime | None:
    """When the upload is to go: `expires_after` as OpenAI's SDK sends it in a form (its two fields), each
    refused by name when missing or wrong; None when not asked. The file is kept until deleted then."""
    given = [name for name in fields if name == "expires_after" or name.startswith("expires_after[")]
    if not given:
        return None
    for name in given:
        if name not in (ANCHOR, SECONDS):
            raise ApiError(400, f"'{name}' is not taken: send expires_after as its two fields, {ANCHOR} and "
                                f"{SECONDS}.", param=name)
    anchor, seconds = fields.get(ANCHOR), fields.get(SECONDS)
    if anchor is None or seconds is None:
        missing = ANCHOR if anchor is None else SECONDS
        raise ApiError(400, f"'{missing}' is required with expires_after.", param=missing)
    if anchor != "created_at":
        raise ApiError(400, f"'{anchor}' is not an anchor of expires_after: the one anchor is created_at.",
                       param=ANCHOR)
    if not (seconds.isascii() and seconds.isdigit()) or not EXPIRES_MIN <= int(seconds) <= EXPIRES_MAX:
        raise ApiError(400, f"'{SECONDS}' must be a whole number of seconds from {EXPIRES_MIN} (an hour) to "
                            f"{EXPIRES_MAX} (30 days).", param=SECONDS)
    return now + timedelta(seconds=int(seconds))


def _page_params(request) -> tuple[str | None, int, str, str | None]:
    query = request.GET
    try:
        limit = int(query.get("limit", DEFAULT_LIMIT))
    except ValueError:
        limit = 0
    if not 1 <= limit <= MAX_LIMIT:
        raise ApiError(400, f"'limit' must be a whole number from 1 to {MAX_LIMIT}.", param="limit")
    order = query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise ApiError(400, "'order' must be asc or desc.", param="order")
    return query.get("after") or None, limit, order, query.get("purpose") or None


@endpoint("GET", limit=ratelimit.V1)
def list_files(request):
    """A page after the file `after` (by creation time, then id), with OpenAI's `first_id`, `last_id`, `has_more`."""
    after, limit, order, purpose = _page_params(request)
    rows = store.live_files(request.principal.account)
    if purpose:
        rows = rows.filter(purpose=purpose)
    if after:
        mark = store.find_file(request.principal.account, after)
        if order == "desc":
            rows = rows.filter(created_at__lte=mark.created_at).exclude(created_at=mark.created_at, id__gte=mark.id)
        else:
            rows = rows.filter(created_at__gte=mark.created_at).exclude(created_at=mark.created_at, id__lte=mark.id)
    ordering = ("-created_at", "-id") if order == "desc" else ("created_at", "id")
    found = list(rows.order_by(*ordering)[:limit + 1])
    data = [file_object(stored) for stored in found[:limit]]
    return JsonResponse({"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
                         "last_id": data[-1]["id"] if data else None, "has_more": len(found) > limit})


@endpoint("GET", limit=ratelimit.V1)
def retrieve_file(request, file_id: str):
    return JsonResponse(file_object(store.find_file(request.principal.account, file_id)))


@endpoint("DELETE", limit=ratelimit.V1)
def delete_file(request, file_id: str):
    store.delete_file(store.find_file(request.principal.account, file_id))
    return JsonResponse({"id": file_id, "object": "file", "deleted": True})


def _opened(account, file_id: str):
    stored = store.find_file(account, file_id)
    return stored, store.open_file(stored)


@endpoint("GET", limit=ratelimit.V1)
async def file_content(request, file_id: str):
    """The bytes as stored, in chunks; the type guessed from the file's name (JSON Lines for a batch's `.jsonl`)."""
    stored, handle = await in_worker(_opened)(request.principal.account, file_id)
    kind = "application/jsonl" if stored.filename.endswith(".jsonl") else (
        mimetypes.guess_type(stored.filename)[0] or "application/octet-stream")

    read, close = sync_to_async(handle.read, thread_sensitive=False), sync_to_async(handle.close)

    async def chunks():  # read off the event loop (an object storage's read is a network call)
        try:
            while chunk := await read(CHUNK):
                yield chunk
        finally:
            await close()

    response = StreamingHttpResponse(chunks(), content_type=kind)
    response["Content-Length"] = str(stored.bytes)
    response["Content-Disposition"] = f'attachment; filename="{_quoted(stored.filename)}"'
    return response


def _quoted(name: str) -> str:
    return "".join(ch for ch in name if ch.isprintable() and ch not in '"\\')
