"""`/api/v1/admin/routines` and `/api/v1/admin/routines/{id}`: every account's routines, as their owners'
API shows them (routines/records.py: never the secret nor the token), with their account; and pause or
resume one by PATCH `is_enabled`, through the owners' own write (routines/routine_writes.py
`routine_update`: a resumed routine forgets its failures and gets its next run)."""

from __future__ import annotations

from admin_api.access import admin_endpoint, audited
from admin_api.bodies import read_fields
from admin_api.filters import flag_filter, id_filter
from admin_api.form_writes import found
from admin_api.pages import paginate, query_parameters
from gateway.web.errors import ValidationFailed
from gateway.web.output import respond
from routines.models import Routine
from routines.records import routine_record
from routines.routine_writes import routine_update


def admin_routine_record(routine: Routine) -> dict:
    return {**routine_record(routine), "account": routine.account_id, "account_email": routine.account.email}


def routines_listed():
    return Routine.objects.select_related("account")


@admin_endpoint("GET", "routines.view_routine")
def routine_list(request):
    """Filters: `account` (its id), `is_enabled` (true or false)."""
    params = query_parameters(request, ("account", "is_enabled"))
    rows = routines_listed()
    if "account" in params:
        rows = rows.filter(account_id=id_filter(params, "account"))
    if "is_enabled" in params:
        rows = rows.filter(is_enabled=flag_filter(params, "is_enabled"))
    return respond(paginate(rows, params, admin_routine_record).body())


@admin_endpoint("GET", "routines.view_routine")
def routine_detail(request, routine_id: int):
    return respond(admin_routine_record(found(Routine, routine_id, "routine", routines_listed())))


@admin_endpoint("PATCH", "routines.change_routine")
def routine_pause(request, routine_id: int):
    """`{"is_enabled": false}` pauses, `true` resumes; nothing else of another's routine is changed here."""
    routine = found(Routine, routine_id, "routine", routines_listed())
    data = read_fields(request, ("is_enabled",))
    if not isinstance(data.get("is_enabled"), bool):
        raise ValidationFailed({"is_enabled": ["Required: true or false."]})
    with audited(request):
        routine_update(routine=routine, data=data)
    return respond(admin_routine_record(found(Routine, routine_id, "routine", routines_listed())))
