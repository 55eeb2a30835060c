"""API keys (spec 2.1, 3.1): one per account, `svc_usr_<id>_<32 letters and digits>`, 365 days."""

from __future__ import annotations

import hmac
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.models import Account, ApiKey
from accounts.secrets import digest, random_alnum

KEY_PATTERN = re.compile(r"^svc_usr_(\d{1,18})_([A-Za-z0-9]{32})$")
KEY_PREFIX = "svc_usr_"


@dataclass(frozen=True)
class IssuedKey:
    key: str  # the whole key: shown to its owner once, never stored
    expires_at: datetime


def api_key_preview(key: str) -> str:
    return f"{key[:16]}…{key[-8:]}"


@transaction.atomic
def api_key_generate(*, account: Account) -> IssuedKey:
    """Issue a new key, replacing the account's old one at once."""
    key = f"{KEY_PREFIX}{account.pk}_{random_alnum(32)}"
    now = timezone.now()
    expires_at = now + timedelta(days=settings.API_KEY_TTL_DAYS)
    ApiKey.objects.filter(account=account).delete()
    ApiKey.objects.create(
        account=account, key_hash=digest(key), preview=api_key_preview(key), created_at=now, expires_at=expires_at
    )
    return IssuedKey(key=key, expires_at=expires_at)


def api_key_revoke(*, account: Account) -> bool:
    """Delete the account's key; False when it had none."""
    deleted, _ = ApiKey.objects.filter(account=account).delete()
    return deleted > 0


def api_key_row(*, key: str) -> ApiKey | None:
    """The stored key (with its account and group), if the key is well formed, current and
    unexpired. One query; the hash is compared in constant time."""
    match = KEY_PATTERN.match(key)
    if not match:
        return None
    row = ApiKey.objects.select_related("account__group").filter(account_id=int(match.group(1))).first()
    if row is None or not hmac.compare_digest(row.key_hash, digest(key)):
        return None
    if row.expires_at <= timezone.now():
        return None
    return row
