"""Who a credential belongs to, kept in each process for a few seconds (docs/design.md,
"The hot path").

An entry holds the account and group as read from the database and the account's *version* as
it stood then. The version lives with the counters (Redis, or the Django cache) and moves on
whenever a key is made or revoked, a session ends, or the account is saved; a change to a group
moves the version of each of its accounts (a write per member on a rare change, so that the step
reads one account's keys alone: one Redis Cluster slot, docs/scaling.md). Every request sends the
version it expects to the same atomic counter step that checks its ceilings; when it has moved,
nothing is counted, the entry is dropped and the credential is read afresh. So a revoked key, a
deactivated account or a group without API access is refused at once in every process, while a
warm request makes no database query at all.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.secrets import digest
from gateway.state import per_process
from gateway.state.counters import account_tag

MAX_ENTRIES = 10_000


def account_version_key(account_id: int) -> str:
    return f"authv:{account_tag(account_id)}"


@dataclass(frozen=True)
class Entry:
    principal: object  # accounts.authentication.Principal
    expires_at: datetime  # of the key or session itself
    version: int  # the account's, when it was read
    stored_at: float


_entries: dict[str, Entry] = {}
_lock = threading.Lock()


def cached(token: str) -> Entry | None:
    entry = _entries.get(digest(token))
    if entry is None:
        return None
    if time.monotonic() - entry.stored_at > settings.CREDENTIAL_CACHE_SECONDS or entry.expires_at <= timezone.now():
        forget(token)
        return None
    return entry


def remember(token: str, principal, expires_at: datetime, version: int) -> None:
    if settings.CREDENTIAL_CACHE_SECONDS <= 0:
        return
    with _lock:
        if len(_entries) >= MAX_ENTRIES:
            _entries.clear()
        _entries[digest(token)] = Entry(principal, expires_at, version, time.monotonic())


def forget(token: str) -> None:
    with _lock:
        _entries.pop(digest(token), None)


def forget_all() -> None:
    with _lock:
        _entries.clear()


per_process.register("credentials", reset=forget_all)


def bump_account(account_id: int) -> None:
    _bump_on_commit([account_version_key(account_id)])


def bump_group(group_id: int) -> None:
    """Move the version of every account of the group (those it has as the change is made)."""
    from accounts.models import Account

    members = Account.objects.filter(group_id=group_id).values_list("pk", flat=True)
    _bump_on_commit([account_version_key(pk) for pk in members])


def _bump_on_commit(keys: list[str]) -> None:
    """After the change is committed (a request that reads the old row before then is refreshed
    by its next request, whose versions have moved)."""
    from gateway.state.counters import version_bump

    forget_all()  # this process knows at once
    # robust: with Redis down the change is committed all the same; other processes then see
    # it within CREDENTIAL_CACHE_SECONDS, and the request that made it is not failed afterwards.
    transaction.on_commit(lambda: version_bump(keys), robust=True)


LOGIN_BOOKKEEPING = frozenset({"failed_logins", "locked_until", "last_login"})


def connect_signals() -> None:
    """Move the versions on every change that can alter who a credential is or what it may do."""
    from django.db.models.signals import m2m_changed, post_delete, post_save

    from accounts.models import Account, AccountGroup, ApiKey, SessionToken

    def account_saved(sender, instance, update_fields=None, **kwargs):
        if update_fields and set(update_fields) <= LOGIN_BOOKKEEPING:
            return  # a login's bookkeeping changes nothing a credential may do
        bump_account(instance.pk)

    def credential_changed(sender, instance, **kwargs):
        bump_account(instance.account_id)

    def group_changed(sender, instance, **kwargs):
        bump_group(instance.pk)

    def allowed_models_changed(sender, instance, action, reverse, pk_set, **kwargs):
        if not action.startswith("post_"):
            return
        for group_id in (pk_set or ()) if reverse else (instance.pk,):
            bump_group(group_id)
        if reverse and action == "post_clear":
            forget_all()

    post_save.connect(account_saved, sender=Account, dispatch_uid="authv-account-save", weak=False)
    post_delete.connect(credential_changed, sender=ApiKey, dispatch_uid="authv-key-delete", weak=False)
    post_save.connect(credential_changed, sender=ApiKey, dispatch_uid="authv-key-save", weak=False)
    post_delete.connect(credential_changed, sender=SessionToken, dispatch_uid="authv-session-delete", weak=False)
    post_delete.connect(account_saved, sender=Account, dispatch_uid="authv-account-delete", weak=False)
    post_save.connect(group_changed, sender=AccountGroup, dispatch_uid="authv-group-save", weak=False)
    post_delete.connect(group_changed, sender=AccountGroup, dispatch_uid="authv-group-delete", weak=False)
    m2m_changed.connect(allowed_models_changed, sender=AccountGroup.allowed_models.through,
                        dispatch_uid="authv-group-models", weak=False)
