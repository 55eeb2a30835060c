"""Events in the console: each named for what it is ("Event <id> for <routine>"), read
only, with its payload shown whole: JSON pretty-printed, anything else as the text it is, escaped
either way. The run's page shows the payload of the event that started it."""

from __future__ import annotations

import json

from django.contrib import admin
from django.utils.formats import date_format
from django.utils.html import format_html, format_html_join
from django.utils.timezone import localtime
from unfold.admin import ModelAdmin

from gateway.console.styles import HEAD_ROW, ROW, TABLE, TABLE_BOX
from routines.models import Event, Routine
from routines.refused_events import KEPT

PAYLOAD_STYLE = "white-space: pre-wrap; word-break: break-word; max-height: 32rem; overflow: auto; margin: 0"


def payload_html(event: Event | None):
    """The event's body in a <pre>: indented JSON when it is JSON, else its text; "(empty: a ping)"."""
    if event is None:
        return "No event: started by its schedule, by run-now or by the agent."
    body = event.body
    if not body:
        return "(empty: a ping)"
    try:
        body = json.dumps(json.loads(body), indent=2, ensure_ascii=False, sort_keys=False)
    except ValueError:
        pass  # text as it came
    return format_html('<pre class="event-payload" style="{}">{}</pre>', PAYLOAD_STYLE, body)


@admin.register(Event)
class EventAdmin(ModelAdmin):
    """Events are written by the webhook and e-mail intake: read only, and deletable."""

    list_display = ["__str__", "routine", "source", "event_id", "received_at"]
    list_filter = ["source"]
    list_select_related = ["routine"]
    search_fields = ["event_id", "routine__name"]
    fields = ["routine", "event_id", "source", "content_type", "received_at", "payload"]
    readonly_fields = fields

    @admin.display(description="Payload")
    def payload(self, event):
        return payload_html(event)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


def refused_events_html(routine: Routine):
    """The routine's webhook events refused for their signature, newest first (at most KEPT)."""
    refused = list(routine.refused_events.order_by("-id")[:KEPT])
    if not refused:
        return "None refused."
    rows = format_html_join(
        "", '<tr class="{} refused-event"><td class="whitespace-nowrap">{}</td><td>{}</td><td>{}</td>'
            '<td>{}<div class="text-xs" title="SHA-256 of the body: {}">SHA-256 <code>{}…</code></div></td></tr>',
        ((ROW, date_format(localtime(r.received_at), "DATETIME_FORMAT"), r.reason, r.signature_headers or "none",
          f"{r.body_bytes} bytes" + (f", {r.content_type}" if r.content_type else ""), r.body_sha256,
          r.body_sha256[:16]) for r in refused))
    return format_html(
        '<div class="{}"><table id="refused-events" class="{}"><thead><tr class="{}"><th>Received</th><th>Why</th>'
        "<th>Signature headers sent</th><th>Body</th></tr></thead><tbody>{}</tbody></table>"
        '</div><p class="help mt-2">Refused with 401, never stored as events. The last {} are kept; neither the '
        "body nor the signature is.</p>", TABLE_BOX, TABLE, HEAD_ROW, rows, KEPT)
