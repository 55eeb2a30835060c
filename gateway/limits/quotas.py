"""Token quotas (spec 8.4): daily, weekly and monthly ceilings per account group, counted per
account in UTC windows. The day starts at midnight, the month on its first day, the week every
Wednesday at 14:00. Ceilings of -1 mean none. Reaching a ceiling is a 403, never a 429.

The counters (gateway/state/counters.py, in Redis or the Django cache) are a cache of the usage records.
A window's counter that is missing (Redis restarted, the key expired, never used) is rebuilt before
the check: what the account's records in the database add up to in that window, plus the records
in this host's spool not yet written (one aggregate query), set only if still missing. A call's
tokens are added only to a counter that exists, so a rebuild never counts them twice. An addition
that fails (Redis down) leaves its counters unsure: they are dropped once Redis answers again, to
be rebuilt from the records (`quota_forget_unsure`, by the usage drainer). gateway/usage/writer.py
keeps the unsure counters, so this module imports it one way: the writer never imports quotas.

What a ceiling lets through beyond itself: the calls admitted before the counter reached it (each
admitted call is checked before its tokens are known), and the records that were spooled but not
yet in the database in another host's spool when a counter was rebuilt (docs/decisions.md)."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from django.conf import settings
from django.db.models import F, Q, Sum

from gateway.models import UsageRecord
from gateway.state.counters import amounts_add, amounts_forget, amounts_get, amounts_seed
from gateway.telemetry import metrics
from gateway.usage.writer import row_from_line, usage_writer
from gateway.web.errors import ApiError
from gateway.web.output import timestamp

logger = logging.getLogger(__name__)

# --- quota counters to drop -------------------------------------------------------------------
# A failed addition to an account's quota counters (Redis down) leaves them unsure: they are
# dropped once Redis answers, to be rebuilt from the usage records. The usage drainer drops them
# after each write (its `after_cycle`, wired in gateway/apps.py); with USAGE_BATCHED off, the next
# addition does.

unsure_counters: set[str] = set()  # counters an addition may have missed: dropped once Redis answers
unsure_lock = threading.Lock()


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


@dataclass(frozen=True)
class Window:
    period: str
    starts_at: datetime
    resets_at: datetime


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


def _key(account_id: int, window: Window) -> str:
    return f"tokens:{account_id}:{window.period}:{int(window.starts_at.timestamp())}"


def quota_window_keys(*, account_id: int, now: datetime | None = None) -> list[tuple[str, Window]]:
    """The counter key of each current window (read along with the request's ceilings)."""
    return [(_key(account_id, w), w) for w in windows_at(now or datetime.now(timezone.utc))]


def quota_used(*, account_id: int, group=None, now: datetime | None = None) -> list[tuple[Window, int]]:
    """What each current window has used; a missing counter is rebuilt from the usage records
    (with `group`, only the windows it has a ceiling for; the others read 0 when missing)."""
    keyed = quota_window_keys(account_id=account_id, now=now)
    return quota_readings(account_id=account_id, group=group, keyed=keyed,
                          amounts=amounts_get([key for key, _ in keyed]))


def quota_readings(*, account_id: int, group, keyed: list[tuple[str, Window]],
                   amounts: tuple | list) -> list[tuple[Window, int]]:
    """The windows' amounts as read (None: missing), with each missing one rebuilt from the
    usage records first (with `group`, only those it has a ceiling for). Empty when nothing was
    read (a refused request)."""
    if not amounts:
        return []
    missing = quota_missing(group=group, keyed=keyed, amounts=amounts)
    rebuilt = quota_rebuild(account_id=account_id, windows=missing) if missing else {}
    return [(window, rebuilt.get(key, amount or 0)) for (key, window), amount in zip(keyed, amounts)]


def quota_missing(*, group, keyed: list[tuple[str, Window]], amounts: tuple | list) -> list[tuple[str, Window]]:
    """The windows `quota_readings` must rebuild from the database: read as missing, and (with
    `group`) with a ceiling."""
    ceilings = ceilings_of(group) if group is not None else None
    return [(key, window) for (key, window), amount in zip(keyed, amounts)
            if amount is None and (ceilings is None or ceilings[window.period] >= 0)]


def quota_rebuild(*, account_id: int, windows: list[tuple[str, Window]]) -> dict[str, int]:
    """Set each missing window's counter to what the account's usage records add up to in it:
    those in the database and those spooled on this host but not yet written (a record in both
    counts once, from the spool, so one that is written meanwhile is not lost nor doubled); set
    only where still missing (SET NX). Returns the totals the counters hold."""
    since = min(window.starts_at for _, window in windows)
    spooled: dict[str, tuple[datetime, int]] = {}
    for line in usage_writer.spooled():
        try:
            key, account, _model, _surface, input_tokens, output_tokens, _request, at = row_from_line(line)
        except (KeyError, TypeError, ValueError):
            continue  # a line the drainer will set aside as well
        if account == account_id and at >= since:
            spooled[key] = (at, input_tokens + output_tokens)
    not_spooled = ~Q(key__in=list(spooled)) if spooled else Q()
    tokens = F("input_tokens") + F("output_tokens")
    sums = UsageRecord.objects.filter(account_id=account_id, created_at__gte=since).aggregate(**{
        f"w{i}": Sum(tokens, filter=Q(created_at__gte=window.starts_at, created_at__lt=window.resets_at) & not_spooled)
        for i, (_, window) in enumerate(windows)
    })
    entries = []
    for i, (key, window) in enumerate(windows):
        total = (sums[f"w{i}"] or 0) + sum(n for at, n in spooled.values() if window.starts_at <= at < window.resets_at)
        entries.append((key, window.resets_at.timestamp(), total))
    return dict(zip([key for key, _ in windows], amounts_seed(entries)))


def quota_check(*, account_id: int, group, used: list[tuple[Window, int]] | None = None) -> None:
    """Refuse with 403 when any ceiling of the group is reached for this account. `used` is
    what was read already (with the request's ceilings); otherwise it is read here."""
    ceilings = ceilings_of(group)
    if all(c < 0 for c in ceilings.values()):
        return
    readings = used if used is not None else quota_used(account_id=account_id, group=group)
    for window, amount in readings:
        ceiling = ceilings[window.period]
        if ceiling >= 0 and amount >= ceiling:
            metrics.quota_refused(window.period)
            raise ApiError(
                403,
                f"Token quota reached: the {ADJECTIVE[window.period]} ceiling of {ceiling} tokens is used up "
                f"until {timestamp(window.resets_at)}.",
                code="permission_denied",
            )


def quota_add(*, account_id: int, tokens: int, now: datetime | None = None) -> bool:
    """Add a call's tokens to the account's current windows that have a counter (a missing one is
    rebuilt from the records when next read). Never raises: when the addition fails, the counters
    are remembered as unsure and dropped once they can be (False is returned)."""
    keys = [key for key, _ in quota_window_keys(account_id=account_id, now=now)]
    try:
        if unsure_counters and not settings.USAGE_BATCHED:  # else the usage drainer drops them
            quota_forget_unsure()
        amounts_add(keys, tokens)
        return True
    except Exception as exc:
        return _addition_failed(account_id, keys, tokens, exc)


async def quota_add_async(*, account_id: int, tokens: int, now: datetime | None = None) -> bool:
    """`quota_add` from the event loop: with Redis, one round trip from the loop (no thread)."""
    from gateway.state import loop_redis
    from gateway.state.workers import in_worker

    if not loop_redis.available() or (unsure_counters and not settings.USAGE_BATCHED):
        return await in_worker(quota_add)(account_id=account_id, tokens=tokens, now=now)
    keys = [key for key, _ in quota_window_keys(account_id=account_id, now=now)]
    try:
        await loop_redis.amounts_add(keys, tokens)
        return True
    except Exception as exc:
        return _addition_failed(account_id, keys, tokens, exc)


def _addition_failed(account_id: int, keys: list[str], tokens: int, exc: Exception) -> bool:
    quota_counters_unsure(keys)
    logger.warning("quota counters of account %s not added to (%s tokens): %s; they are dropped "
                   "and rebuilt from the usage records once they can be", account_id, tokens, exc)
    return False

