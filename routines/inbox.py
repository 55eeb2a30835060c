"""The in-app inbox of an account: routine results (`inapp` targets) and notices to the owner."""

from __future__ import annotations

from routines.models import InboxMessage

TITLE_MAX = 200
INBOX_PAGE = 100


def notify(account, title: str, body: str, *, routine=None, run=None) -> InboxMessage:
    return InboxMessage.objects.create(account=account, title=title[:TITLE_MAX], body=body, routine=routine, run=run)


def inbox_messages(account, *, limit: int = INBOX_PAGE) -> list[InboxMessage]:
    """The newest messages of `account`, newest first."""
    return list(InboxMessage.objects.filter(account=account).order_by("-created_at", "-id")[:limit])
