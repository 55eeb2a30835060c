"""The console's audit trail, kept by django-auditlog: who changed what, and when.

The models it follows, and the fields it leaves out or masks, are settings (gateway/settings/audit.py),
registered by `follow` at start-up. It writes one `auditlog_logentry` row per created, changed or deleted
object, with its actor, time, client address and the changed fields before and after. A secret is never
written: the hashes of keys and tokens and the password are left out, and a secret the gateway must keep in
clear (a model server's API key, an MCP server's auth header, a routine's webhook secret and token) is
written as `mask_secret` shows it: set or empty, and that it changed, never a character of it.

- `AuditActorMiddleware` (in CONSOLE_MIDDLEWARE only: the API surfaces never pass through it) gives
  every write of a console request its signed-in operator as the actor; a change made elsewhere (the API,
  a task, `applyconfig`) is written without one.
- `audit_trail` puts an "Audit trail" page beside an admin's objects (templates/admin/
  change_form_object_tools.html links it from each object's page).
- `show_audit_log` replaces auditlog's own list of entries with one in the console's theme.
"""

from __future__ import annotations

import ast
import json

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from auditlog.cid import set_cid
from auditlog.context import set_extra_data
from auditlog.filters import ResourceTypeFilter
from auditlog.middleware import AuditlogMiddleware
from auditlog.mixins import AuditlogHistoryAdminMixin, LogEntryAdminMixin
from auditlog.models import LogEntry
from auditlog.registry import auditlog
from django.apps import apps
from django.contrib import admin
from django.contrib.admin.utils import unquote
from django.contrib.admin.views.main import PAGE_VAR
from django.core.exceptions import FieldDoesNotExist, PermissionDenied
from django.http import Http404
from django.template.response import TemplateResponse
from django.utils.text import capfirst
from unfold.admin import ModelAdmin

from gateway.limits.ratelimit import client_address

MASK = "********"
NO_ACTOR = "no console user"


def follow(models: dict[str, dict]) -> None:
    """Register each model of AUDIT_TRAIL_MODELS (gateway/settings/audit.py) with auditlog: its own columns
    (not its id, not those left out) or only those named, masks and many-to-many fields. Listing the columns
    keeps relations from other models out of an entry (auditlog writes a new group's `accounts` otherwise)."""
    for label, rule in models.items():
        model = apps.get_model(label)
        columns = [f.name for f in model._meta.concrete_fields if not f.primary_key]
        followed = list(rule.get("only") or [name for name in columns if name not in rule.get("leave_out", ())])
        auditlog.register(model, include_fields=followed, mask_fields=list(rule.get("mask", ())),
                          mask_callable=rule.get("mask_callable"), m2m_fields=set(rule.get("m2m", ())))


def mask_secret(value: str) -> str:
    """A secret's value in the log: whether it is set (the same mask whatever it is), never its text."""
    return "" if value in ("", "None") else MASK


def mask_guardrails(value: str) -> str:
    """A group's guardrails in the log: the list as JSON, each item's webhook `secret` written as MASK. auditlog
    hands the value as text (Python's repr of the list); text that does not read as a list is masked whole."""
    try:
        items = ast.literal_eval(value)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return mask_secret(value)
    if not isinstance(items, list):
        return mask_secret(value)
    masked = [{key: (mask_secret(str(item[key])) if key == "secret" else item[key]) for key in item}
              if isinstance(item, dict) else item for item in items]
    return json.dumps(masked, ensure_ascii=False, default=str)


class AuditActorMiddleware(AuditlogMiddleware):
    """auditlog's middleware, also async (no thread hop in the console's async chain), with the client's
    address as the rate limits read it (X-Forwarded-For believed only from TRUSTED_PROXIES). The actor is
    the request's user as a lazy object: it is looked up only if the request writes something followed."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response):
        super().__init__(get_response)
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    @staticmethod
    def _get_remote_addr(request):
        return client_address(request)

    def get_extra_data(self, request):
        return {"remote_addr": self._get_remote_addr(request), "remote_port": None,
                "actor": getattr(request, "user", None)}

    def __call__(self, request):
        if iscoroutinefunction(self):
            return self.__acall__(request)
        set_cid(request)
        with set_extra_data(context_data=self.get_extra_data(request)):
            return self.get_response(request)

    async def __acall__(self, request):
        set_cid(request)
        with set_extra_data(context_data=self.get_extra_data(request)):
            return await self.get_response(request)


def field_label(entry: LogEntry, field: str) -> str:
    """The field's name as its form labels it ("API key"), not auditlog's ("Api key")."""
    try:
        return str(capfirst(entry.content_type.model_class()._meta.get_field(field).verbose_name))
    except (AttributeError, FieldDoesNotExist):
        return field


def change_rows(entry: LogEntry) -> list[tuple[str, str, str]]:
    """An entry's changes as (field, before, after); a many-to-many change as (field, added/removed, objects)."""
    rows = []
    for field, change in sorted(entry.changes_dict.items()):
        name = field_label(entry, field)
        if isinstance(change, dict) and change.get("type") == "m2m":
            rows.append((name, str(change.get("operation", "")), ", ".join(map(str, change.get("objects", [])))))
        elif field == "password":
            rows.append((name, "***", "***"))
        else:
            before, after = ("" if value in (None, "None") else str(value) for value in (list(change) + ["", ""])[:2])
            rows.append((name, before, after))
    return rows


def who(entry: LogEntry) -> str:
    return entry.actor_email or (str(entry.actor) if entry.actor_id else NO_ACTOR)


class AuditTrailMixin(AuditlogHistoryAdminMixin):
    """auditlog's per-object page (`<object>/auditlog/`), in the console's theme."""

    auditlog_history_per_page = 25
    show_auditlog_history_link = False  # the object's page links it; no extra column in the list

    def auditlog_history_view(self, request, object_id, extra_context=None):
        obj = self.get_object(request, unquote(object_id))
        if obj is None:
            raise Http404("No such object.")
        if not self.has_view_permission(request, obj):
            raise PermissionDenied
        entries = LogEntry.objects.get_for_object(obj).select_related("actor").order_by("-timestamp", "-pk")
        paginator = self.get_paginator(request, entries, self.auditlog_history_per_page)
        page = paginator.get_page(request.GET.get(PAGE_VAR, 1))
        context = {
            **self.admin_site.each_context(request),
            "title": f"Audit trail: {obj}",
            "subtitle": None,
            "object": obj,
            "opts": self.model._meta,
            "module_name": capfirst(self.model._meta.verbose_name_plural),
            "rows": [{"entry": entry, "who": who(entry), "changes": change_rows(entry)} for entry in page],
            "page_obj": page,
            "page_var": PAGE_VAR,
            **(extra_context or {}),
        }
        return TemplateResponse(request, "admin/audit_trail.html", context)


def audit_trail(admin_class):
    """Class decorator (under `@admin.register`): the admin's objects get their audit trail page."""
    return type(admin_class.__name__, (AuditTrailMixin, admin_class),
                {"__module__": admin_class.__module__, "__doc__": admin_class.__doc__})


class AuditLogAdmin(LogEntryAdminMixin, ModelAdmin):
    """Every entry, newest first: when, what, the change, who. Read only."""

    date_hierarchy = "timestamp"
    list_select_related = ["content_type", "actor"]
    list_display = ["created", "resource_url", "action", "msg_short", "who"]
    list_filter = ["action", ResourceTypeFilter, "timestamp"]
    search_fields = ["object_repr", "changes", "actor_email"]
    readonly_fields = ["created", "who", "resource_url", "action", "remote_addr", "msg"]
    fieldsets = [(None, {"fields": ["created", "who", "remote_addr", "resource_url", "action"]}),
                 ("Changes", {"fields": ["msg"]})]

    @admin.display(description="Who", ordering="actor_email")
    def who(self, entry):
        return self.user_url(entry) if entry.actor_id else who(entry)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def get_queryset(self, request):
        self.request = request  # LogEntryAdminMixin's links read it
        return super().get_queryset(request)


def show_audit_log(site: admin.AdminSite) -> None:
    """The audit log's list in the console's theme, in place of auditlog's own admin."""
    if site.is_registered(LogEntry):
        site.unregister(LogEntry)
    site.register(LogEntry, AuditLogAdmin)
