"""Storing an account's files: a row and its bytes, never one without the other.

- Writing: the bytes first, under a name made of the file's new id, then the row; a row that cannot be written
  removes the bytes it would have pointed at. A crash between the two leaves bytes no row names (invisible,
  and under a name no later file takes), never a row without its bytes.
- Removing: the row first (in its transaction), then the bytes once that transaction commits (`_forget_bytes`, on
  every deleted row, so an account deleted with its files removes their bytes too). A storage that fails then
  leaves bytes without a row, never a row without bytes.
- The storage is Django's, so an upload that Django's upload handlers spooled to a temporary file is copied to it
  in chunks, never whole in memory; and reading gives a file object read in chunks.
- The group's quota (`file_storage_bytes`, per member, -1 = none) counts the bytes the account keeps; two uploads
  at the same instant may each pass it with what the other adds (the quota is a bound on what is kept, not a
  lock).
- Expiring: a file past its `expires_at` is gone to its account at once (not found, not listed, not counted in
  its quota), and `sweep_expired` (hourly, gateway/celery.py) removes it as a deletion does, so that no request
  depends on when the sweep last ran.
"""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta
from typing import IO

from django.conf import settings
from django.core.files import File
from django.core.files.storage import storages
from django.db import transaction
from django.db.models import Q, QuerySet, Sum
from django.db.models.signals import post_delete
from django.utils import timezone

from gateway.models import StoredFile
from gateway.web.errors import ApiError

PURPOSES = ("batch", "user_data")  # what a client may upload
BATCH_OUTPUT = "batch_output"  # what a finished batch writes (OpenAI's purpose for it)
ID_PREFIX = "file-"
SWEEP_BATCH = 500  # expired files removed per transaction: a long backlog never holds one transaction open


def storage():
    return storages["files"]


def new_id() -> str:
    return ID_PREFIX + secrets.token_hex(12)


def live_files(account, now: datetime | None = None) -> QuerySet[StoredFile]:
    """The account's files not yet expired: what it lists, reads and is counted for."""
    return StoredFile.objects.filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now or timezone.now()),
                                     account=account)


def stored_bytes(account) -> int:
    """What the account keeps now, in bytes."""
    return live_files(account).aggregate(total=Sum("bytes"))["total"] or 0


def check_quota(account, size: int) -> None:
    """A 403 naming the group's file storage quota when `size` more bytes would pass it."""
    allowed = account.group.file_storage_bytes
    if allowed < 0:
        return
    kept = stored_bytes(account)
    if kept + size > allowed:
        raise ApiError(403, f"File storage quota exceeded: your group ({account.group.name}) allows {allowed} bytes "
                            f"of files per account; {kept} are stored and this file has {size}. Delete files "
                            "to make room.", code="file_storage_quota_exceeded", param="file")


def save_file(account, content: IO[bytes], *, filename: str, purpose: str, size: int, quota: bool = True,
              expires_at: datetime | None = None, created_at: datetime | None = None) -> StoredFile:
    """Store `content` (`size` bytes) as a new file of `account`, after the group's quota allows it. `quota`:
    False for a file the gateway writes itself (a batch's output), which the account did not choose to keep.
    `expires_at`: when it goes (None: kept until deleted); `created_at`: the instant an expiry was counted from
    (an upload's `expires_after`), so that the two differ by exactly what was asked (now when not given)."""
    if quota:
        check_quota(account, size)
    file_id = new_id()
    # an upload spooled to a temporary file is moved, not copied, by a folder storage
    name = storage().save(f"{account.pk}/{file_id}", content if isinstance(content, File) else File(content))
    try:
        return StoredFile.objects.create(id=file_id, account=account, filename=filename[:255], purpose=purpose,
                                         bytes=size, storage_name=name, created_at=created_at or timezone.now(),
                                         expires_at=expires_at)
    except BaseException:
        storage().delete(name)
        raise


def find_file(account, file_id: str) -> StoredFile:
    """The account's file `file_id`, or OpenAI's 404 (another account's file, or an expired one, is not found
    either)."""
    # an id holding NUL names nothing (PostgreSQL's text cannot even be asked for it)
    found = None if "\x00" in file_id else live_files(account).filter(id=file_id).first()
    if found is None:
        raise ApiError(404, f"No such File object: {file_id}", param="id")
    return found


def open_file(stored: StoredFile) -> IO[bytes]:
    return storage().open(stored.storage_name, "rb")


def delete_file(stored: StoredFile) -> None:
    with transaction.atomic():
        stored.delete()


def _forget_bytes(sender, instance: StoredFile, **kwargs) -> None:
    name = instance.storage_name
    transaction.on_commit(lambda: storage().delete(name))


def connect() -> None:
    """Every deleted row's bytes go once its deletion commits (gateway/apps.py connects it at start)."""
    post_delete.connect(_forget_bytes, sender=StoredFile, dispatch_uid="stored-file-bytes")


def delete_file_id(file_id: str) -> None:
    """Remove a file by its id, if it is still there (a batch's output file written again replaces it)."""
    for stored in StoredFile.objects.filter(id=file_id):
        delete_file(stored)


def output_expiry() -> datetime:
    """When a batch's output or error file written now goes (FILES_OUTPUT_EXPIRE_SECONDS from now)."""
    return timezone.now() + timedelta(seconds=settings.FILES_OUTPUT_EXPIRE_SECONDS)


def sweep_expired(now: datetime | None = None) -> int:
    """Remove every file expired by `now` (rows, then their bytes once each batch of SWEEP_BATCH commits, as a
    deletion does); how many went. What linked one (a batch's files) is unlinked, as by a deletion."""
    now = now or timezone.now()
    removed = 0
    while True:
        with transaction.atomic():
            ids = list(StoredFile.objects.filter(expires_at__lte=now).order_by("expires_at")
                       .values_list("id", flat=True)[:SWEEP_BATCH])
            if ids:
                StoredFile.objects.filter(id__in=ids).delete()
        removed += len(ids)
        if len(ids) < SWEEP_BATCH:
            return removed
