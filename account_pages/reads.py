"""What the account pages read, always of one account: the current windows' tokens and spend
against the group's quotas and the budgets (the functions the API's GET /api/v1/usage reads), the
last 30 UTC days per day (the usage console's roll-up read), the last calls (the calls log), and
the routines with their last run."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone

from django.db.models import OuterRef, Subquery

from gateway.console.usage_reads import Filters, calls_by_day_and_model, usage_by_day_and_model
from gateway.console.usage_windows import WindowUse
from gateway.limits.budgets import budgets_of
from gateway.limits.quotas import ceilings_of, quota_used
from gateway.models import CallRecord
from routines.models import Routine, Run

CHART_DAYS = 30
CALLS_SHOWN = 50
RUNS_SHOWN = 20


@dataclass(frozen=True)
class Window:
    """One current window (day, week from Wednesday 14:00 UTC, month) of the account."""

    period: str
    resets_at: datetime
    tokens: WindowUse  # tokens against the group's ceiling (-1: none)
    spend: WindowUse  # COST_UNITS against the account's budget, its own or its group's (-1: none)


def current_windows(account, *, now: datetime | None = None) -> list[Window]:
    """The three windows as the gateway counts them for its refusals: the quota counters (rebuilt
    from the usage records when missing), the group's ceilings and the budgets."""
    ceilings, budgets = ceilings_of(account.group), budgets_of(account)
    used = quota_used(account_id=account.pk, now=now)
    spent = {window.period: amount for window, amount in used.spend}
    return [Window(window.period, window.resets_at, WindowUse(window.period, tokens, ceilings[window.period]),
                   WindowUse(window.period, spent[window.period], budgets[window.period]))
            for window, tokens in used.tokens]


@dataclass
class Day:
    start: datetime
    calls: int = 0
    tokens: int = 0
    cost_units: int = 0


def last_days(account, *, today: date, days: int = CHART_DAYS) -> list[Day]:
    """Calls, tokens and spend per UTC day of the last `days` days, oldest first: the calls as the
    console counts them (the calls log: gateway/console/call_counts.py), the tokens and spend the usage
    records' (the usage console's daily roll-up). Two queries."""
    start = today - timedelta(days=days - 1)
    out = {start + timedelta(days=i): Day(datetime(*(start + timedelta(days=i)).timetuple()[:3], tzinfo=timezone.utc))
           for i in range(days)}
    window = Filters(start, today, account=account)
    for row in usage_by_day_and_model(window):
        day = out.get(row["day"])
        if day is not None:
            day.tokens += (row["input_tokens"] or 0) + (row["output_tokens"] or 0)
            day.cost_units += row["cost_units"] or 0
    for row in calls_by_day_and_model(window):
        day = out.get(row["day"])
        if day is not None:
            day.calls += row["calls"]
    return list(out.values())


def last_calls(account, *, limit: int = CALLS_SHOWN) -> list[CallRecord]:
    """The account's newest calls from the calls log (its index on account and time)."""
    return list(CallRecord.objects.filter(account=account).order_by("-created_at", "-id")[:limit])


def call_of(account, pk: int) -> CallRecord | None:
    return CallRecord.objects.filter(account=account, pk=pk).first()


def routines_with_last_run(account) -> list[Routine]:
    """The account's routines, each with `last_run_status` and `last_run_created` (one query)."""
    last = Run.objects.filter(routine=OuterRef("pk")).order_by("-created_at", "-id")
    return list(Routine.objects.filter(account=account)
                .annotate(last_run_status=Subquery(last.values("status")[:1]),
                          last_run_created=Subquery(last.values("created_at")[:1]),
                          last_run_id=Subquery(last.values("pk")[:1]))
                .order_by("name", "pk"))


def routine_of(account, pk: int) -> Routine | None:
    return Routine.objects.filter(account=account, pk=pk).first()


def runs_of(routine: Routine, *, limit: int = RUNS_SHOWN) -> list[Run]:
    return list(routine.runs.order_by("-created_at", "-id")[:limit])
