"""The console's Retry of a failed run: a new run of the same event (or none) and trigger, linked
to the one it retries (routines/run_start.py `retry_run`), queued as any run is. A POST with the
CSRF token, for staff who may change routines (runs themselves are read only), written in the
admin's history of the routine. A run that has not failed, or a paused routine, is refused with
a message, as run-now refuses a paused routine."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.admin.utils import unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseRedirect
from django.urls import path, reverse
from django.utils.html import format_html
from django.views.decorators.http import require_POST

from routines.models import Run
from routines.run_start import retry_run


class RunRetryAdmin:
    """Mixed into the run admin, before its ModelAdmin base."""

    def get_urls(self):
        wrap = self.admin_site.admin_view
        return [path("<path:object_id>/retry/", wrap(require_POST(self.retry_view)), name="routines_run_retry"),
                *super().get_urls()]

    def may_retry(self, request) -> bool:
        return request.user.has_perm("routines.change_routine")

    def retry_view(self, request, object_id):
        if not self.may_retry(request):
            raise PermissionDenied
        run = Run.objects.select_related("routine", "source_event").filter(pk=unquote(object_id)).first()
        if run is None:
            raise Http404("No such run.")
        back = request.GET.get("next") or ""  # the routine's page, when its button was pressed there
        if not back.startswith("/admin/") or "//" in back or "\\" in back:
            back = reverse("admin:routines_run_change", args=[run.pk])
        if run.status != Run.Status.FAILED:
            self.message_user(request, f"Run {run.pk} has not failed ({run.status}): only a failed run is retried.",
                              messages.WARNING)
            return HttpResponseRedirect(back)
        if not run.routine.is_enabled:
            self.message_user(request, "The routine is paused: enable it before running it.", messages.ERROR)
            return HttpResponseRedirect(back)
        retry = retry_run(run)
        LogEntry.objects.log_actions(request.user.pk, [run.routine], CHANGE, single_object=True,
                                     change_message=f"Retried run {run.pk} as run {retry.pk}")
        self.message_user(request, format_html('Run {} is queued: a retry of run {}. <a href="{}">See it</a>.',
                                               retry.pk, run.pk, reverse("admin:routines_run_change",
                                                                         args=[retry.pk])), messages.SUCCESS)
        return HttpResponseRedirect(back)
