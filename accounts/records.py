"""How an account is shown to its owner (spec 2.3, 4.4)."""

from __future__ import annotations

from typing import Any

from accounts.models import Account
from gateway.web.output import timestamp


def account_identity(account: Account) -> dict[str, Any]:
    """The six fields of the verify response."""
    return {
        "id": account.pk,
        "full_name": account.full_name,
        "email": account.email,
        "work_group": account.group.name,
        "role": account.role,
        "is_active": account.is_active,
    }


def account_record(account: Account) -> dict[str, Any]:
    """The whole record returned by login and /api/auth/me; informational, not a contract."""
    group = account.group
    return {
        **account_identity(account),
        "is_staff": account.is_staff,
        "api_access": group.api_access,
        "created_at": timestamp(account.date_joined),
        "last_login_at": timestamp(account.last_login),
    }


def allowed_model_ids(account: Account) -> list[str] | None:
    """`allowed_models` of /api/auth/me: None when the group may use every model."""
    group = account.group
    if group.all_models:
        return None
    return [m.public_id for m in group.allowed_models.select_related("server").order_by("server__name", "name")]
