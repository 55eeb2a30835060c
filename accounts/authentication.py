"""Who is calling (spec 5.1, 5.3): an API key or a session token, from the request headers.

`Authorization: Bearer <token>` wins over `X-API-Key` whenever both are sent, even when the
Bearer token is wrong. `X-API-Key` carries API keys only. On Google's paths (the Gemini API's
surface) an API key may also come as Google's SDKs send theirs: `x-goog-api-key`, or `?key=` (which
the access logs redact: gateway/telemetry/logfilters.py), after those two.

`identify` reads who a credential belongs to (the database, or the process's cache of it);
`authenticate` then applies the refusal rules, which depend on the surface and the endpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.http import HttpRequest

from accounts import principal_cache
from accounts.keys import KEY_PREFIX, api_key_row
from accounts.models import Account, SessionToken
from accounts.sessions import session_lookup
from gateway.web.errors import ApiError, Unauthenticated
from gateway.web.paths import COMPAT_SURFACES, GEMINI, GEMINI_V1, surface_of

NO_API_ACCESS = "Your account group lacks API permission."
DEACTIVATED = "This account is deactivated."
KEY_NOT_ALLOWED = "An API key cannot perform this operation; sign in and use a session token."
NOT_STAFF = "Only staff accounts may use the administration API."


@dataclass(frozen=True)
class Principal:
    account: Account
    via: str  # "apikey" or "sanctum" (a session token), as /api/v1/auth/verify reports it
    session: SessionToken | None = None


@dataclass(frozen=True)
class Identity:
    principal: Principal
    token: str
    expires_at: datetime  # of the key or session itself
    expected_version: int | None  # from the cache; None when just read from the database

    @property
    def version_key(self) -> str:
        """The account's version, which its group's changes move too (accounts/principal_cache.py)."""
        return principal_cache.account_version_key(self.principal.account.pk)


def presented_credential(request: HttpRequest) -> tuple[str | None, str]:
    authorization = request.headers.get("Authorization", "")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() == "bearer":
        return token.strip() or None, "bearer"
    api_key = request.headers.get("X-API-Key", "").strip()
    if not api_key and surface_of(request.path) in (GEMINI, GEMINI_V1):
        api_key = (request.headers.get("X-Goog-Api-Key") or request.GET.get("key") or "").strip()
    return (api_key or None), "x-api-key"


def identify(request: HttpRequest, *, use_cache: bool = True) -> Identity:
    """Who the presented credential belongs to; 401 when nobody (the body does not say why)."""
    if use_cache and (identity := identify_cached(request)) is not None:
        return identity
    token = _token(request)
    principal, expires_at = _read(token)
    return Identity(principal, token, expires_at, None)


def identify_cached(request: HttpRequest) -> Identity | None:
    """`identify` from this process's cache alone (no database): None when it is not there."""
    token = _token(request)
    if (entry := principal_cache.cached(token)) is not None:
        return Identity(entry.principal, token, entry.expires_at, entry.version)
    return None


def _token(request: HttpRequest) -> str:
    token, source = presented_credential(request)
    if token is None or (source != "bearer" and not token.startswith(KEY_PREFIX)):
        raise Unauthenticated()
    return token


def _read(token: str) -> tuple[Principal, datetime]:
    if token.startswith(KEY_PREFIX):
        row = api_key_row(key=token)
        if row is None:
            raise Unauthenticated()
        return Principal(account=row.account, via="apikey"), row.expires_at
    session = session_lookup(token=token)
    if session is None:
        raise Unauthenticated()
    return Principal(account=session.account, via="sanctum", session=session), session.expires_at


def remember(identity: Identity, versions: tuple[int, ...]) -> None:
    """Keep a freshly read identity with the version the counter step just returned."""
    if identity.expected_version is None:
        principal_cache.remember(identity.token, identity.principal, identity.expires_at, versions[0])


def authenticate(
    request: HttpRequest, identity: Identity, *, key_allowed: bool = True, session_needs_api_access: bool = True,
    staff_only: bool = False,
) -> Principal:
    """The refusals of 5.3: 401 for a key of a deactivated account or of a group without API
    access, 403 on `/api` for such a session, 403 for a key on an operation a key cannot do.
    `staff_only` (the administration endpoints, 5.5): a key is a 401 whoever holds it, the session
    of an account that is not staff a 403."""
    principal = identity.principal
    account = principal.account
    if staff_only:
        if principal.via == "apikey":
            raise Unauthenticated()
        if not account.is_active:
            raise ApiError(403, DEACTIVATED, code="account_inactive")
        if not account.is_staff:
            raise ApiError(403, NOT_STAFF, code="permission_denied")
        return principal
    if principal.via == "apikey":
        if not account.is_active or not account.group.api_access:
            raise Unauthenticated()
        if not key_allowed:
            raise ApiError(403, KEY_NOT_ALLOWED, code="permission_denied")
        return principal
    if surface_of(request.path) in COMPAT_SURFACES:
        if not account.is_active or not account.group.api_access:
            raise Unauthenticated()
    elif not account.is_active:
        raise ApiError(403, DEACTIVATED, code="account_inactive")
    elif session_needs_api_access and not account.group.api_access:
        raise ApiError(403, NO_API_ACCESS, code="permission_denied")
    return principal
