"""The operator console for routines: routines, runs with their deliveries, the inbox."""

from django import forms
from django.contrib import admin, messages
from django.utils.html import escape
from unfold.admin import ModelAdmin, TabularInline

from gateway.console.audit_trail import audit_trail
from routines.admin_events import payload_html  # also registers the events' pages
from routines.admin_routine import RoutinePageAdmin
from routines.admin_targets import DeliveryTargetsField
from routines.models import Delivery, InboxMessage, LinkedChannel, Routine, Run
from routines.records import schedule_note
from routines.run_start import retry_run
from routines.schedules import routine_next_run, schedule_errors
from routines.targets import target_errors


class RoutineForm(forms.ModelForm):
    """The API's schedule rules: the time zone must be a known one, and a schedule given to a
    `schedule` routine a valid 5-field cron. An empty schedule is allowed, as in the API: the
    routine then runs only by run-now, and the page says so (`RoutineAdmin.schedule_state`). Its
    delivery targets are a list of rows, checked as the API checks them (routines/targets.py)."""

    delivery_targets = DeliveryTargetsField(
        required=False,  # none given: the API's own words say how many (routines/targets.py)
        # the admin shows a help text as markup: the forms' <address>, <url> and <number> are escaped
        help_text=escape("One target per row, one to five: inapp, email:<address>, webhook:https://<url>, "
                         "telegram or whatsapp:<number> (the last two once the owner has linked them). Empty rows "
                         "are left out."))

    def clean(self):
        cleaned = super().clean()
        account = cleaned.get("account") or getattr(self.instance, "account", None)
        if "delivery_targets" in cleaned and account is not None:
            problems = target_errors(account, cleaned["delivery_targets"])
            if problems:
                self.add_error("delivery_targets", problems)
        trigger, schedule = cleaned.get("trigger"), " ".join((cleaned.get("schedule") or "").split())
        timezone = cleaned.get("timezone") or "UTC"
        zone_problems = schedule_errors("* * * * *", timezone)
        if zone_problems and "timezone" in cleaned:
            self.add_error("timezone", zone_problems)
        if trigger == Routine.Trigger.SCHEDULE and "schedule" in cleaned and schedule:
            problems = [p for p in schedule_errors(schedule, timezone) if p not in zone_problems]
            if problems:
                self.add_error("schedule", problems)
        if "schedule" in cleaned and "schedule" not in self.errors:
            cleaned["schedule"] = schedule
        return cleaned


@admin.register(Routine)
@audit_trail
class RoutineAdmin(RoutinePageAdmin, ModelAdmin):
    form = RoutineForm
    list_display = ["name", "account", "trigger", "schedule_state", "is_enabled", "disabled_reason",
                    "consecutive_failures", "last_run_at", "next_run_at"]
    list_filter = ["trigger", "is_enabled", "disabled_reason", "webhook_signature_scheme"]
    search_fields = ["name", "account__email"]
    raw_id_fields = ["account"]
    # The token and the secret are credentials: never shown on the page.
    exclude = ["webhook_secret", "webhook_token"]
    readonly_fields = ["schedule_state", "consecutive_failures", "last_run_at", "next_run_at", "created_at",
                       "updated_at"]

    @admin.display(description="Schedule")
    def schedule_state(self, obj):
        """Its schedule, or for a `schedule` routine without one the note that it runs only by
        run-now (the API's `schedule_note`): an empty cell would not say that the beat never starts it."""
        if obj is None or obj.pk is None:
            return "-"
        note = schedule_note(obj)
        if note:
            return note
        if obj.trigger == Routine.Trigger.SCHEDULE:
            return f"{obj.schedule} ({obj.timezone})"
        return f"None needed ({obj.trigger} trigger)"

    def get_fields(self, request, obj=None):
        """`schedule_state` right after the schedule it explains, not at the end of the page."""
        fields = [name for name in super().get_fields(request, obj) if name != "schedule_state"]
        at = fields.index("schedule") + 1 if "schedule" in fields else len(fields)
        return [*fields[:at], "schedule_state", *fields[at:]]

    def has_add_permission(self, request):  # routines are made through the API (token, secret, limits)
        return False

    def save_model(self, request, obj, form, change):
        if {"trigger", "schedule", "timezone", "is_enabled"} & set(form.changed_data):
            obj.next_run_at = routine_next_run(obj)  # as the API does: the new schedule's next slot
        super().save_model(request, obj, form, change)


class DeliveryInline(TabularInline):
    model = Delivery
    extra = 0
    can_delete = False
    fields = ["target", "status", "attempts", "error", "created_at"]
    readonly_fields = fields

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Run)
class RunAdmin(ModelAdmin):
    """Runs are written by the workers: their pages are for reading (no Save buttons), deleting,
    and the retry action of the list."""

    list_display = ["id", "routine", "trigger", "status", "model", "created_at", "finished_at"]
    list_filter = ["status", "trigger"]
    list_select_related = ["routine"]
    search_fields = ["routine__name", "event_id"]
    inlines = [DeliveryInline]
    readonly_fields = ["routine", "source_event", "event_id", "event_payload", "trigger", "status", "output", "error",
                       "model", "usage", "created_at", "started_at", "answered_at", "finished_at"]
    actions = ["retry_failed_runs"]

    @admin.display(description="Event payload")
    def event_payload(self, run):
        return payload_html(run.source_event)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    @admin.action(description="Retry the selected failed runs")
    def retry_failed_runs(self, request, queryset):
        failed = list(queryset.filter(status=Run.Status.FAILED).select_related("routine", "source_event"))
        for run in failed:
            retry_run(run)
        skipped = queryset.count() - len(failed)
        self.message_user(request, f"{len(failed)} run(s) queued again.", messages.SUCCESS)
        if skipped:
            self.message_user(request, f"{skipped} run(s) skipped: only failed runs are retried.", messages.WARNING)


@admin.register(InboxMessage)
class InboxMessageAdmin(ModelAdmin):
    list_display = ["title", "account", "routine", "created_at", "read_at"]
    search_fields = ["title", "account__email"]
    raw_id_fields = ["account", "routine", "run"]


@admin.register(LinkedChannel)
class LinkedChannelAdmin(ModelAdmin):
    """Linked Telegram chats and WhatsApp numbers; the operator may look and remove, not link."""

    list_display = ["account", "kind", "address", "verified_at", "created_at"]
    list_filter = ["kind"]
    search_fields = ["account__email", "address"]
    # The linking code's hash stays off the page; a channel is linked by its owner only.
    fields = ["account", "kind", "address", "verified_at", "code_expires_at", "code_attempts", "created_at"]
    readonly_fields = fields

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):  # nothing on the page can be changed: no Save
        return False

