"""Token quotas (spec 8.4): daily, weekly and monthly ceilings per account group, counted per
account in UTC windows. The day starts at midnight, the month on its first day, the week every
Wednesday at 14:00. Ceilings of -1 mean none. Reaching a ceiling is a 403, never a 429."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from gateway.counters import amounts_add, amounts_get
from gateway.errors import ApiError

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


def quota_used(*, account_id: int, now: datetime | None = None) -> list[tuple[Window, int]]:
    keyed = quota_window_keys(account_id=account_id, now=now)
    used = amounts_get([key for key, _ in keyed])
    return [(window, amount) for (_, window), amount in zip(keyed, used)]


def quota_check(*, account_id: int, group, used: list[tuple[Window, int]] | None = None) -> None:
    """Refuse with 403 when any ceiling of the group is reached for this account. `used` is
    what was read already (with the request's ceilings); otherwise it is read here."""
    ceilings = ceilings_of(group)
    if all(c < 0 for c in ceilings.values()):
        return
    readings = used if used is not None else quota_used(account_id=account_id)
    for window, amount in readings:
        ceiling = ceilings[window.period]
        if ceiling >= 0 and amount >= ceiling:
            raise ApiError(
                403,
                f"Token quota reached: the {ADJECTIVE[window.period]} ceiling of {ceiling} tokens is used up "
                f"until {window.resets_at.strftime('%Y-%m-%dT%H:%M:%SZ')}.",
                code="permission_denied",
            )


def quota_add(*, account_id: int, tokens: int, now: datetime | None = None) -> None:
    current = windows_at(now or datetime.now(timezone.utc))
    amounts_add([(_key(account_id, w), w.resets_at.timestamp()) for w in current], tokens)
