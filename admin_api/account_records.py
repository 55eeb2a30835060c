"""The JSON of an account and of its API key as the administration API shows them: never a hash, never
the key (only its preview, as the console shows it)."""

from __future__ import annotations

from accounts.admin_keys import key_of
from accounts.models import Account, ApiKey
from gateway.console.fields.money import BUDGET_FIELDS, plain


def money(value) -> str | None:
    """An amount as exact decimal text as it was written ("0.15", "-1"), or None."""
    return None if value is None else plain(value)


def key_record(key: ApiKey | None) -> dict | None:
    if key is None:
        return None
    return {"preview": key.preview, "created_at": key.created_at, "expires_at": key.expires_at,
            "last_used_at": key.last_used_at}


def account_record(account: Account) -> dict:
    return {
        "id": account.pk,
        "email": account.email,
        "full_name": account.full_name,
        "group": account.group_id,
        "group_name": account.group.name,
        "role": account.role,
        "is_active": account.is_active,
        "is_staff": account.is_staff,
        "locked_until": account.locked_until if account.is_locked() else None,
        "failed_logins": account.failed_logins,
        **{name: money(getattr(account, name)) for name in BUDGET_FIELDS},
        "api_key": key_record(key_of(account)),
        "date_joined": account.date_joined,
        "last_login": account.last_login,
    }
