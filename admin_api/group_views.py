"""`/api/v1/admin/groups` and `/api/v1/admin/groups/{id}`: what the operator allows per group (spec 1,
8.4, 8.5): API access, allowed models and aliases, token quotas, budgets, remote servers, attachments per
message, the response cache, the calls' capture, guardrails and file storage, through the console's group
form (accounts/admin.py `AccountGroupForm`).

A ceiling or budget of -1 (or null) is none. `guardrails` is the list of checks as the configuration
file writes it; a webhook's `secret` in it is write-only, as on the console's page: never shown, kept
for the same url when an item leaves it out, cleared by `"secret": ""`.
"""

from __future__ import annotations

import json

from django.http import HttpResponse

from accounts.admin import AccountGroupForm
from accounts.admin_guardrails import without_secrets
from accounts.models import AccountGroup
from admin_api.access import admin_endpoint
from admin_api.account_records import money
from admin_api.bodies import check_types, read_fields
from admin_api.form_writes import deleted, found, saved
from admin_api.pages import paginate, query_parameters
from gateway.console.fields.money import BUDGET_FIELDS
from gateway.web.errors import ValidationFailed
from gateway.web.output import respond

GROUP_FIELDS = tuple(AccountGroupForm.base_fields)


def group_record(group: AccountGroup) -> dict:
    return {
        "id": group.pk,
        **{name: getattr(group, name) for name in GROUP_FIELDS
           if name not in ("allowed_models", "allowed_aliases", "guardrails", *BUDGET_FIELDS)},
        "allowed_models": sorted(model.pk for model in group.allowed_models.all()),
        "allowed_aliases": sorted(alias.pk for alias in group.allowed_aliases.all()),
        **{name: money(getattr(group, name)) for name in BUDGET_FIELDS},
        "guardrails": without_secrets(group.guardrails),
        "created_at": group.created_at,
    }


def groups_listed():
    return AccountGroup.objects.prefetch_related("allowed_models", "allowed_aliases")


def _sent(request) -> dict:
    data = read_fields(request, GROUP_FIELDS)
    check_types(AccountGroup, data)
    if "guardrails" in data:
        if not isinstance(data["guardrails"], list):
            raise ValidationFailed({"guardrails": ["Must be a list of checks."]})
        data["guardrails"] = json.dumps(data["guardrails"])  # the form reads YAML, and JSON is YAML
    return data


@admin_endpoint("GET", "accounts.view_accountgroup")
def group_list(request):
    params = query_parameters(request)
    return respond(paginate(groups_listed(), params, group_record).body())


@admin_endpoint("POST", "accounts.add_accountgroup")
def group_create(request):
    group = saved(request, AccountGroupForm, None, _sent(request))
    return respond(group_record(found(AccountGroup, group.pk, "group", groups_listed())), status=201)


@admin_endpoint("GET", "accounts.view_accountgroup")
def group_detail(request, group_id: int):
    return respond(group_record(found(AccountGroup, group_id, "group", groups_listed())))


@admin_endpoint("PATCH", "accounts.change_accountgroup")
def group_update(request, group_id: int):
    group = found(AccountGroup, group_id, "group")
    saved(request, AccountGroupForm, group, _sent(request))
    return respond(group_record(found(AccountGroup, group_id, "group", groups_listed())))


@admin_endpoint("DELETE", "accounts.delete_accountgroup")
def group_delete(request, group_id: int):
    """A group that still has accounts is not deleted (409): move them first."""
    deleted(request, found(AccountGroup, group_id, "group"), "group")
    return HttpResponse(status=204)
