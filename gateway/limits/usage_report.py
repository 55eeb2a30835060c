"""Reading an account's usage (GET /api/v1/usage): tokens against the token quotas, and spend
against the budgets, per window; this month's totals per model."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import Count, Sum

from gateway.limits.budgets import budgets_of
from gateway.limits.quotas import ceilings_of, quota_used
from gateway.models import UsageRecord
from gateway.registry.prices import money_text
from gateway.web.output import timestamp


def usage_summary(*, account) -> dict[str, Any]:
    """Per window: ceiling, used, remaining (null when no ceiling) and when it resets, with the spend,
    the budget and what is left of it (null when none; amounts as decimal text in `currency`); and
    the month's totals per model, with their spend."""
    ceilings, budgets = ceilings_of(account.group), budgets_of(account)
    used = quota_used(account_id=account.pk)
    spent = {window.period: amount for window, amount in used.spend}
    windows: dict[str, Any] = {}
    month_start = None
    for window, tokens in used.tokens:
        ceiling, budget, spend = ceilings[window.period], budgets[window.period], spent[window.period]
        windows[window.period] = {
            "limit": ceiling,
            "used": tokens,
            "remaining": max(ceiling - tokens, 0) if ceiling >= 0 else None,
            "resets_at": timestamp(window.resets_at),
            "spend": money_text(spend),
            "budget": money_text(budget) if budget >= 0 else None,
            "budget_remaining": money_text(max(budget - spend, 0)) if budget >= 0 else None,
        }
        if window.period == "month":
            month_start = window.starts_at
    rows = (
        UsageRecord.objects.filter(account=account, created_at__gte=month_start)
        .values("model")
        .annotate(requests=Count("id"), input_tokens=Sum("input_tokens"), output_tokens=Sum("output_tokens"),
                  cost_units=Sum("cost_units"))
        .order_by("model")
    )
    by_model = [
        {"model": r["model"], "requests": r["requests"], "input_tokens": r["input_tokens"],
         "output_tokens": r["output_tokens"], "total_tokens": r["input_tokens"] + r["output_tokens"],
         "spend": money_text(r["cost_units"] or 0)}
        for r in rows
    ]
    return {**windows, "currency": settings.CURRENCY, "month_by_model": by_model}
