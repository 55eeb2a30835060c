"""How many calls there were, and how many failed, as the console's pages count them: one definition for
the home's "Calls" card, the Calls list and the usage console, so that they give the same numbers for the
same window (docs/operations.md, "The console's figures: calls and failed calls").

A call is a row of the calls log (gateway.models.CallRecord, written by gateway/usage/call_log.py): one
request on a model surface, answered or not, or one model call the gateway made for an account outside
such a request (a routine run's answer, the MCP chat tool). A failed call is one whose outcome is
`failed` (no model answered, or a server's refusal was the answer) or `refused` (the gateway refused it
before any model: credential, ceiling, quota, budget, input) — what the Calls list's outcome filter shows
for those two. A call cut midway or left by its client is neither answered in full nor failed: it counts
as a call, not as a failed one.

Tokens and spend stay the usage records' (what was metered): an agent's request that took three model
rounds is one call with three usage records."""

from __future__ import annotations

from datetime import datetime
from urllib.parse import urlencode

from django.db.models import Count, Q, QuerySet
from django.urls import reverse

from gateway.models import CallRecord
from gateway.web.output import timestamp

FAILED_OUTCOMES = (CallRecord.Outcome.FAILED, CallRecord.Outcome.REFUSED)
COUNTS = {"calls": Count("id"), "failed": Count("id", filter=Q(outcome__in=FAILED_OUTCOMES))}


def calls_between(since: datetime, until: datetime) -> QuerySet:
    """The calls that arrived in [since, until) (an index range on `created_at`)."""
    return CallRecord.objects.filter(created_at__gte=since, created_at__lt=until)


def calls_link(since: datetime, until: datetime, *, failed: bool = False, **filters) -> str:
    """The Calls list of [since, until), of the failed calls alone with `failed`, with the list's other
    `filters` (its GET parameters): the page that lists what a figure counts."""
    params = {"created_at__gte": timestamp(since), "created_at__lt": timestamp(until), **filters}
    if failed:
        params["outcome__in"] = ",".join(FAILED_OUTCOMES)
    return f"{reverse('admin:gateway_callrecord_changelist')}?{urlencode(params)}"
