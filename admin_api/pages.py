"""Cursor pagination of every list: `{"data": [...], "next": <cursor or null>}`.

A page is read by id, in one fixed order per list (oldest first, or newest first for the records of
calls), `limit` + 1 rows at a time: the extra row says whether there is a next page, and the cursor names
the last id shown. A cursor stays right while rows are added or removed (an offset would skip or repeat
rows), and a page costs the same wherever it is. The cursor is opaque to clients (base64 of the id); a
cursor or limit that does not read is a 422 naming it, never a 500.

The query parameters a list takes are named by the view; any other is refused by name, so that a filter
written wrongly never lists everything.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Callable

from django.db.models import QuerySet
from django.http import HttpRequest

from gateway.web.errors import ValidationFailed

DEFAULT_LIMIT = 50
MAX_LIMIT = 200
PAGE_PARAMETERS = ("cursor", "limit")
CURSOR_PREFIX = "id:"


@dataclass(frozen=True)
class Page:
    data: list[dict]
    next: str | None

    def body(self) -> dict:
        return {"data": self.data, "next": self.next}


def query_parameters(request: HttpRequest, filters: tuple[str, ...] = ()) -> dict[str, str]:
    """The query's parameters, one value each; a name the list does not take, or a name given twice, is a 422."""
    allowed = (*PAGE_PARAMETERS, *filters)
    errors = {name: ["Unknown query parameter."] for name in request.GET if name not in allowed}
    errors.update({name: ["Given more than once."] for name in request.GET
                   if name in allowed and len(request.GET.getlist(name)) > 1})
    if errors:
        raise ValidationFailed(errors)
    return {name: request.GET[name] for name in request.GET}


def encode_cursor(pk: int) -> str:
    return base64.urlsafe_b64encode(f"{CURSOR_PREFIX}{pk}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> int:
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        text = ""
    number = text.removeprefix(CURSOR_PREFIX)
    if not text.startswith(CURSOR_PREFIX) or not number.isdigit() or len(number) > 18:
        raise ValidationFailed({"cursor": ["Not a cursor of this API: pass the `next` of a page as it is."]})
    return int(number)


def page_limit(value: str | None) -> int:
    if value is None:
        return DEFAULT_LIMIT
    if not value.isdigit() or not 1 <= int(value) <= MAX_LIMIT:
        raise ValidationFailed({"limit": [f"A whole number from 1 to {MAX_LIMIT}."]})
    return int(value)


def paginate(rows: QuerySet, params: dict[str, str], record: Callable[[object], dict], *,
             newest_first: bool = False) -> Page:
    """One page of `rows` (filtered already) as `record` writes each."""
    limit = page_limit(params.get("limit"))
    rows = rows.order_by("-pk" if newest_first else "pk")
    if (cursor := params.get("cursor")) is not None:
        after = decode_cursor(cursor)
        rows = rows.filter(pk__lt=after) if newest_first else rows.filter(pk__gt=after)
    found = list(rows[:limit + 1])
    shown = found[:limit]
    following = encode_cursor(shown[-1].pk) if len(found) > limit else None
    return Page([record(row) for row in shown], following)
