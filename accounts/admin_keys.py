"""The account page's API key: its preview, dates and last use, and two actions,
"Generate key" and "Revoke", through the same services as the API (accounts/keys.py).

Each action is a page that says what it will do and a POST with the CSRF token, for staff who may
change the account; each is written in the admin's history (LogEntry) with the key's preview,
never the key. The whole key is shown once, on the page that answers the POST that made it
(Cache-Control: no-store), and is never stored, logged or shown again: the gateway keeps its hash
and preview (spec 2.1). A new key replaces the old one at once (spec 3.1): every process refuses
the old one from its next call (accounts/principal_cache.py). As through the API (spec 3.1, 5.2),
a key is generated only for an active account whose group has API access: any other key would be
refused with 401.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.formats import date_format
from django.utils.html import format_html
from django.utils.timezone import localtime
from django.views.decorators.http import require_GET, require_POST

from accounts.keys import api_key_generate, api_key_preview, api_key_revoke
from accounts.models import Account, ApiKey
from gateway.console.styles import BUTTON, DANGER_BUTTON, look

CONFIRM_TEMPLATE = "admin/console_confirm.html"
SHOWN_TEMPLATE = "admin/accounts/account/key_shown.html"
HEAD_CELL = "text-align: left; padding: 0.125rem 1.5rem 0.125rem 0; font-weight: 600"


def shown(moment) -> str:
    return date_format(localtime(moment), "DATETIME_FORMAT")  # the console's one format


def last_used_text(key: ApiKey | None) -> str:
    if key is None:
        return "no key"
    return shown(key.last_used_at) if key.last_used_at else "never"


def key_of(account: Account) -> ApiKey | None:
    try:
        return account.api_key
    except ApiKey.DoesNotExist:
        return None


def key_refusal(account: Account) -> str | None:
    """Why no key may be generated for `account` (the API's rules, spec 5.2), or None."""
    if not account.is_active:
        return "This account is deactivated: a key of it would be refused. Activate the account first."
    if not account.group.api_access:
        return (f"The account's group “{account.group.name}” has no API access: a key would be refused. "
                "Give the group API access first.")
    return None


class AccountKeyAdmin:
    """Mixed into the account admin, before its ModelAdmin base: the key's section, its list
    column and the two actions' pages."""

    def get_urls(self):
        wrap = self.admin_site.admin_view
        return [
            path("<path:object_id>/key/generate/", wrap(require_GET(self.key_generate_page)),
                 name="accounts_account_key_generate"),
            path("<path:object_id>/key/generate/confirm/", wrap(require_POST(self.key_generate_view)),
                 name="accounts_account_key_generate_confirm"),
            path("<path:object_id>/key/revoke/", wrap(require_GET(self.key_revoke_page)),
                 name="accounts_account_key_revoke"),
            path("<path:object_id>/key/revoke/confirm/", wrap(require_POST(self.key_revoke_view)),
                 name="accounts_account_key_revoke_confirm"),
            *super().get_urls(),
        ]

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("api_key", "group")

    def api_key_panel(self, account):
        """The key's preview, dates and last use, with the links to the two actions."""
        if account is None or account.pk is None:
            return "-"
        key = key_of(account)
        generate = reverse("admin:accounts_account_key_generate", args=[account.pk])
        if key is None:
            return format_html('<p class="mb-2">No API key.</p><a class="{}" id="api-key-generate" href="{}">Generate '
                               "key</a>", BUTTON, generate)
        revoke = reverse("admin:accounts_account_key_revoke", args=[account.pk])
        return format_html(
            '<table id="api-key-panel" class="mb-3"><tbody>'
            '<tr><th style="{}">Preview</th><td><code>{}</code></td></tr>'
            '<tr><th style="{}">Created</th><td>{}</td></tr>'
            '<tr><th style="{}">Expires</th><td>{}</td></tr>'
            '<tr><th style="{}">Last used</th><td id="api-key-last-used">{}</td></tr>'
            '</tbody></table><p class="flex gap-2">'
            '<a class="{}" id="api-key-generate" href="{}">Generate a new key</a>'
            '<a class="{}" id="api-key-revoke" href="{}">Revoke</a></p>',
            HEAD_CELL, key.preview, HEAD_CELL, shown(key.created_at), HEAD_CELL, shown(key.expires_at), HEAD_CELL,
            last_used_text(key), BUTTON, generate, DANGER_BUTTON, revoke)

    api_key_panel.short_description = "API key"

    def key_last_used(self, account):
        return last_used_text(key_of(account))

    key_last_used.short_description = "Key last used"
    key_last_used.admin_order_field = "api_key__last_used_at"

    # --- The actions ------------------------------------------------------------------------

    def _account_to_change(self, request, object_id) -> Account:
        account = self.get_object(request, unquote(object_id))
        if account is None:
            raise Http404("No such account.")
        if not self.has_change_permission(request, account):
            raise PermissionDenied
        return account

    def _confirm(self, request, account, *, title: str, lines: list[str], submit: str, action: str,
                 refusal: str | None = None, status: int = 200, danger: bool = False):
        context = {**self.admin_site.each_context(request), "opts": self.opts, "object": account, "look": look(),
                   "danger": danger,
                   "title": title, "lines": lines, "submit": submit, "submit_id": f"{action}-confirm",
                   "action": reverse(f"admin:accounts_account_{action.replace('-', '_')}_confirm", args=[account.pk]),
                   "refusal": refusal, "back": reverse("admin:accounts_account_change", args=[account.pk])}
        return TemplateResponse(request, CONFIRM_TEMPLATE, context, status=status)

    def _generate_question(self, request, account, refusal: str | None, status: int = 200):
        lines = ["The whole key is shown once, on the next page: copy it there. The gateway keeps only its hash "
                 "and a preview."]
        if (old := key_of(account)) is not None:
            lines.insert(0, f"It replaces the current key {old.preview} at once: every client still using that "
                            "one is refused (401) from its next call.")
        return self._confirm(request, account, title=f"Generate an API key for {account.email}", lines=lines,
                             submit="Generate key", action="key-generate", refusal=refusal, status=status)

    def key_generate_page(self, request, object_id):
        """GET: what generating does, and the form that does it."""
        account = self._account_to_change(request, object_id)
        return self._generate_question(request, account, key_refusal(account))

    def key_generate_view(self, request, object_id):
        """POST: a new key, shown whole on the answer and nowhere else."""
        account = self._account_to_change(request, object_id)
        if refusal := key_refusal(account):
            return self._generate_question(request, account, refusal, status=409)
        old = key_of(account)
        issued = api_key_generate(account=account)
        preview = api_key_preview(issued.key)
        self.log_change(request, account, f"Generated a new API key ({preview})"
                                          + (f"; the key {old.preview} stopped working" if old else ""))
        context = {**self.admin_site.each_context(request), "opts": self.opts, "object": account, "look": look(),
                   "title": f"The new API key of {account.email}", "key": issued.key,
                   "preview": preview, "expires_at": shown(issued.expires_at), "replaced": old.preview if old else "",
                   "back": reverse("admin:accounts_account_change", args=[account.pk])}
        response = TemplateResponse(request, SHOWN_TEMPLATE, context)
        response["Cache-Control"] = "no-store"  # the key is on this page: never kept by the browser
        return response

    def _no_key(self, request, account):
        self.message_user(request, f"{account.email} has no API key to revoke.", messages.WARNING)
        return HttpResponseRedirect(reverse("admin:accounts_account_change", args=[account.pk]))

    def key_revoke_page(self, request, object_id):
        """GET: what revoking does, and the form that does it."""
        account = self._account_to_change(request, object_id)
        if (key := key_of(account)) is None:
            return self._no_key(request, account)
        return self._confirm(request, account, title=f"Revoke the API key of {account.email}",
                             lines=[f"The key {key.preview} stops working at once: every client using it is refused "
                                    "(401) from its next call. The account keeps no key until one is generated."],
                             submit="Revoke key", action="key-revoke", danger=True)

    def key_revoke_view(self, request, object_id):
        """POST: the key deleted; every process refuses it from its next call."""
        account = self._account_to_change(request, object_id)
        if (key := key_of(account)) is None:
            return self._no_key(request, account)
        api_key_revoke(account=account)
        self.log_change(request, account, f"Revoked the API key ({key.preview})")
        self.message_user(request, f"The API key {key.preview} of {account.email} was revoked.", messages.SUCCESS)
        return HttpResponseRedirect(reverse("admin:accounts_account_change", args=[account.pk]))
