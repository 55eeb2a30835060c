"""Token quotas (spec 8.4): daily, weekly and monthly ceilings per account group, counted per
account in UTC windows. The day starts at midnight, the month on its first day, the week every
Wednesday at 14:00. Ceilings of -1 mean none. Reaching a ceiling is a 403, never a 429. Budgets in
money (gateway/limits/budgets.py) are counted the same way, in the same windows, read in the
same step and refused in the same shapes: each window has a token counter and a spend counter.

The counters (gateway/state/counters.py, in Redis or the Django cache) are a cache of the usage records.
A window's counter that is missing (Redis restarted, the key expired, never used) is rebuilt before
the check: what the account's records in the database add up to in that window, plus the records
in this host's spool not yet written (one aggregate query), set only if still missing. A call's
tokens are added only to a counter that exists, so a rebuild never counts them twice; while one is
being rebuilt, they wait for the rebuild, which counts them unless it read their record
(`quota_rebuild`), so none is lost either. An addition
that fails (Redis down) leaves its counters unsure: they are dropped once Redis answers again, to
be rebuilt from the records (`quota_forget_unsure`, by the usage drainer). gateway/usage/writer.py
keeps the unsure counters, so this module imports it one way: the writer never imports quotas.

What a ceiling lets through beyond itself: the calls admitted before the counter reached it (each
admitted call is checked before its tokens are known), and the records that were spooled but not
yet in the database in another host's spool when a counter was rebuilt
(docs/decisions/0031-quota-counters-are-a-cache.md)."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from types import SimpleNamespace
from typing import NamedTuple

from django.db.models import F, Q, Sum

from gateway.limits.budgets import BUDGET_FIELDS, budget_refusal, budgets_of
from gateway.models import UsageRecord
from gateway.state import per_process
from gateway.state.counters import (
    Pending,
    account_tag,
    amounts_add,
    amounts_forget,
    amounts_get,
    amounts_pending,
    amounts_rebuilding,
    amounts_settle,
)
from gateway.telemetry import genai, metrics, tracing
from gateway.usage.writer import amounts_from_line, usage_writer
from gateway.web.errors import ApiError
from gateway.web.output import timestamp

logger = logging.getLogger(__name__)

# --- quota counters to drop -------------------------------------------------------------------
# A failed addition to an account's quota counters (Redis down) leaves them unsure: they are
# dropped once Redis answers, to be rebuilt from the usage records. The usage drainer drops them
# after each write (its `after_cycle`, wired in gateway/apps.py).

unsure_counters: set[str] = set()  # counters an addition may have missed: dropped once Redis answers
unsure_lock = threading.Lock()
per_process.register("unsure-quota-counters", reset=unsure_counters.clear)


def quota_counters_unsure(keys: list[str]) -> None:
    """Drop these counters once Redis answers (`quota_forget_unsure`)."""
    with unsure_lock:
        unsure_counters.update(keys)


def quota_forget_unsure() -> bool:
    """Drop the counters an addition may have missed, so they are rebuilt from the records. True
    when none is left; never raises."""
    with unsure_lock:
        keys = list(unsure_counters)
    if not keys:
        return True
    try:
        amounts_forget(keys)
    except Exception:
        return False
    with unsure_lock:
        unsure_counters.difference_update(keys)
    logger.info("quota counters dropped after a failed addition, to be rebuilt: %s", ", ".join(keys))
    return True

WEEK_START_WEEKDAY = 2  # Wednesday
WEEK_START_HOUR = 14
ADJECTIVE = {"day": "daily", "week": "weekly", "month": "monthly"}
TOKENS, SPEND = "tokens", "spend"  # what a window counts: tokens, or money in COST_UNITS


@dataclass(frozen=True)
class Window:
    period: str
    starts_at: datetime
    resets_at: datetime


class Counted(NamedTuple):
    """One window's counter of an account: its key, its window and what it counts (a tuple: six are
    made per request)."""

    key: str
    window: Window
    kind: str


@dataclass(frozen=True)
class Used:
    """What an account has used in each current window: tokens, and spend in COST_UNITS."""

    tokens: tuple[tuple[Window, int], ...] = ()
    spend: tuple[tuple[Window, int], ...] = ()

    def plus(self, *, tokens: int = 0, cost_units: int = 0) -> Used:
        """As if `tokens` and `cost_units` more had been counted (an agent's rounds so far)."""
        return Used(tuple((w, n + tokens) for w, n in self.tokens), tuple((w, n + cost_units) for w, n in self.spend))


def windows_at(now: datetime) -> list[Window]:
    now = now.astimezone(timezone.utc)
    day = now.replace(hour=0, minute=0, second=0, microsecond=0)
    week = day.replace(hour=WEEK_START_HOUR) - timedelta(days=(now.weekday() - WEEK_START_WEEKDAY) % 7)
    if week > now:
        week -= timedelta(days=7)
    month = day.replace(day=1)
    next_month = (month + timedelta(days=32)).replace(day=1)
    return [
        Window("day", day, day + timedelta(days=1)),
        Window("week", week, week + timedelta(days=7)),
        Window("month", month, next_month),
    ]


def ceilings_of(group) -> dict[str, int]:
    return {"day": group.daily_tokens, "week": group.weekly_tokens, "month": group.monthly_tokens}


def limits_of(account) -> dict[tuple[str, str], int]:
    """(kind, period) → the account's limit: its group's token ceilings and its budgets (-1: none). The
    same limits give the same (shared, not to be changed) dict: a request asks up to three times."""
    group = account.group
    return _limits((group.daily_tokens, group.weekly_tokens, group.monthly_tokens, group.daily_budget,
                    group.weekly_budget, group.monthly_budget, account.daily_budget, account.weekly_budget,
                    account.monthly_budget))


@lru_cache(maxsize=1024)
def _limits(values: tuple) -> dict[tuple[str, str], int]:
    tokens, groups, own = values[:3], values[3:6], values[6:]
    budgets = budgets_of(SimpleNamespace(group=SimpleNamespace(**dict(zip(BUDGET_FIELDS, groups))),
                                         **dict(zip(BUDGET_FIELDS, own))))
    limits = {(TOKENS, period): ceiling for period, ceiling in zip(("day", "week", "month"), tokens)}
    limits.update({(SPEND, period): budget for period, budget in budgets.items()})
    return limits


def quota_window_keys(*, account_id: int, now: datetime | None = None) -> list[Counted]:
    """The counters of each current window, tokens then spend (read along with the request's ceilings)."""
    hour = int((now.timestamp() if now is not None else time.time()) // 3600)
    tag = account_tag(account_id)
    return [Counted(f"{kind}:{tag}:{suffix}", window, kind)
            for kind in (TOKENS, SPEND) for window, suffix in _windows_of_hour(hour)]


@lru_cache(maxsize=8)
def _windows_of_hour(hour: int) -> tuple[tuple[Window, str], ...]:
    """The windows of any instant of this hour (each window starts on the hour), with their keys' ends."""
    windows = windows_at(datetime.fromtimestamp(hour * 3600, timezone.utc))
    return tuple((w, f"{w.period}:{int(w.starts_at.timestamp())}") for w in windows)


def quota_used(*, account_id: int, now: datetime | None = None) -> Used:
    """What each current window has used; a missing counter is rebuilt from the usage records."""
    keyed = quota_window_keys(account_id=account_id, now=now)
    amounts = amounts_get([c.key for c in keyed])
    missing = [c for c, amount in zip(keyed, amounts) if amount is None]
    rebuilt = quota_rebuild(account_id=account_id, missing=missing) if missing else {}
    return _used(keyed, amounts, rebuilt)


def quota_readings(*, account, keyed: list[Counted], amounts: tuple | list) -> Used:
    """The windows' amounts as read with the request's ceilings (None: missing), each missing one
    that has a limit rebuilt from the usage records first (the others read 0). Empty when nothing
    was read (a refused request)."""
    if not amounts:
        return Used()
    missing = quota_missing(account=account, keyed=keyed, amounts=amounts)
    rebuilt = quota_rebuild(account_id=account.pk, missing=missing) if missing else {}
    return _used(keyed, amounts, rebuilt)


def _used(keyed: list[Counted], amounts, rebuilt: dict[str, int]) -> Used:
    readings = {TOKENS: [], SPEND: []}
    for counted, amount in zip(keyed, amounts):
        readings[counted.kind].append((counted.window, rebuilt.get(counted.key, amount or 0)))
    return Used(tuple(readings[TOKENS]), tuple(readings[SPEND]))


def quota_missing(*, account, keyed: list[Counted], amounts: tuple | list) -> list[Counted]:
    """The windows `quota_readings` must rebuild from the database: read as missing, with a limit."""
    limits = limits_of(account)
    return [c for c, amount in zip(keyed, amounts) if amount is None and limits[(c.kind, c.window.period)] >= 0]


REBUILD_SECONDS = 30  # how long the additions to counters being rebuilt wait for the rebuild


@lru_cache(maxsize=4096)
def pending_for(account_id: int) -> Pending:
    """Where the additions to the account's counters wait while they are rebuilt (its hash tag)."""
    tag = account_tag(account_id)
    return Pending(f"rebuilding:{tag}", f"pending:{tag}")


def quota_rebuild(*, account_id: int, missing: list[Counted]) -> dict[str, int]:
    """Set each missing window's counter to what the account's usage records add up to in it (tokens,
    or cost), set only where still missing. In order:

    1. the counters are marked as being rebuilt: from then on, a call's addition to one of them waits
       in the account's pending additions, by record, rather than being dropped;
    2. the records spooled on this host but not yet written are read;
    3. the pending additions are read: their records are counted from there, not from (2) nor (4);
    4. the database's records, those of (2) and (3) left out (a record written meanwhile is in the
       spool or the pending additions, and counts once): the older ones added up in one query, those
       made since a while before (1) read one by one, so that their keys are known;
    5. the counters are set to (2) + (4) plus every addition still waiting whose record is neither in
       (2) nor (4): those of (3), and those made since (3) by records that (2) and (4) did not see.

    So a call metered at any point of a rebuild is counted once: before (1), its record is in (2) or
    (4); after (1), its addition waits and is counted from there unless (2) or (4) holds its record.
    What stays out: the records other hosts had spooled, not yet written, whose additions came before
    (1). Returns the totals the counters hold."""
    pending, keys = pending_for(account_id), [c.key for c in missing]
    # (4)'s records read one by one: those made from a while before (1), as an addition follows its record
    recent = datetime.now(timezone.utc) - timedelta(seconds=REBUILD_SECONDS)
    amounts_rebuilding(pending, keys, REBUILD_SECONDS)
    since = min(c.window.starts_at for c in missing)
    spooled: dict[str, tuple[datetime, int, int]] = {}
    for line in usage_writer.spooled():
        try:
            key, account, at, tokens, cost_units = amounts_from_line(line)
        except (KeyError, TypeError, ValueError):
            continue  # a line the drainer will set aside as well
        if account == account_id and at >= since:
            spooled[key] = (at, tokens, cost_units)
    waiting = amounts_pending(pending, keys)
    taken = {record for records in waiting.values() for record in records}
    read = {key: value for key, value in spooled.items() if key not in taken}
    rows = UsageRecord.objects.filter(account_id=account_id, created_at__gte=since)
    if elsewhere := [*read, *taken]:
        rows = rows.exclude(key__in=elsewhere)
    one_by_one = Q(created_at__gte=recent, key__isnull=False)  # (records written before they had keys: summed)
    read.update((key, (at, tokens, cost_units)) for key, at, tokens, cost_units in rows.filter(one_by_one).values_list(
        "key", "created_at", F("input_tokens") + F("output_tokens"), "cost_units"))
    amount_of = {TOKENS: F("input_tokens") + F("output_tokens"), SPEND: F("cost_units")}
    sums = rows.exclude(one_by_one).aggregate(**{
        f"w{i}": Sum(amount_of[c.kind], filter=Q(created_at__gte=c.window.starts_at,
                                                  created_at__lt=c.window.resets_at))
        for i, c in enumerate(missing)
    })
    entries = []
    for i, c in enumerate(missing):
        part = 1 if c.kind == TOKENS else 2
        listed = sum(v[part] for v in read.values() if c.window.starts_at <= v[0] < c.window.resets_at)
        entries.append((c.key, c.window.resets_at.timestamp(), (sums[f"w{i}"] or 0) + listed))
    return dict(zip(keys, amounts_settle(pending, entries, set(read))))


def quota_check(*, account, used: Used | None = None) -> None:
    """Refuse with 403 when a token ceiling of the account's group, or one of the account's budgets,
    is reached. `used` is what was read already (with the request's ceilings); otherwise it is read
    here."""
    limits = limits_of(account)
    if all(limit < 0 for limit in limits.values()):
        return
    used = used if used is not None else quota_used(account_id=account.pk)
    for window, amount in used.tokens:
        ceiling = limits[(TOKENS, window.period)]
        if ceiling >= 0 and amount >= ceiling:
            metrics.quota_refused(window.period)
            message = (f"Token quota reached: the {ADJECTIVE[window.period]} ceiling of {ceiling} tokens is used up "
                       f"until {timestamp(window.resets_at)}.")
            if tracing.ENABLED:
                genai.refused("quota", message, **{"gateway.quota.period": window.period})
            raise ApiError(403, message, code="permission_denied")
    for window, amount in used.spend:
        budget = limits[(SPEND, window.period)]
        if budget >= 0 and amount >= budget:
            raise budget_refusal(window.period, budget, timestamp(window.resets_at))


def quota_add(*, account_id: int, tokens: int, cost_units: int = 0, now: datetime | None = None,
              record: str = "") -> bool:
    """Add a call's tokens and cost to the account's current windows that have a counter (a missing
    one is rebuilt from the records when next read; while it is being rebuilt, the addition of
    `record`, the usage record's key, waits for it), in one step. Never raises: when the addition
    fails, the counters are remembered as unsure and dropped once they can be (False is returned)."""
    additions = _additions(account_id, tokens, cost_units, now)
    try:
        amounts_add(additions, pending=pending_for(account_id), record=record)
        return True
    except Exception as exc:
        return _addition_failed(account_id, additions, exc)


async def quota_add_async(*, account_id: int, tokens: int, cost_units: int = 0,
                          now: datetime | None = None, record: str = "") -> bool:
    """`quota_add` from the event loop: with Redis, one round trip from the loop (no thread)."""
    from gateway.state.redis import loop as loop_redis
    from gateway.state.workers import in_worker

    if not loop_redis.available():
        return await in_worker(quota_add)(account_id=account_id, tokens=tokens, cost_units=cost_units, now=now,
                                          record=record)
    additions = _additions(account_id, tokens, cost_units, now)
    try:
        await loop_redis.amounts_add(additions, pending=pending_for(account_id), record=record)
        return True
    except Exception as exc:
        return _addition_failed(account_id, additions, exc)


def _additions(account_id: int, tokens: int, cost_units: int, now: datetime | None) -> list[tuple[str, int]]:
    return [(c.key, tokens if c.kind == TOKENS else cost_units)
            for c in quota_window_keys(account_id=account_id, now=now)]


def _addition_failed(account_id: int, additions: list[tuple[str, int]], exc: Exception) -> bool:
    quota_counters_unsure([key for key, amount in additions if amount > 0])
    logger.warning("quota counters of account %s not added to (%s): %s; they are dropped and rebuilt from "
                   "the usage records once they can be", account_id, dict(additions), exc)
    return False
