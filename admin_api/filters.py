"""The query filters of the lists: an id, a time, a word of a set; each that does not read is a 422
naming it."""

from __future__ import annotations

from datetime import datetime, timezone

from django.utils.dateparse import parse_datetime

from gateway.web.errors import ValidationFailed

MAX_ID = 2 ** 63 - 1


def id_filter(params: dict[str, str], name: str) -> int:
    value = params[name]
    if not value.isdigit() or int(value) > MAX_ID:
        raise ValidationFailed({name: ["An id: a whole number."]})
    return int(value)


def time_filter(params: dict[str, str], name: str) -> datetime:
    """An ISO 8601 time; one without an offset is UTC."""
    moment = utc_time(params[name], assume_utc=True)
    if moment is None:
        raise ValidationFailed({name: ["An ISO 8601 time, e.g. 2030-01-31T00:00:00Z."]})
    return moment


def utc_time(text: str, *, assume_utc: bool) -> datetime | None:
    """`text` as an ISO 8601 time in UTC, or None: not a time, no such time (month 13), no offset (unless
    `assume_utc`), or a time that is no longer one in UTC (year 1 ahead of it, year 9999 behind it)."""
    try:
        moment = parse_datetime(text)
        if moment is not None and moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc) if assume_utc else None
        return moment.astimezone(timezone.utc) if moment is not None else None
    except (ValueError, OverflowError):
        return None


def flag_filter(params: dict[str, str], name: str) -> bool:
    if params[name] not in ("true", "false"):
        raise ValidationFailed({name: ["true or false."]})
    return params[name] == "true"
