"""`/api/v1/admin/accounts` and `/api/v1/admin/accounts/{id}`: list, create, read, change and delete
accounts; deactivate (`is_active`), lock and unlock (`locked_until`) and set budgets by PATCH.

A lock is what five failed logins set (spec 3.2): `locked_until` a time refuses the account's logins
until then, null unlocks it and forgets its failed logins, as the console's "unlock" action does. The
lock is login bookkeeping the audit trail leaves out of an account's changes, so a lock or an unlock
made here is written in it as an entry of its own, with the staff actor.
"""

from __future__ import annotations

from auditlog.models import LogEntry
from django.http import HttpResponse

from accounts.models import Account
from admin_api.access import admin_endpoint
from admin_api.account_forms import PROFILE_FIELDS, AccountCreateForm, AccountUpdateForm
from admin_api.account_records import account_record
from admin_api.bodies import check_types, read_fields
from admin_api.filters import id_filter, utc_time
from admin_api.form_writes import deleted, found, saved
from admin_api.pages import paginate, query_parameters
from gateway.web.errors import ApiError, ValidationFailed
from gateway.web.output import respond, timestamp

CREATE_FIELDS = (*PROFILE_FIELDS, "password")
UPDATE_FIELDS = (*PROFILE_FIELDS, "locked_until")
PASSWORD_FIELDS = {"password1": "password", "password2": "password", "usable_password": "password"}
NOT_A_TIME = "An ISO 8601 time with its offset (2030-01-01T00:00:00Z), or null to unlock."


def accounts_listed():
    return Account.objects.select_related("group", "api_key")


@admin_endpoint("GET", "accounts.view_account")
def account_list(request):
    """Filters: `group` (its id), `email` (a part of it, any case)."""
    params = query_parameters(request, ("group", "email"))
    rows = accounts_listed()
    if "group" in params:
        rows = rows.filter(group_id=id_filter(params, "group"))
    if params.get("email"):
        rows = rows.filter(email__icontains=params["email"])
    return respond(paginate(rows, params, account_record).body())


@admin_endpoint("POST", "accounts.add_account")
def account_create(request):
    """A password is optional: without one the account cannot log in with a password (single sign-on,
    or a password set in the console later)."""
    data = read_fields(request, CREATE_FIELDS)
    check_types(Account, data)
    password = data.pop("password", None)
    if password is not None and not isinstance(password, str):
        raise ValidationFailed({"password": ["Must be a string."]})
    sent = {**data, "usable_password": "true" if password else "false"}
    if password:
        sent["password1"] = sent["password2"] = password
    account = saved(request, AccountCreateForm, None, sent, names=PASSWORD_FIELDS)
    return respond(account_record(found(Account, account.pk, "account", accounts_listed())), status=201)


@admin_endpoint("GET", "accounts.view_account")
def account_detail(request, account_id: int):
    return respond(account_record(found(Account, account_id, "account", accounts_listed())))


@admin_endpoint("PATCH", "accounts.change_account")
def account_update(request, account_id: int):
    account = found(Account, account_id, "account", accounts_listed())
    data = read_fields(request, UPDATE_FIELDS)
    lock_sent = "locked_until" in data
    locked_until = _lock_time(data.pop("locked_until", None))
    check_types(Account, data)

    def lock(row: Account) -> None:
        before = row.locked_until if row.is_locked() else None
        row.locked_until = locked_until
        if locked_until is None:
            row.failed_logins = 0
        row.save(update_fields=["locked_until", "failed_logins"])
        if before != locked_until:
            LogEntry.objects.log_create(row, action=LogEntry.Action.UPDATE,
                                        changes={"locked_until": [timestamp(before), timestamp(locked_until)]})

    saved(request, AccountUpdateForm, account, data, after=lock if lock_sent else None)
    return respond(account_record(found(Account, account_id, "account", accounts_listed())))


@admin_endpoint("DELETE", "accounts.delete_account")
def account_delete(request, account_id: int):
    """The account and what is its own (keys, sessions, routines, usage). Deactivating (`is_active`
    false) keeps them; an operator cannot delete their own account here."""
    account = found(Account, account_id, "account")
    if account.pk == request.principal.account.pk:
        raise ApiError(409, "You cannot delete your own account.", code="own_account")
    deleted(request, account, "account")
    return HttpResponse(status=204)


def _lock_time(value):
    if value is None:
        return None
    moment = utc_time(value, assume_utc=False) if isinstance(value, str) else None
    if moment is None:
        raise ValidationFailed({"locked_until": [NOT_A_TIME]})
    return moment
