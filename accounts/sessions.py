"""Session tokens (spec 2.2): opaque, stored as a hash, 86400 s or 2592000 s with remember_me."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.utils import timezone

from accounts.models import Account, SessionToken
from accounts.secrets import digest, random_alnum


@dataclass(frozen=True)
class IssuedSession:
    token: str
    expires_in: int


def session_create(*, account: Account, remember: bool) -> IssuedSession:
    ttl = settings.SESSION_TOKEN_REMEMBER_TTL_SECONDS if remember else settings.SESSION_TOKEN_TTL_SECONDS
    token = random_alnum(48)
    now = timezone.now()
    SessionToken.objects.create(
        account=account, token_hash=digest(token), created_at=now, expires_at=now + timezone.timedelta(seconds=ttl)
    )
    return IssuedSession(token=token, expires_in=ttl)


def session_lookup(*, token: str) -> SessionToken | None:
    """The live session a token names, with its account and group (one query)."""
    if not token or len(token) > 200:
        return None
    row = SessionToken.objects.select_related("account__group").filter(token_hash=digest(token)).first()
    if row is None or row.expires_at <= timezone.now():
        return None
    return row


def session_delete(*, session: SessionToken) -> None:
    SessionToken.objects.filter(pk=session.pk).delete()


def sessions_purge_expired() -> int:
    deleted, _ = SessionToken.objects.filter(expires_at__lte=timezone.now()).delete()
    return deleted
