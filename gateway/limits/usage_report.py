"""Reading an account's usage (GET /api/v1/usage)."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, Sum

from gateway.limits.quotas import ceilings_of, quota_used
from gateway.models import UsageRecord
from gateway.web.output import timestamp


def usage_summary(*, account) -> dict[str, Any]:
    """Per window: ceiling, used, remaining (null when no ceiling) and when it resets; and the
    month's totals per model."""
    ceilings = ceilings_of(account.group)
    windows: dict[str, Any] = {}
    month_start = None
    for window, used in quota_used(account_id=account.pk):
        ceiling = ceilings[window.period]
        windows[window.period] = {
            "limit": ceiling,
            "used": used,
            "remaining": max(ceiling - used, 0) if ceiling >= 0 else None,
            "resets_at": timestamp(window.resets_at),
        }
        if window.period == "month":
            month_start = window.starts_at
    rows = (
        UsageRecord.objects.filter(account=account, created_at__gte=month_start)
        .values("model")
        .annotate(requests=Count("id"), input_tokens=Sum("input_tokens"), output_tokens=Sum("output_tokens"))
        .order_by("model")
    )
    by_model = [
        {"model": r["model"], "requests": r["requests"], "input_tokens": r["input_tokens"],
         "output_tokens": r["output_tokens"], "total_tokens": r["input_tokens"] + r["output_tokens"]}
        for r in rows
    ]
    return {**windows, "month_by_model": by_model}
