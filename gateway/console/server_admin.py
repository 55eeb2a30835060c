"""What the model server admin adds to the registry's fields: each server's health, read
only (gateway/registry/server_health.py), and model discovery for the server just saved.

The list reads the health of the servers on its page in one go (`HealthChangeList`), not once per
row. Discovery runs once the save has committed (the server's answer can take its connect timeout
plus DISCOVERY_TIMEOUT_SECONDS; no transaction is held open meanwhile), and its outcome is an
admin message: a server that does not answer is saved all the same, with a warning; so is one whose
chat path answers 404 or refuses its key (gateway/console/server_check.py).
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.contrib import admin, messages
from django.contrib.admin.views.main import ChangeList
from django.db import transaction
from django.utils.timezone import localtime
from unfold.admin import ModelAdmin

from gateway.console.server_check import chat_route_problem
from gateway.registry import discovery, server_health
from gateway.registry.default_model import chosen_text

logger = logging.getLogger(__name__)

HEALTH_FIELDS = ["last_success", "last_failure", "cooldown"]
UNREADABLE = "unknown: the shared state cannot be read"


class HealthChangeList(ChangeList):
    def get_results(self, request):
        super().get_results(request)
        attach_health(self.result_list)


def attach_health(servers) -> None:
    found = server_health.health_of(server.pk for server in servers)
    for server in servers:
        server._health = found[server.pk]


def health(server) -> server_health.Health:
    if getattr(server, "_health", None) is None:
        attach_health([server])
    return server._health


def shown(moment: datetime) -> str:
    return localtime(moment).strftime("%Y-%m-%d %H:%M:%S %Z")


class ServerHealthAdmin(ModelAdmin):
    """A base for ModelServerAdmin: its health fields and discovery on save."""

    def get_changelist(self, request, **kwargs):
        return HealthChangeList

    def get_readonly_fields(self, request, obj=None):
        fields = list(super().get_readonly_fields(request, obj))
        return fields + HEALTH_FIELDS if obj is not None else fields  # nothing to show before it exists

    @admin.display(description="Last success")
    def last_success(self, server):
        moment = health(server).last_success
        return shown(moment) if moment else "never seen"

    @admin.display(description="Last failure")
    def last_failure(self, server):
        record = health(server)
        if record.last_failure is None:
            return "none seen"
        return f"{shown(record.last_failure)}: {record.failure_cause}" if record.failure_cause \
            else shown(record.last_failure)

    @admin.display(description="Cooldown")
    def cooldown(self, server):
        record = health(server)
        if record.cooldown_until is None:
            return "no" if record.shared else UNREADABLE
        if record.cooling_down:
            return f"until {shown(record.cooldown_until)}"
        return f"ended {shown(record.cooldown_until)}; the next call tries it again"

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        request.held_success = []  # "saved successfully" waits for what the checks say: a warning replaces it
        transaction.on_commit(lambda: discover_saved(self, request, obj))

    def message_user(self, request, message, level=messages.INFO, *args, **kwargs):
        """After a save, the admin's own success message is held until discovery and the chat path's
        check have said whether it stands (`discover_saved`)."""
        held = getattr(request, "held_success", None)
        if held is not None and level == messages.SUCCESS:
            held.append(message)
            return
        super().message_user(request, message, level, *args, **kwargs)


def discover_saved(model_admin: admin.ModelAdmin, request, server) -> None:
    """Discovery for `server`, then a check of its chat path (gateway/console/server_check.py), reported
    as messages; nothing they meet undoes the save. The admin's "saved successfully" is shown only
    when neither found a problem: otherwise the warning says "<server> was saved, but ..." instead."""
    held, request.held_success = getattr(request, "held_success", None) or [], None
    said: list[tuple[int, str]] = []
    if not server.enabled:
        said.append((messages.INFO, f"{server.name} is disabled: model discovery was not run."))
    else:
        said = _discovered(server)
    if not any(level == messages.WARNING for level, _ in said):
        said = [(messages.SUCCESS, message) for message in held] + said
    for level, message in said:
        model_admin.message_user(request, message, level)


def _discovered(server) -> list[tuple[int, str]]:
    try:
        [report] = discovery.discover_models(servers=[server])
    except Exception:  # the server is saved: a surprise here is reported, never a 500
        logger.exception("model discovery after saving server %s failed", server.name)
        return [(messages.WARNING, f"{server.name} was saved, but model discovery failed unexpectedly; "
                                   "try the 'Discover models' action.")]
    said = [(messages.WARNING, f"{server.name} was saved, but model discovery failed: {report.error} "
                               "Run 'Discover models' once it answers.")] if report.error else []
    if problem := chat_route_problem(row=server):  # where chat calls go, nothing answers them
        said.append((messages.WARNING, f"{server.name} was saved, but {problem}"))
    if not report.error:
        said.insert(0, (messages.INFO if problem else messages.SUCCESS, f"Model discovery: {report.summary()}"))
    if report.default_chosen:  # the operator learns where routines and the native chat now go
        said.append((messages.INFO, chosen_text(report.default_chosen)))
    return said
