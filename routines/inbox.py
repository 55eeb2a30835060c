"""The in-app inbox of an account: routine results (`inapp` targets) and notices to the owner."""

from __future__ import annotations

from django.utils import timezone

from gateway.web.errors import ApiError
from routines.models import InboxMessage

TITLE_MAX = 200
INBOX_PAGE = 100


def notify(account, title: str, body: str, *, routine=None, run=None) -> InboxMessage:
    return InboxMessage.objects.create(account=account, title=title[:TITLE_MAX], body=body, routine=routine, run=run)


def inbox_messages(account, *, limit: int = INBOX_PAGE) -> list[InboxMessage]:
    """The newest messages of `account`, newest first."""
    return list(InboxMessage.objects.filter(account=account).order_by("-created_at", "-id")[:limit])


def mark_read(account, message_id: int) -> InboxMessage:
    """Mark one of `account`'s messages read (once: a second call keeps the first time); another
    account's message, or none, is 404."""
    message = InboxMessage.objects.filter(pk=message_id, account=account).first()
    if message is None:
        raise ApiError(404, "Message not found.", code="not_found")
    if message.read_at is None:
        message.read_at = timezone.now()
        InboxMessage.objects.filter(pk=message.pk, read_at__isnull=True).update(read_at=message.read_at)
    return message
