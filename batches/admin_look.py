"""How a batch looks in the console, on its list and its page: its status and each line's as badges in the theme's
colours (as a routine run's), its progress as the theme's bar (lines ended of all), its counts in words, its
files linked to the console's Files page, its Cancel button."""

from __future__ import annotations

from datetime import datetime
from datetime import timezone as dt_timezone

from django.contrib.admin.utils import quote
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import formats
from django.utils.html import format_html

from batches.models import Batch, BatchLine
from batches.progress import Counts
from gateway.console.styles import DANGER_BUTTON, LINK

Status, Line = Batch.Status, BatchLine.Status
# unfold's label colours (unfold/helpers/label.html), as routines/admin_run_look.py gives a run's: waiting orange,
# running blue, done green, failed red, stopped grey
STATUS_LOOK = {Status.VALIDATING: "warning", Status.IN_PROGRESS: "info", Status.FINALIZING: "info",
               Status.COMPLETED: "success", Status.FAILED: "danger", Status.EXPIRED: "danger",
               Status.CANCELLING: "warning", Status.CANCELLED: ""}
LINE_LOOK = {Line.QUEUED: "warning", Line.RUNNING: "info", Line.SUCCEEDED: "success", Line.ERRORED: "danger",
             Line.CANCELLED: "", Line.EXPIRED: ""}
CANCELLABLE = (Status.VALIDATING, Status.IN_PROGRESS)  # what batches/finish.py `cancel` moves to cancelling


def moment(at: datetime):
    """A time above its date, in UTC (the console's formats, gateway/settings/formats/): narrow in a list."""
    at = at.astimezone(dt_timezone.utc)
    return format_html('<span class="whitespace-nowrap">{}</span><br><small>{}</small>', formats.time_format(at),
                       formats.date_format(at))


def badge(text: str, look: str, css_class: str):
    return render_to_string("unfold/helpers/label.html", {"text": text, "type": look, "class": css_class})


def status_badge(batch: Batch):
    return badge(batch.get_status_display(), STATUS_LOOK.get(batch.status, ""),
                 f"batch-status batch-status-{batch.status}")


def line_badge(line: BatchLine):
    return badge(line.get_status_display(), LINE_LOOK.get(line.status, ""), f"line-status line-status-{line.status}")


def progress_bar(counts: Counts):
    """Lines ended of all, as the theme's progress bar; the figures above it, the share in its tooltip. A batch
    whose lines are not written yet (an OpenAI batch being validated) has none to show."""
    if not counts.total:
        return format_html('<span class="batch-progress batch-progress-none">{}</span>', "No lines yet")
    share = counts.ended * 100 // counts.total
    bar = render_to_string("unfold/components/progress.html", {
        "items": [{"value": share, "title": "Ended"}], "description": f"{counts.ended:,} / {counts.total:,}"})
    return format_html('<div class="batch-progress" data-ended="{}" data-total="{}" style="min-width: 7rem">{}'
                       "</div>", counts.ended, counts.total, bar)


def counts_text(counts: Counts) -> str:
    """Every line by where it is, ended first."""
    return (f"{counts.total:,} lines: {counts.succeeded:,} succeeded, {counts.errored:,} errored, "
            f"{counts.cancelled:,} cancelled, {counts.expired:,} expired; {counts.queued:,} queued, "
            f"{counts.running:,} running.")


def api_counts_text(batch: Batch, counts: Counts) -> str:
    """The `request_counts` its API reports (OpenAI's or Anthropic's), as its owner reads them."""
    shown = counts.openai() if batch.kind == Batch.Kind.OPENAI else counts.anthropic()
    return ", ".join(f"{name} {value:,}" for name, value in shown.items())


def file_link(stored, kept_id: str = "", *, none: str):
    """The file, linked to its page on the Files page; `kept_id`: the id of a file deleted since (the row is
    gone, its id stays on the batch)."""
    if stored is not None:
        url = reverse("admin:gateway_storedfile_change", args=[quote(stored.pk)])
        return format_html('<a class="{} batch-file" href="{}">{}</a> <small>{}</small>', LINK, url, stored.filename,
                           stored.pk)
    if kept_id:
        return format_html('<span class="batch-file-gone">{} (deleted)</span>', kept_id)
    return none


def no_file(batch: Batch, lines_in_it: int, word: str) -> str:
    """Why an output or error file is not there: an Anthropic batch writes none (its results are read from its
    results URL), a running one writes it when it ends, an ended one had no line for it, or it went since
    (expired after FILES_OUTPUT_EXPIRE_SECONDS, or deleted)."""
    if batch.kind == Batch.Kind.ANTHROPIC:
        return f"None: its results are read from GET /v1/messages/batches/{batch.pk}/results"
    if not batch.ended:
        return "None yet: written when it ends"
    return "Gone: expired or deleted" if lines_in_it else f"None: no line {word}"


def cancel_button(batch: Batch):
    """A button that posts the page's form (it has the CSRF token) to the batch's cancel."""
    route = "/v1/batches" if batch.kind == Batch.Kind.OPENAI else "/v1/messages/batches"
    return format_html('<button type="submit" class="{} batch-cancel" formaction="{}" formmethod="post" '
                       'formnovalidate>Cancel batch</button><div class="help mt-2">The lines running now end (and '
                       "are billed); the others are cancelled, as <code>POST {}/{}/cancel</code> does.</div>",
                       DANGER_BUTTON, reverse("admin:batches_batch_cancel", args=[quote(batch.pk)]), route, batch.pk)
