"""The operator console for routines: routines, runs with their deliveries, the inbox."""

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.utils.html import escape, format_html_join
from unfold.admin import ModelAdmin, TabularInline
from unfold.widgets import UnfoldAdminSelectWidget

from gateway.console.audit_trail import audit_trail
from gateway.console.styles import look
from routines.admin_events import payload_html  # also registers the events' pages
from routines.admin_retry import RunRetryAdmin
from routines.admin_routine import RoutinePageAdmin
from routines.admin_run_look import kept_lines, retry_button, retry_links, status_badge
from routines.admin_secret import RoutineSecretAdmin
from routines.admin_targets import DeliveryTargetsField
from routines.models import Delivery, InboxMessage, LinkedChannel, Routine, Run
from routines.records import schedule_note
from routines.routine_model import default_label, model_choices, model_errors
from routines.run_start import retry_run
from routines.schedules import routine_next_run, schedule_errors
from routines.targets import target_errors


class RoutineForm(forms.ModelForm):
    """The API's schedule rules: the time zone must be a known one, and a schedule given to a
    `schedule` routine a valid 5-field cron. An empty schedule is allowed, as in the API: the
    routine then runs only by run-now, and the schedule's help text says so (the list, in its
    Schedule column). Its delivery targets are a list of rows, checked as the API checks them
    (routines/targets.py); its model is one the owner may use, as the API checks it."""

    delivery_targets = DeliveryTargetsField(
        required=False,  # none given: the API's own words say how many (routines/targets.py)
        # the admin shows a help text as markup: the forms' <address>, <url> and <number> are escaped
        help_text=escape("One target per row, one to five: inapp, email:<address>, webhook:https://<url>, "
                         "telegram or whatsapp:<number> (the last two once the owner has linked them). Empty rows "
                         "are left out."))

    model = forms.ChoiceField(
        required=False, label="Model", widget=UnfoldAdminSelectWidget,  # the theme's look, as its own fields have
        help_text="The chat models and aliases the routine's owner may use (its account group's). None: the "
                  "default model.")

    def __init__(self, *args, **kwargs):
        """The model is picked from those the owner may use; a model it may no longer use stays
        shown, marked, until another is picked (saving it again is refused, as the API refuses it)."""
        super().__init__(*args, **kwargs)
        account = getattr(self.instance, "account", None) if self.instance.account_id else None
        if "model" not in self.fields or account is None:
            return
        choices = [("", default_label(account)), *model_choices(account)]
        current = self.instance.model
        if current and current not in {value for value, _ in choices}:
            choices.append((current, f"{current} (not usable by this owner)"))
        self.fields["model"].choices = choices
        if "schedule" in self.fields:
            note = schedule_note(self.instance)
            self.fields["schedule"].help_text = (
                "5-field cron, for the schedule trigger, in the routine's time zone."
                + (f" {note}" if note else ""))

    def clean_model(self):
        model = self.cleaned_data.get("model") or ""
        account = getattr(self.instance, "account", None) if self.instance.account_id else None
        if model and account is not None and (problems := model_errors(account, model)):
            raise forms.ValidationError(problems)
        return model

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
class RoutineAdmin(RoutineSecretAdmin, RoutinePageAdmin, ModelAdmin):
    form = RoutineForm
    change_form_outer_before_template = "admin/routines/routine/model_note.html"
    list_display = ["name", "account", "trigger", "schedule_state", "is_enabled", "disabled_reason",
                    "consecutive_failures", "last_run_at", "next_run_at"]
    list_filter = ["trigger", "is_enabled", "disabled_reason", "webhook_signature_scheme"]
    list_select_related = ["account"]
    search_fields = ["name", "account__email"]
    # The token and the secret are credentials: never shown on the page.
    exclude = ["webhook_secret", "webhook_token"]
    # The owner is shown by name, linked to its page, not changed here: the targets, the model and
    # the limits were checked against it (a routine is made by its owner, through the API).
    readonly_fields = ["account", "consecutive_failures", "last_run_at", "next_run_at", "created_at", "updated_at"]

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
        """The owner first: the rest of the page (targets, model) is about what it may do."""
        fields = [name for name in super().get_fields(request, obj) if name != "account"]
        return ["account", *fields]

    def change_view(self, request, object_id, form_url="", extra_context=None):
        """The console's look for the notice above the form (a routine with no model to run with)."""
        return super().change_view(request, object_id, form_url, {**(extra_context or {}), "look": look()})

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
class RunAdmin(RunRetryAdmin, ModelAdmin):
    """Runs are written by the workers: their pages are for reading (no Save buttons), deleting,
    and retrying a failed one (its button, or the list's action)."""

    list_display = ["id", "routine", "trigger", "status_label", "model", "created_at", "finished_at"]
    list_filter = ["status", "trigger"]
    list_select_related = ["routine"]
    search_fields = ["routine__name", "event_id"]
    inlines = [DeliveryInline]
    # the page's rows, each once: the status, output and error as drawn here, not also as stored
    fields = readonly_fields = ["routine", "source_event", "event_id", "event_payload", "trigger", "status_label",
                                "retries", "output_text", "error_text", "model", "usage", "created_at", "started_at",
                                "answered_at", "finished_at"]
    actions = ["retry_failed_runs"]

    @admin.display(description="Status", ordering="status")
    def status_label(self, run):
        return status_badge(run)

    @admin.display(description="Retry")
    def retries(self, run):
        """Its Retry button when it failed, and the runs it is tied to by a retry."""
        parts = [part for part in (retry_button(run), retry_links(run)) if part]
        if not parts:
            return "-"
        return format_html_join(" ", '<span class="inline-flex items-center gap-3">{}</span>', ((p,) for p in parts))

    @admin.display(description="Output")
    def output_text(self, run):
        return kept_lines(run.output)

    @admin.display(description="Error")
    def error_text(self, run):
        return kept_lines(run.error, "run-error-text")

    @admin.display(description="Event payload")
    def event_payload(self, run):
        return payload_html(run.source_event)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    @admin.action(description="Retry the selected failed runs")
    def retry_failed_runs(self, request, queryset):
        if not self.may_retry(request):
            raise PermissionDenied
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

