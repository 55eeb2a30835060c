"""Who may call the administration API, and the audit trail's actor of what it changes.

`admin_endpoint` is the endpoint wrapper of every view here (accounts/endpoints.py) with the staff rule:
a staff account's session token only. An API key is refused with 401 whoever holds it (spec 5.5: the
administration endpoints accept session tokens only), the session of an account that is not staff with
403. The staff account needs no API access of its group: it administers the gateway, it calls no model.
Then the console's own permission for what the view does (`accounts.change_account`, ...): a staff
account the console lets only view accounts may only read them here (403 otherwise); a superuser has
every permission. It is read from the database on each request, not from the credential cache, since a
change of permissions moves no credential version.

`audited` gives the writes made inside it the calling staff account as their actor in the audit trail
(django-auditlog): the console's middleware does that for the console, and the API surfaces never pass
through it.
"""

from __future__ import annotations

from contextlib import contextmanager
from functools import wraps

from auditlog.context import set_actor
from django.db import transaction

from accounts.endpoints import STAFF, endpoint
from accounts.models import Account
from gateway.limits.ratelimit import client_address
from gateway.web.errors import ApiError


def admin_endpoint(method: str, permission: str):
    """`permission`: the console's, as `app_label.codename`, that the caller's account must have."""
    def decorate(view):
        @wraps(view)
        def permitted(request, *args, **kwargs):
            account = Account.objects.filter(pk=request.principal.account.pk).first()
            if account is None or not account.has_perm(permission):
                raise ApiError(403, f"Your account lacks the console's permission {permission}.",
                               code="permission_denied")
            return view(request, *args, **kwargs)
        return endpoint(method, auth=STAFF, session_needs_api_access=False)(permitted)
    return decorate


@contextmanager
def audited(request):
    """One transaction whose audited writes name the staff account and its address."""
    with set_actor(request.principal.account, remote_addr=client_address(request)), transaction.atomic():
        yield
