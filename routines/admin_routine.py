"""What the routine's console page adds to its fields: the webhook URL, masked, with
"Copy" and "Show"; "Run now"; the last runs.

The webhook URL is a secret (spec 4.5: the token is its last segment): the page holds only its
masked form. "Copy" and "Show" fetch the whole URL with a POST (CSRF token in its header) from a view
for staff who may change the routine, answered with `Cache-Control: no-store` and never written to a
log (the request log has the path, which holds the routine's id only). "Run now" posts the page's
form to a view that starts a run through the API's own service (routines/routine_writes.py
`routine_run_now`: a paused routine is refused, in the same words) and records it in the admin's
history.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseRedirect, JsonResponse
from django.urls import path, reverse
from django.utils.formats import date_format
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator
from django.utils.timezone import localtime
from django.views.decorators.http import require_POST

from gateway.console.styles import BUTTON, HEAD_ROW, LINK, ROW, TABLE, TABLE_BOX
from gateway.web.errors import ApiError
from routines.admin_events import refused_events_html
from routines.admin_run_look import retry_button, run_link, status_badge
from routines.models import Routine, Run
from routines.routine_model import model_note
from routines.routine_writes import routine_run_now
from routines.views import webhook_url

LAST_RUNS = 10  # shown on the routine's page; the runs' list has them all
TOKEN_SHOWN = 6  # of the token's 48 hex characters, this many are shown before the mask
ERROR_CHARS = 300
# the Webhook section: its URL, its signature (routines/admin_secret.py), the events refused for it
WEBHOOK_FIELDS = ["webhook", "webhook_secret_state", "refused_events"]


def shown(moment) -> str:
    return date_format(localtime(moment), "DATETIME_FORMAT") if moment else "-"  # the console's one format


def _error_row(run: Run, back: str):
    """A failed run's error (its lines kept) and its Retry button, on a row of its own under the
    run's (the table is as wide as the page's field)."""
    if not run.error:
        return ""
    return format_html('<tr class="run-error"><td colspan="5" class="px-3 pb-2"><div class="flex gap-3 items-start">'
                       '<div class="grow text-red-700 dark:text-red-400" style="white-space: pre-wrap; '
                       'word-break: break-word">{}</div>{}</div></td></tr>',
                       Truncator(run.error).chars(ERROR_CHARS), retry_button(run, back=back))


def _error_row_read_only(run: Run):
    """The error row for staff who may not change the routine: no Retry."""
    if not run.error:
        return ""
    return format_html('<tr class="run-error"><td colspan="5" class="px-3 pb-2 text-red-700 dark:text-red-400" '
                       'style="white-space: pre-wrap; word-break: break-word">{}</td></tr>',
                       Truncator(run.error).chars(ERROR_CHARS))


def _run_cell(run: Run):
    """The run's link, and the run it retries, if any."""
    link = format_html('<a class="{}" href="{}">{}</a>', LINK, reverse("admin:routines_run_change", args=[run.pk]),
                       f"Run {run.pk}")
    if not run.retry_of_id:
        return link
    return format_html('{}<div class="text-xs run-retry-of">retry of {}</div>', link, run_link(run.retry_of_id))


def masked_webhook_url(request, routine: Routine) -> str:
    """The URL with all but the first characters of its token hidden."""
    url = webhook_url(request, routine)
    return url[: len(url) - len(routine.webhook_token) + TOKEN_SHOWN] + "•" * 12


class RoutinePageAdmin:
    """Mixed into the routine admin, before its ModelAdmin base."""

    class Media:
        js = ["routines/webhook_url.js"]

    def get_urls(self):
        wrap = self.admin_site.admin_view
        return [
            path("<path:object_id>/run-now/", wrap(require_POST(self.run_now_view)), name="routines_routine_run_now"),
            path("<path:object_id>/webhook-url/", wrap(require_POST(self.webhook_url_view)),
                 name="routines_routine_webhook_url"),
            *super().get_urls(),
        ]

    def get_object(self, request, object_id, from_field=None):
        """The routine, with what its page's fields need from the request (the admin calls them with
        the routine alone): the request, for the URL's host, and whether it may be changed."""
        routine = super().get_object(request, object_id, from_field)
        if routine is not None:
            routine.page_request = request
            routine.page_may_change = self.has_change_permission(request, routine)
            routine.page_model_note = model_note(routine)  # shown above the form when it cannot run
        return routine

    def get_readonly_fields(self, request, obj=None):
        return [*super().get_readonly_fields(request, obj), *WEBHOOK_FIELDS, "run_now", "last_runs"]

    def get_fieldsets(self, request, obj=None):
        """The routine's own fields, then its webhook and its runs, each a section of its own (a
        staff member who may only view routines gets the masked URL without its buttons)."""
        mine = {*WEBHOOK_FIELDS, "run_now", "last_runs"}
        fields = [name for name in self.get_fields(request, obj) if name not in mine]
        if obj is None:
            return [(None, {"fields": fields})]
        may_change = self.has_change_permission(request, obj)
        return [(None, {"fields": fields}),
                ("Webhook", {"fields": WEBHOOK_FIELDS, "description": "Anyone who has the URL can start the routine "
                             "(and, when it is signed, who also has its secret): it is masked here; Copy and Show "
                             "fetch it whole." if may_change else "Anyone who has the URL can start the routine."}),
                ("Runs", {"fields": ["run_now", "last_runs"] if may_change else ["last_runs"]})]

    def webhook(self, routine):
        if routine is None or routine.pk is None:
            return "-"
        request = getattr(routine, "page_request", None)
        masked = masked_webhook_url(request, routine) if request is not None else "…" + "•" * 12
        if not getattr(routine, "page_may_change", False):
            return format_html('<code class="webhook-url-text">{}</code>', masked)
        url = reverse("admin:routines_routine_webhook_url", args=[routine.pk])
        return format_html(
            '<span class="webhook-url flex flex-wrap gap-2 items-center" data-webhook-url="{}">'
            '<code class="webhook-url-text break-all">{}</code>'
            '<button type="button" class="{} webhook-url-copy">Copy</button>'
            '<button type="button" class="{} webhook-url-show">Show</button></span>', url, masked, BUTTON, BUTTON)

    webhook.short_description = "Webhook URL"

    def refused_events(self, routine):
        if routine is None or routine.pk is None:
            return "-"
        return refused_events_html(routine)

    refused_events.short_description = "Refused events"

    def run_now(self, routine):
        if routine is None or routine.pk is None:
            return "-"
        url = reverse("admin:routines_routine_run_now", args=[routine.pk])
        note = "" if routine.is_enabled else " The routine is paused: enable it first."
        return format_html('<button type="submit" class="{}" id="run-now" formaction="{}" formmethod="post" '
                           'formnovalidate>Run now</button><div class="help mt-2">Queues a run without an event, as '
                           '<code>POST /api/v1/routines/{}/run-now</code> does; unsaved changes on this page are '
                           'not saved.{}</div>', BUTTON, url, routine.pk, note)

    run_now.short_description = "Run now"

    def last_runs(self, routine):
        """The last runs, newest first: each named and linked, its trigger, status, model, error, times."""
        if routine is None or routine.pk is None:
            return "-"
        runs = list(routine.runs.order_by("-id")[:LAST_RUNS])
        if not runs:
            return "No run yet."
        back = reverse("admin:routines_routine_change", args=[routine.pk]) if getattr(
            routine, "page_may_change", False) else None
        rows = format_html_join("", '<tr data-run="{}" class="run-{} {}"><td class="whitespace-nowrap">{}</td>'
                                    '<td>{}</td><td>{}</td><td>{}</td><td class="whitespace-nowrap">{}</td></tr>{}',
                                ((run.pk, run.status, ROW, _run_cell(run), status_badge(run), run.trigger,
                                  run.model or "-", shown(run.finished_at),
                                  _error_row(run, back) if back else _error_row_read_only(run)) for run in runs))
        total = routine.runs.count()
        every = reverse("admin:routines_run_changelist") + f"?routine__id__exact={routine.pk}"
        return format_html('<div class="{}"><table id="last-runs" class="{}"><thead><tr class="{}"><th>Run</th>'
                           "<th>Status</th><th>Trigger</th><th>Model</th><th>Ended</th></tr></thead>"
                           '<tbody>{}</tbody></table></div><p class="mt-2"><a class="{}" href="{}">All {} run(s) of '
                           "this routine</a></p>", TABLE_BOX, TABLE, HEAD_ROW, rows, LINK, every, total)

    last_runs.short_description = "Last runs"

    # --- The views ----------------------------------------------------------------------------

    def _routine_to_change(self, request, object_id) -> Routine:
        routine = self.get_object(request, unquote(object_id))
        if routine is None:
            raise Http404("No such routine.")
        if not self.has_change_permission(request, routine):
            raise PermissionDenied
        return routine

    def run_now_view(self, request, object_id):
        routine = self._routine_to_change(request, object_id)
        back = HttpResponseRedirect(reverse("admin:routines_routine_change", args=[routine.pk]))
        try:
            run: Run = routine_run_now(routine=routine)
        except ApiError as refusal:  # a paused routine, refused as the API refuses it
            self.message_user(request, refusal.message, messages.ERROR)
            return back
        self.log_change(request, routine, f"Started run {run.pk} now")
        self.message_user(request, format_html('Run {} of {} is queued: <a href="{}">see it</a>.', run.pk,
                                               routine.name, reverse("admin:routines_run_change", args=[run.pk])),
                          messages.SUCCESS)
        return back

    def webhook_url_view(self, request, object_id):
        routine = self._routine_to_change(request, object_id)
        response = JsonResponse({"url": webhook_url(request, routine)})
        response["Cache-Control"] = "no-store"
        return response
