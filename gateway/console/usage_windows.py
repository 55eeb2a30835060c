"""The usage console's two panels of the current windows (gateway/limits/quotas.py `windows_at`: the
UTC day, the week from Wednesday 14:00 UTC, the month): "Quota use now", each account's tokens
against its group's ceilings, and "Closest to a budget", its spend against its budgets,
its own where it has one (Account's `daily_budget`, ...; empty: its group's; -1: none).

Both panels come from the same two queries, whatever the number of accounts or records: the
roll-up's days (UsageDaily: today, the days of the week after its first, the month), tokens and
`cost_units` summed per account with a ceiling or a budget; and the records of the week's first day
from 14:00 on, which the roll-up's whole day cannot tell apart. The date range and the model filter
do not apply (a quota and a budget count every model); the group and account filters do. Spend is
in COST_UNITS (gateway/registry/prices.py), budgets too once read (`units_of`), so shares are exact."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time, timedelta, timezone

from django.db.models import F, Q, Sum
from django.db.models.functions import Coalesce

from gateway.console.usage_reads import TOKENS, Filters
from gateway.limits.quotas import windows_at
from gateway.models import UsageDaily, UsageRecord
from gateway.registry.prices import money_text, units_of

CEILING_ROWS = 50
BUDGET_ROWS = 10
NEAR = 90  # percent of a ceiling or budget from which the page marks a window
PERIODS = ("day", "week", "month")
CEILINGS = ("daily_tokens", "weekly_tokens", "monthly_tokens")  # the group's
BUDGETS = ("daily_budget", "weekly_budget", "monthly_budget")  # the account's own, else the group's


@dataclass
class WindowUse:
    period: str
    used: int  # tokens, or COST_UNITS
    ceiling: int  # the same; -1: none

    @property
    def share(self) -> float | None:
        """The part of the ceiling used (1.0 = reached); None without a ceiling."""
        if self.ceiling < 0:
            return None
        return 1.0 if self.ceiling == 0 else self.used / self.ceiling

    @property
    def percent(self) -> int | None:
        share = self.share
        return None if share is None else int(share * 100)

    @property
    def near(self) -> bool:
        return self.percent is not None and self.percent >= NEAR

    @property
    def money(self) -> str:
        """Spend against a budget, exact amounts of the currency: "1.25 / 5.00 (25%)", "1.25 (no budget)"."""
        if self.ceiling < 0:
            return f"{money_text(self.used, 2)} (no budget)"
        return f"{money_text(self.used, 2)} / {money_text(self.ceiling, 2)} ({self.percent}%)"


@dataclass
class AccountUse:
    account_id: int
    windows: list[WindowUse]
    email: str = ""
    group: str = ""

    @property
    def highest_share(self) -> float:
        return max((w.share for w in self.windows if w.share is not None), default=-1.0)


@dataclass
class Panel:
    rows: list[AccountUse]  # at most the panel's limit, closest first (names left to account_names)
    accounts: int  # how many in all


def window_use(f: Filters, *, now: datetime) -> tuple[Panel, Panel]:
    """The quota panel (at most CEILING_ROWS) and the budget panel (at most BUDGET_ROWS): the
    accounts with a ceiling (a budget) that used tokens (spent) this week or month, in the group
    filtered on, by their highest share of one, then their id; or the account filtered on, with or
    without a ceiling, a budget or use."""
    day, week, month = windows_at(now)
    scope = Q()
    if f.group:
        scope &= Q(account__group=f.group)
    if f.account:
        scope &= Q(account=f.account)
    week_first_day = week.starts_at.date()
    limits = {**{name: F(f"account__group__{name}") for name in CEILINGS},
              **{name: Coalesce(f"account__{name}", f"account__group__{name}") for name in BUDGETS}}
    rows = UsageDaily.objects.filter(scope, day__gte=min(week_first_day, month.starts_at.date())).values(
        "account_id", **limits)
    if not f.account:  # the account filtered on is shown with or without a ceiling or budget
        any_limit = Q()
        for name in limits:
            any_limit |= Q(**{f"{name}__gte": 0})
        rows = rows.filter(any_limit)
    sums = {}
    for period, within in zip(PERIODS, (Q(day=day.starts_at.date()), Q(day__gt=week_first_day),
                                        Q(day__gte=month.starts_at.date())), strict=True):
        sums[f"{period}_tokens"] = Sum(TOKENS, filter=within)
        sums[f"{period}_cost"] = Sum("cost_units", filter=within)
    week_first_day_end = datetime.combine(week_first_day + timedelta(days=1), time.min, tzinfo=timezone.utc)
    week_start_part = {account_id: (tokens, cost) for account_id, tokens, cost in (
        UsageRecord.objects.filter(scope, created_at__gte=week.starts_at, created_at__lt=week_first_day_end)
        .values("account_id").annotate(tokens=Sum(TOKENS), cost=Sum("cost_units"))
        .values_list("account_id", "tokens", "cost"))}
    quotas, budgets = [], []
    for row in rows.annotate(**sums):
        start_tokens, start_cost = week_start_part.get(row["account_id"], (0, 0))
        tokens = [row["day_tokens"] or 0, (row["week_tokens"] or 0) + start_tokens, row["month_tokens"] or 0]
        cost = [row["day_cost"] or 0, (row["week_cost"] or 0) + start_cost, row["month_cost"] or 0]
        for panel, used, names, units in ((quotas, tokens, CEILINGS, int), (budgets, cost, BUDGETS, units_of)):
            if any(used[1:]) and (f.account or any(row[name] >= 0 for name in names)):
                panel.append(AccountUse(row["account_id"], [WindowUse(period, amount, units(row[name]))
                                                            for period, amount, name in zip(PERIODS, used, names)]))
    if f.account:  # the account asked for, even when it used nothing or has no ceiling or budget
        account = f.account
        if not quotas:
            quotas.append(AccountUse(account.pk, [WindowUse(period, 0, getattr(account.group, name))
                                                  for period, name in zip(PERIODS, CEILINGS)]))
        if not budgets:
            budgets.append(AccountUse(account.pk, [WindowUse(period, 0, units_of(_budget(account, name)))
                                                   for period, name in zip(PERIODS, BUDGETS)]))
    return _panel(quotas, CEILING_ROWS), _panel(budgets, BUDGET_ROWS)


def _panel(uses: list[AccountUse], limit: int) -> Panel:
    uses.sort(key=lambda u: (-u.highest_share, u.account_id))
    return Panel(uses[:limit], len(uses))


def _budget(account, name: str):
    own = getattr(account, name)
    return getattr(account.group, name) if own is None else own
