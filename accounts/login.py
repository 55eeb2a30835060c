"""Login and password checks with the lockout of spec 3.2: five consecutive failures lock the
account for 30 minutes; a success resets the count."""

from __future__ import annotations

import math
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.hashers import make_password
from django.db import transaction
from django.utils import timezone

from accounts.models import Account
from accounts.sessions import IssuedSession, session_create
from gateway.web.errors import ApiError

INVALID_CREDENTIALS = "These credentials do not match our records."


class AccountLocked(ApiError):
    def __init__(self, seconds_left: float) -> None:
        seconds = max(math.ceil(seconds_left), 1)
        minutes = math.ceil(seconds / 60)
        super().__init__(
            423,
            f"Too many failed attempts. The account is locked; try again in {minutes} minute(s).",
            code="account_locked",
            headers={"Retry-After": str(seconds)},
        )


def _check_password_counted(account_id: int, password: str) -> tuple[str, Account | None]:
    """Check a password against a locked row, recording the outcome before anything is raised
    (so a failure is counted even though the caller then refuses)."""
    now = timezone.now()
    with transaction.atomic():
        account = Account.objects.select_for_update().select_related("group").filter(pk=account_id).first()
        if account is None:
            return "unknown", None
        if account.is_locked(now):
            return "locked", account
        if not account.check_password(password):
            account.failed_logins += 1
            if account.failed_logins >= settings.LOGIN_LOCK_AFTER_FAILURES:
                account.failed_logins = 0
                account.locked_until = now + timedelta(seconds=settings.LOGIN_LOCK_SECONDS)
                account.save(update_fields=["failed_logins", "locked_until"])
                return "locked", account
            account.save(update_fields=["failed_logins"])
            return "wrong", account
        account.failed_logins = 0
        account.locked_until = None
        account.last_login = now
        account.save(update_fields=["failed_logins", "locked_until", "last_login"])
        return "ok", account


def _raise_for(outcome: str, account: Account | None) -> Account:
    if outcome == "locked":
        raise AccountLocked((account.locked_until - timezone.now()).total_seconds())
    if outcome != "ok":
        raise ApiError(401, INVALID_CREDENTIALS, code="invalid_credentials")
    return account


def account_authenticate(*, email: str, password: str) -> Account:
    """The account whose e-mail and password these are, with the lockout counted: raises the 401 of
    spec 4.1 (an unknown e-mail as a wrong password), 423 while locked, 403 when deactivated. The API's
    login and the account pages' session login (account_pages/session.py) both sign in through it."""
    account_id = Account.objects.filter(email=email.strip().lower()).values_list("pk", flat=True).first()
    if account_id is None:
        make_password(password)  # spend the same time as a real check: no account enumeration
        raise ApiError(401, INVALID_CREDENTIALS, code="invalid_credentials")
    account = _raise_for(*_check_password_counted(account_id, password))
    if not account.is_active:
        raise ApiError(403, "This account is deactivated.", code="account_inactive")
    return account


def account_login(*, email: str, password: str, remember: bool) -> tuple[Account, IssuedSession]:
    account = account_authenticate(email=email, password=password)
    return account, session_create(account=account, remember=remember)


def password_confirm(*, account: Account, password: str) -> None:
    """Re-check the password of a signed-in account (key generation). Failures count toward the
    lockout, so a stolen session token cannot be used to guess the password."""
    outcome, locked = _check_password_counted(account.pk, password)
    if outcome == "wrong":
        raise ApiError(422, "The password is incorrect.", errors={"password": ["The password is incorrect."]})
    _raise_for(outcome, locked)
