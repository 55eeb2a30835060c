"""The console's "Calls": every call of a model surface, newest first, filtered by time, account,
group, model, outcome, status, surface and cache, searched by request ID (exact), an account's
e-mail or a tag (`key=value`: the call's tags, OpenAI's `metadata`); a call's page shows its tags,
the chain tried and, when its group keeps them, the prompt and reply.
Read-only: the gateway writes the calls log (gateway/usage/call_log.py), nobody edits it.

The list never counts the whole table (`show_full_result_count`), and its filters read their
choices from the registry, the accounts and fixed lists, never from the calls (no DISTINCT over a
month of calls); a request ID is looked up exactly, through its index."""

from __future__ import annotations

import re
from datetime import timedelta
from datetime import timezone as dt_timezone
from decimal import Decimal

from django.contrib import admin
from django.utils import formats, timezone
from django.utils.functional import lazy
from django.utils.html import format_html
from unfold.admin import ModelAdmin
from unfold.views import ChangeList

from gateway.console.call_log.chain import captured, chain_table
from gateway.console.fields.money import currency
from gateway.console.usage_reads import parse_tag, with_tag
from gateway.models import CallCapture, CallRecord, Model
from gateway.registry.prices import money, money_text
from gateway.usage.call_log import OWN_SURFACES, SURFACES

REQUEST_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MILLIONTH = Decimal("0.000001")
NONE_ANSWERED = "-"


class WhenFilter(admin.SimpleListFilter):
    """The last hour, day, week or 30 days; an exact range is `?created_at__gte=...&created_at__lt=...`."""

    title = "time"
    parameter_name = "when"
    SPANS = {"1h": ("Last hour", timedelta(hours=1)), "24h": ("Last 24 hours", timedelta(days=1)),
             "7d": ("Last 7 days", timedelta(days=7)), "30d": ("Last 30 days", timedelta(days=30))}

    def lookups(self, request, model_admin):
        return [(key, label) for key, (label, _) in self.SPANS.items()]

    def queryset(self, request, queryset):
        span = self.SPANS.get(self.value())
        return queryset.filter(created_at__gte=timezone.now() - span[1]) if span else queryset


class ModelFilter(admin.SimpleListFilter):
    """The model that answered: the registry's models, or none (the call failed or was refused)."""

    title = "model that answered"
    parameter_name = "model"

    def lookups(self, request, model_admin):
        ids = [f"{server}/{name}" for server, name in Model.objects.values_list("server__name", "name")]
        return [(public_id, public_id) for public_id in sorted(ids)] + [(NONE_ANSWERED, "none answered")]

    def queryset(self, request, queryset):
        value = self.value()
        if value is None:
            return queryset
        return queryset.filter(model="" if value == NONE_ANSWERED else value)


class SurfaceFilter(admin.SimpleListFilter):
    title = "surface"
    parameter_name = "surface"

    def lookups(self, request, model_admin):
        routes: dict[str, list[str]] = {}  # a surface of several routes (Google's API) is one choice
        for route, surface in SURFACES.items():
            routes.setdefault(surface, []).append(route)
        return [(surface, f"{surface} ({first}{', …' if more else ''})")
                for surface, (first, *more) in routes.items()] + [
            (surface, f"{surface} ({what})") for surface, what in OWN_SURFACES.items()]

    def queryset(self, request, queryset):
        return queryset.filter(surface=self.value()) if self.value() else queryset


class StatusFilter(admin.SimpleListFilter):
    """The HTTP status by class; one status exactly: `?status=503`."""

    title = "status"
    parameter_name = "status_class"
    CLASSES = {"2xx": (200, 300), "4xx": (400, 500), "5xx": (500, 600)}

    def lookups(self, request, model_admin):
        return [(key, key) for key in self.CLASSES]

    def queryset(self, request, queryset):
        bounds = self.CLASSES.get(self.value())
        return queryset.filter(status__gte=bounds[0], status__lt=bounds[1]) if bounds else queryset


class CallList(ChangeList):
    """The list without filter or search counts the whole table once already (its paginator's count): that
    count is also the full one, so the header does not offer "(Show all)" when nothing is filtered. Filtered,
    the full count is still not read (`show_full_result_count`)."""

    def get_results(self, request):
        super().get_results(request)
        if not self.filter_params and not self.query:
            self.full_result_count = self.result_count


@admin.register(CallRecord)
class CallRecordAdmin(ModelAdmin):
    # Eight columns fit at 1366 px beside the navigation: the time on two lines, the outcome, code and cache
    # under the status, the time to first token under the latency, fall-throughs under the model, the tags
    # under the surface.
    list_display = ["when", "caller", "surface_and_tags", "answered_by", "answer", "latency", "tokens",
                    "cost_rounded"]
    list_display_links = ["when"]
    list_filter = [WhenFilter, "account", "group", ModelFilter, "outcome", StatusFilter, SurfaceFilter, "cached"]
    list_select_related = ["account"]
    list_per_page = 50
    show_full_result_count = False
    ordering = ["-created_at"]
    search_fields = ["request_id"]
    search_help_text = ("A request ID (exact), an account's e-mail address (or a part of it with @), or a tag "
                        "written key=value (exact).")
    fieldsets = [
        (None, {"fields": ["created_at", "request_id", "account", "group", "surface", "tags_shown"]}),
        ("Models", {"fields": ["model_requested", "model", "cached", "fall_throughs"]}),
        ("Answer", {"fields": ["status", "outcome", "error_code", "latency_ms", "ttft_ms"]}),
        ("Usage", {"fields": ["input_tokens", "output_tokens", "cost"]}),
        ("Chain tried", {"fields": ["chain"]}),
        ("Guardrails", {"fields": ["guard_shown"]}),
    ]
    readonly_fields = ["chain", "cost", "prompt", "reply", "tags_shown", "guard_shown"]

    def get_changelist(self, request, **kwargs):
        return CallList

    def get_fieldsets(self, request, obj=None):
        """The prompt and reply only for a call whose group kept them (and while they are kept)."""
        fieldsets = list(self.fieldsets)
        if obj is not None and _capture_of(obj) is not None:
            fieldsets.append(("Prompt and reply (redacted)", {"fields": ["prompt", "reply"]}))
        return fieldsets

    def get_search_results(self, request, queryset, search_term):
        term = search_term.strip()
        if not term:
            return queryset, False
        if "=" in term:  # a tag (request IDs hold no `=`)
            tag, wrong = parse_tag(term)
            return (queryset.none() if wrong else with_tag(queryset, tag)), False
        if "@" in term:
            return queryset.filter(account__email__icontains=term), False
        if REQUEST_ID.match(term):
            return queryset.filter(request_id=term), False
        return queryset.none(), False

    @admin.display(description="Time (UTC)", ordering="created_at")
    def when(self, call):
        at = call.created_at.astimezone(dt_timezone.utc)  # the console's formats (gateway/settings/formats/)
        return format_html("{}<br><small>{}</small>", formats.time_format(at), formats.date_format(at))

    @admin.display(description="Account", ordering="account__email")
    def caller(self, call):
        return call.account.email if call.account_id else "(no valid credential)"

    @admin.display(description="Surface", ordering="surface")
    def surface_and_tags(self, call):
        """The surface; beneath it the call's tags, each key=value."""
        if not call.tags:
            return call.surface
        return format_html("{}<br><small class='call-tags'>{}</small>", call.surface, _tags_text(call.tags, " · "))

    @admin.display(description="Tags")
    def tags_shown(self, call):
        """Each tag key=value on a line of its own (OpenAI's `metadata`; `user_id` of Anthropic's)."""
        if not call.tags:
            return "(none)"
        return format_html("<span class='call-tags' style='white-space: pre-line'>{}</span>",
                           _tags_text(call.tags, "\n"))

    @admin.display(description="Findings")
    def guard_shown(self, call):
        """What the group's guardrails found, one finding a line: the check, what it found, what was done
        and where (never the text found: the row does not hold it)."""
        if not call.guard:
            return "(none)"
        lines = [f"{f.get('check')} {f.get('entity')}: {f.get('action')}, {f.get('direction')} "
                 f"(text {f.get('index')}, at {f.get('offset')})" for f in call.guard if isinstance(f, dict)]
        return format_html("<span class='call-guard' style='white-space: pre-line'>{}</span>", "\n".join(lines))

    @admin.display(description="Model")
    def answered_by(self, call):
        """The model that answered; the one asked beneath it when another answered (or none did), with the
        models that fell through."""
        notes = []
        if not call.model or call.model_requested not in ("", call.model):
            notes.append(f"asked: {call.model_requested or '(none named)'}")
        if call.fall_throughs:
            notes.append(f"{call.fall_throughs} fell through")
        if not notes:
            return call.model
        return format_html("{}<br><small>{}</small>", call.model or "none answered", " · ".join(notes))

    @admin.display(description="Status", ordering="status")
    def answer(self, call):
        """The status and the outcome; beneath them the code the client got, or that the cache answered."""
        note = call.error_code or ("from the cache" if call.cached else "")
        return format_html("{} <span class='call-outcome' data-outcome='{}'>{}</span>{}", call.status, call.outcome,
                           call.get_outcome_display().lower(), format_html("<br><small>{}</small>", note) if note
                           else "")

    @admin.display(description="Latency", ordering="latency_ms")
    def latency(self, call):
        """From arrival to the last byte; beneath it the time to the model's first byte."""
        first = f"first token {call.ttft_ms:,.0f} ms" if call.ttft_ms is not None else "no first token"
        return format_html("<span style='white-space: nowrap'>{} ms</span><br><small>{}</small>",
                           f"{call.latency_ms:,.0f}", first)

    @admin.display(description="Tokens")
    def tokens(self, call):
        return format_html("<span style='white-space: nowrap'>{} in</span><br><span style='white-space: nowrap'>"
                           "{} out</span>", f"{call.input_tokens:,}", f"{call.output_tokens:,}")

    @admin.display(description="Cost", ordering="cost_units")
    def cost(self, call):
        """Exact (COST_UNITS of the currency), as the usage record's."""
        return f"{money_text(call.cost_units)} {currency()}"

    @admin.display(description=lazy(lambda: f"Cost ({currency()})", str)(), ordering="cost_units")
    def cost_rounded(self, call):
        """In the list, to the millionth; the exact amount in its tooltip."""
        rounded = money(call.cost_units).quantize(MILLIONTH)
        shown = f"<{MILLIONTH}" if call.cost_units and not rounded else f"{rounded:f}"
        return format_html("<span title='{}'>{}</span>", self.cost(call), shown)

    @admin.display(description="Chain tried")
    def chain(self, call):
        return chain_table(call)

    @admin.display(description="Prompt (the request's body)")
    def prompt(self, call):
        capture = _capture_of(call)
        return captured(capture.prompt if capture else "")

    @admin.display(description="Reply")
    def reply(self, call):
        capture = _capture_of(call)
        return captured(capture.reply if capture else "")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


def _tags_text(tags: dict, between: str) -> str:
    return between.join(f"{key}={value}" for key, value in tags.items())


def _capture_of(call: CallRecord) -> CallCapture | None:
    try:
        return call.capture
    except CallCapture.DoesNotExist:
        return None
