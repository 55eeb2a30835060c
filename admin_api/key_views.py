"""`/api/v1/admin/accounts/{id}/api-key`: generate (POST) and revoke (DELETE) an account's API key, through
the same functions as the account's own endpoints and the console (accounts/keys.py).

The whole key is in the answer to the POST that made it, and nowhere else: the gateway keeps its hash
and preview (spec 2.1). A new key replaces the old one at once, and a revoked key is refused from its
next call in every process: the key's row changing moves the account's credential version
(accounts/principal_cache.py). As through the console, a key is made only for an active account whose
group has API access (spec 5.2): any other key would be refused with 401 (409 says why not).
"""

from __future__ import annotations

from django.http import HttpResponse

from accounts.admin_keys import key_refusal
from accounts.keys import api_key_generate, api_key_preview, api_key_revoke
from accounts.models import Account
from admin_api.access import admin_endpoint, audited
from admin_api.bodies import read_fields
from admin_api.form_writes import found
from gateway.web.errors import ApiError
from gateway.web.output import respond


@admin_endpoint("POST", "accounts.change_account")
def key_generate(request, account_id: int):
    read_fields(request, ())  # no field: an empty body, or {}
    account = found(Account, account_id, "account", Account.objects.select_related("group"))
    if refusal := key_refusal(account):
        raise ApiError(409, refusal, code="key_refused")
    with audited(request):
        issued = api_key_generate(account=account)
    return respond({"api_key": issued.key, "preview": api_key_preview(issued.key), "expires_at": issued.expires_at},
                   status=201)


@admin_endpoint("DELETE", "accounts.change_account")
def key_revoke(request, account_id: int):
    account = found(Account, account_id, "account")
    with audited(request):
        revoked = api_key_revoke(account=account)
    if not revoked:
        raise ApiError(404, "The account has no API key to revoke.", code="not_found")
    return HttpResponse(status=204)
