"""The operator console's Batches: every account's batches (it is the operator's console: another account's batch
is shown as any), newest first, filtered by status and kind, searched by id (exact) or an account's e-mail, each
with its progress (lines ended of all) and its counts, read for a page of the list in one query
(batches/progress.py `counts_of`), never one per row. A batch's page shows its fields, its counts, its files (on
the Files page) and its lines' outcomes, 100 a page.

Nothing is edited here: a batch is made through the API, and its lines are its input. What staff may do is
cancel one (its page's button, the list's action), as its owner may: batches/finish.py `cancel`, for staff who may
change batches, written in the admin's history, the message saying what happened to each."""

from __future__ import annotations

from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponseRedirect
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_POST
from unfold.admin import ModelAdmin, TabularInline
from unfold.views import ChangeList

from batches import admin_look as look
from batches.finish import cancel
from batches.models import Batch, BatchLine
from batches.progress import counts, counts_of

Status = Batch.Status
LINES_PER_PAGE = 100
# who runs it: a worker of ours (its hold), or a cloud's own batch API it was forwarded to; why its lines wait
RUNNING = ["runner", "runner_until", "forwarded_to", "upstream_id", "waiting_for"]
TIMES = ["in_progress_at", "finalizing_at", "completed_at", "failed_at", "expired_at", "cancelling_at", "cancelled_at"]


def cancelled(batch: Batch) -> tuple[bool, str]:
    """Cancel `batch` as its owner would, and what happened, in words: whether it moved to cancelling."""
    before = batch.status
    after = cancel(batch).status
    if before in look.CANCELLABLE and after == Status.CANCELLING:
        return True, (f"Batch {batch.pk} is cancelling: the lines running now end (and are billed), the others are "
                      "cancelled.")
    if after == Status.CANCELLING:
        return False, f"Batch {batch.pk} is already being cancelled."
    if after == Status.FINALIZING:
        return False, f"Batch {batch.pk} is finalizing: every line has ended, none is left to cancel."
    if batch.ended:
        return False, f"Batch {batch.pk} has already ended ({after}): nothing to cancel."
    return False, f"Batch {batch.pk} was not cancelled: it is {after} now."


class BatchList(ChangeList):
    """The page's counts, read once for all its batches."""

    def get_results(self, request):
        super().get_results(request)
        self.result_list = list(self.result_list)
        found = counts_of([batch.pk for batch in self.result_list])
        for batch in self.result_list:
            batch.page_counts = found[batch.pk]


class BatchLineInline(TabularInline):
    """The lines' outcomes, in input order, 100 a page (the theme's paginated inline: `?lines-page=2`); their
    bodies and answers are not read for it."""

    model = BatchLine
    verbose_name, verbose_name_plural = "line", "lines"
    fields = readonly_fields = ["index", "custom_id", "outcome", "status_code", "ended_at"]
    ordering = ["index"]
    per_page = LINES_PER_PAGE
    hide_title = True  # a line's name over each row: its index and custom_id are in the row already
    extra = 0
    can_delete = False

    @admin.display(description="Status")
    def outcome(self, line: BatchLine):
        return look.line_badge(line)

    def get_queryset(self, request):
        return super().get_queryset(request).defer("body", "result")

    def has_view_permission(self, request, obj=None):  # whoever may see the batch sees its lines
        return request.user.has_perm("batches.view_batch")

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Batch)
class BatchAdmin(ModelAdmin):
    # Seven columns within 1366 px beside the sidebar: the account under the id, the kind under the endpoint, the
    # two counts in one column, each time above its date (as the Calls list writes them).
    list_display = ["batch_and_account", "endpoint_and_kind", "status_label", "progress", "outcomes", "created",
                    "expires"]
    list_display_links = ["batch_and_account"]
    list_filter = ["status", "kind"]
    list_select_related = ["account"]
    list_per_page = 50
    ordering = ["-created_at"]
    search_fields = ["=id", "account__email"]
    search_help_text = "A batch's id (exact), or a part of its account's e-mail address."
    actions = ["cancel_batches"]
    inlines = [BatchLineInline]
    readonly_fields = ["id", "account", "kind", "endpoint", "status_label", "cancel_button", "progress",
                       "lines_counted", "api_counts", "created_at", "expires_at", "completion_window", "metadata",
                       "input_file_link", "output_file_link", "error_file_link", *TIMES, "errors_shown",
                       *RUNNING]

    def get_changelist(self, request, **kwargs):
        return BatchList

    def get_urls(self):
        wrap = self.admin_site.admin_view
        return [path("<path:object_id>/cancel/", wrap(require_POST(self.cancel_view)), name="batches_batch_cancel"),
                *super().get_urls()]

    def get_object(self, request, object_id, from_field=None):
        """The batch, with its counts read once for its page's fields."""
        batch = super().get_object(request, object_id, from_field)
        if batch is not None:
            batch.page_counts = counts(batch)
        return batch

    def get_fieldsets(self, request, obj=None):
        """Its status and progress first (with Cancel while it can be, for staff who may), why it failed, its
        files, its times, then who runs it."""
        may_cancel = obj is not None and obj.status in look.CANCELLABLE and self.has_cancel_permission(request)
        first = ["id", "account", "kind", "endpoint", "status_label", *(["cancel_button"] if may_cancel else []),
                 "progress", "lines_counted", "api_counts", "created_at", "expires_at", "completion_window",
                 "metadata"]
        failed = [("Why it failed", {"fields": ["errors_shown"]})] if obj is not None and obj.errors else []
        return [(None, {"fields": first}), *failed,
                ("Files", {"fields": ["input_file_link", "output_file_link", "error_file_link"]}),
                ("Times", {"fields": TIMES}),
                ("Running", {"fields": RUNNING})]

    @admin.display(description="Status", ordering="status")
    def status_label(self, batch: Batch):
        return look.status_badge(batch)

    @admin.display(description="Progress")
    def progress(self, batch: Batch):
        return look.progress_bar(batch.page_counts)

    @admin.display(description="Batch and account", ordering="id")
    def batch_and_account(self, batch: Batch):
        return format_html('{}<br><small class="batch-account">{}</small>', batch.pk, batch.account.email)

    @admin.display(description="Endpoint", ordering="endpoint")
    def endpoint_and_kind(self, batch: Batch):
        """The endpoint broken only after a slash when narrow (/v1/chat/ over completions), never inside a word."""
        path = format_html_join(mark_safe("/<wbr>"), "{}", ((part,) for part in batch.endpoint.split("/")))
        return format_html('<span style="overflow-wrap: normal">{}</span><br><small>{}</small>', path,
                           batch.get_kind_display())

    @admin.display(description="Succeeded / errored")
    def outcomes(self, batch: Batch):
        counts = batch.page_counts
        return format_html('<span class="batch-outcomes">{} / {}</span>', f"{counts.succeeded:,}",
                           f"{counts.errored:,}")

    @admin.display(description="Created (UTC)", ordering="created_at")
    def created(self, batch: Batch):
        return look.moment(batch.created_at)

    @admin.display(description="Expires (UTC)", ordering="expires_at")
    def expires(self, batch: Batch):
        return look.moment(batch.expires_at)

    @admin.display(description="Lines")
    def lines_counted(self, batch: Batch):
        return look.counts_text(batch.page_counts)

    @admin.display(description="Request counts (as its API reports them)")
    def api_counts(self, batch: Batch):
        return look.api_counts_text(batch, batch.page_counts)

    @admin.display(description="Cancel")
    def cancel_button(self, batch: Batch):
        return look.cancel_button(batch)

    @admin.display(description="Input file")
    def input_file_link(self, batch: Batch):
        return look.file_link(batch.input_file, batch.input_file_name,
                              none="None: the requests came in the body" if batch.kind == Batch.Kind.ANTHROPIC
                              else "-")

    @admin.display(description="Output file")
    def output_file_link(self, batch: Batch):
        """The lines answered, written when an OpenAI batch ends."""
        return look.file_link(batch.output_file, none=look.no_file(batch, batch.page_counts.succeeded, "succeeded"))

    @admin.display(description="Error file")
    def error_file_link(self, batch: Batch):
        """The lines that failed, were cancelled or expired."""
        counts = batch.page_counts
        return look.file_link(batch.error_file, none=look.no_file(
            batch, counts.errored + counts.cancelled + counts.expired, "failed"))

    @admin.display(description="Errors")
    def errors_shown(self, batch: Batch):
        """Why its validation failed, one error a line, with the input line it names."""
        found = (batch.errors or {}).get("data") or []
        return "\n".join(f"{'line ' + str(e.get('line')) + ': ' if e.get('line') else ''}{e.get('message')}"
                         f" ({e.get('code')})" for e in found if isinstance(e, dict)) or "-"

    def has_add_permission(self, request):  # made through the API (its input file, its checks)
        return False

    def has_change_permission(self, request, obj=None):  # nothing on the page can be changed: no Save
        return False

    def has_delete_permission(self, request, obj=None):  # its lines are billed calls: kept, as OpenAI keeps them
        return False

    def has_cancel_permission(self, request) -> bool:
        return request.user.has_perm("batches.change_batch")

    @admin.action(description="Cancel the selected batches", permissions=["cancel"])
    def cancel_batches(self, request, queryset):
        moved, left = [], []
        for batch in queryset.order_by("created_at", "id"):
            went, _ = cancelled(batch)
            if went:
                moved.append(batch.pk)
                self.log_change(request, batch, "Cancelled")
            else:
                left.append(f"{batch.pk} ({batch.status})")
        if moved:
            self.message_user(request, f"{len(moved)} batch(es) cancelling: {', '.join(moved)}. The lines running "
                                       "now end (and are billed), the others are cancelled.", messages.SUCCESS)
        if left:
            self.message_user(request, f"{len(left)} batch(es) left as they were (only a batch validating or in "
                                       f"progress is cancelled): {', '.join(left)}.", messages.WARNING)

    def cancel_view(self, request, object_id):
        if not self.has_cancel_permission(request):
            raise PermissionDenied
        batch = Batch.objects.filter(pk=unquote(object_id)).first()
        if batch is None:
            raise Http404("No such batch.")
        went, message = cancelled(batch)
        if went:
            self.log_change(request, batch, "Cancelled")
        self.message_user(request, message, messages.SUCCESS if went else messages.WARNING)
        return HttpResponseRedirect(reverse("admin:batches_batch_change", args=[quote(batch.pk)]))
