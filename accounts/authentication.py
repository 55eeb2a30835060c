"""Who is calling (spec 5.1, 5.3): an API key or a session token, from the request headers.

`Authorization: Bearer <token>` wins over `X-API-Key` whenever both are sent, even when the
Bearer token is wrong. `X-API-Key` carries API keys only.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.http import HttpRequest

from accounts.keys import KEY_PREFIX, api_key_account
from accounts.models import Account, SessionToken
from accounts.sessions import session_lookup
from gateway.errors import ApiError, Unauthenticated, surface_of

NO_API_ACCESS = "Your account group lacks API permission."
DEACTIVATED = "This account is deactivated."
KEY_NOT_ALLOWED = "An API key cannot perform this operation; sign in and use a session token."


@dataclass(frozen=True)
class Principal:
    account: Account
    via: str  # "apikey" or "sanctum" (a session token), as /api/v1/auth/verify reports it
    session: SessionToken | None = None


def presented_credential(request: HttpRequest) -> tuple[str | None, str]:
    authorization = request.headers.get("Authorization", "")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() == "bearer":
        return token.strip() or None, "bearer"
    api_key = request.headers.get("X-API-Key", "").strip()
    return (api_key or None), "x-api-key"


def authenticate(
    request: HttpRequest, *, key_allowed: bool = True, session_needs_api_access: bool = True
) -> Principal:
    """The caller, or the refusal of 5.3: 401 for any bad credential (the body does not say
    which), 403 on `/api` for a session of a deactivated account or a group without API
    access, 403 for a key on an operation a key cannot do."""
    token, source = presented_credential(request)
    if token is None:
        raise Unauthenticated()
    if token.startswith(KEY_PREFIX):
        account = api_key_account(key=token)
        if account is None or not account.is_active or not account.group.api_access:
            raise Unauthenticated()
        if not key_allowed:
            raise ApiError(403, KEY_NOT_ALLOWED, code="permission_denied")
        return Principal(account=account, via="apikey")
    if source != "bearer":
        raise Unauthenticated()
    session = session_lookup(token=token)
    if session is None:
        raise Unauthenticated()
    account = session.account
    if surface_of(request.path) in ("openai", "anthropic"):
        if not account.is_active or not account.group.api_access:
            raise Unauthenticated()
    elif not account.is_active:
        raise ApiError(403, DEACTIVATED, code="account_inactive")
    elif session_needs_api_access and not account.group.api_access:
        raise ApiError(403, NO_API_ACCESS, code="permission_denied")
    return Principal(account=account, via="sanctum", session=session)
