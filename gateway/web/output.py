"""The one output layer: every JSON body an endpoint answers goes through `respond`, and every
timestamp in it through `timestamp`, so a field has one shape on every route.

A record builder (`routine_record`, `collection_json`, ...) may put an aware `datetime` in its dict:
`respond` writes it with `timestamp`. Errors have their own renderer (gateway/web/errors.py), which
writes no timestamps.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.http import JsonResponse

TIMESTAMP_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"  # spec 4.2's `expires_at`: UTC, microseconds, `Z`


def timestamp(moment: datetime | None) -> str | None:
    """Every timestamp the API writes: ISO 8601 in UTC, always with microseconds, and `Z`
    (`2026-11-24T06:33:44.120000Z`). None stays None."""
    if moment is None:
        return None
    return moment.astimezone(timezone.utc).strftime(TIMESTAMP_FORMAT)


def timestamp_with_offset(moment: datetime) -> str:
    """The one field the spec writes with a numeric offset: verify's `checked_at` (spec 4.4)."""
    return moment.astimezone(timezone.utc).isoformat(timespec="seconds")


class _Encoder(DjangoJSONEncoder):
    def default(self, o: Any) -> Any:
        if isinstance(o, datetime):
            return timestamp(o)
        return super().default(o)


def encode(payload: Any) -> bytes:
    """A JSON body as bytes, written as `respond` writes it (for responses built elsewhere)."""
    return _Encoder(ensure_ascii=True).encode(payload).encode("ascii")


def respond(payload: Any, status: int = 200) -> JsonResponse:
    """The JSON response of an endpoint: the payload (an object, or a list for JSON-RPC batches)
    with its timestamps written by `timestamp`."""
    return JsonResponse(payload, status=status, encoder=_Encoder, safe=False)
