"""How a run looks in the console, wherever it is shown (the routine's page, the runs' list, the
run's page): its status as a badge in the theme's colours, its output with its line breaks, its
Retry button when it failed, and the link between a retry and the run it retries."""

from __future__ import annotations

from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode

from gateway.console.styles import BUTTON, LINK
from routines.models import Run

# unfold's label colours (unfold/helpers/label.html): green, red, blue, orange
STATUS_LOOK = {Run.Status.SUCCEEDED: "success", Run.Status.FAILED: "danger", Run.Status.RUNNING: "info",
               Run.Status.QUEUED: "warning"}
TEXT_STYLE = "white-space: pre-wrap; word-break: break-word; max-height: 32rem; overflow: auto; margin: 0"


def status_badge(run: Run):
    return render_to_string("unfold/helpers/label.html", {
        "text": run.get_status_display(), "type": STATUS_LOOK.get(run.status, ""),
        "class": f"run-status run-status-{run.status}"})


def kept_lines(text: str, css_class: str = "run-output"):
    """Text as it was written: line breaks and indents kept, long lines wrapped, escaped."""
    if not text:
        return "-"
    return format_html('<pre class="{}" style="{}">{}</pre>', css_class, TEXT_STYLE, text)


def run_link(run_id: int):
    return format_html('<a class="{} run-link" href="{}">Run {}</a>', LINK,
                       reverse("admin:routines_run_change", args=[run_id]), run_id)


def retry_button(run: Run, *, back: str = ""):
    """For a failed run, a button that posts the page's form (it has the CSRF token) to its retry;
    `back`: the page to return to (the run's own page otherwise)."""
    if run.status != Run.Status.FAILED:
        return ""
    url = reverse("admin:routines_run_retry", args=[run.pk]) + (f"?{urlencode({'next': back})}" if back else "")
    return format_html('<button type="submit" class="{} run-retry" data-run="{}" formaction="{}" formmethod="post" '
                       'formnovalidate>Retry</button>', BUTTON, run.pk, url)


def retry_links(run: Run):
    """"Retry of run N" and "Retried as run M, …": how a run and its retries are tied."""
    parts = []
    if run.retry_of_id:
        parts.append(format_html('<span class="run-retry-of">Retry of {}</span>', run_link(run.retry_of_id)))
    retries = [r.pk for r in run.retries.order_by("id")] if run.pk else []
    if retries:
        parts.append(format_html('<span class="run-retried-as">Retried as {}</span>',
                                 format_html_join(", ", "{}", ((run_link(pk),) for pk in retries))))
    return format_html_join(" · ", "{}", ((p,) for p in parts)) if parts else ""
