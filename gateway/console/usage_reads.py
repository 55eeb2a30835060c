"""The usage console's reads (the admin page of gateway/console/usage_views.py): its filters and
the queries over the date range behind it; the panels of the current quota and budget windows are
in gateway/console/usage_windows.py.

The calls and failed calls come from the calls log, as the Calls list and the home count them
(gateway/console/call_counts.py; `calls_by_day_and_model`, `calls_by`: an index range on its
`created_at`, over calls rather than days). Every other figure but the CSV export and the response
cache's hits (read from the cached records alone) comes from UsageDaily, the usage records added up
per UTC day, account and model by database triggers (migration 0007): tokens and spend (`cost_units`,
the cost each record was metered with, in gateway/registry/prices.py's COST_UNITS; migration 0011).
Filtered by a tag (a call's `metadata`, kept on its usage records: migration 0016), the same figures
come from the records of the range that have it, each one call: the roll-up holds no tags. So do they with
the batch filter (batch lines only, or live calls only: a record's `batch_id`, migration 0023), which the
roll-up does not tell apart either; the calls are then the records too, since the calls log does not tell a
batch line's call from a live one. That reads records rather than days, so it takes longer over a long range
with many calls, in the same number of queries. The batch lines' own figures (`batch_use`) and the cache
hits are read from their records alone, over partial indexes. The page runs the same fixed number of
queries whatever the number of records (tests/gateway/console/test_usage_console.py counts them), the usage
figures over days rather than calls (bench/usage_console.py times them at a million records). Aggregates
group by the account's id alone and read the few names shown afterwards (`account_names`): grouping by
e-mail addresses made PostgreSQL sort every row on disk. It reads the database, not the quota counters: a
record still in a process's spool shows up within USAGE_FLUSH_SECONDS."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal
from typing import Any, NamedTuple
from urllib.parse import urlencode

from django.db import connection
from django.db.models import BooleanField, Count, F, QuerySet, Sum
from django.db.models.expressions import RawSQL
from django.db.models.functions import TruncDate

from gateway.console.call_counts import COUNTS, calls_between
from gateway.models import CallFailureDaily, Model, UsageDaily, UsageRecord, account_model
from gateway.web.validation import MAX_TAG_KEY, MAX_TAG_VALUE

DEFAULT_DAYS = 30
MAX_DAYS = 366
TOP_ACCOUNTS = 10
TOKENS = F("input_tokens") + F("output_tokens")
DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
PRINTABLE = re.compile(r"[^\x00-\x1f\x7f]*")  # PostgreSQL refuses NUL in a text; no id holds the others


@dataclass(frozen=True)
class Filters:
    start: date
    end: date  # included
    group: Any = None  # an accounts.AccountGroup (gateway.models.account_group_model)
    account: Any = None  # an accounts.Account
    model: str = ""
    tag: tuple[str, str] | None = None  # (key, value): the records of the calls with this tag
    batch: str = ""  # BATCH_FILTERS: "" both, "only" the batch lines' records, "none" the live calls'

    @property
    def from_records(self) -> bool:
        """The figures come from the records rather than the roll-up, which holds neither tags nor batches."""
        return self.tag is not None or bool(self.batch)

    @property
    def days(self) -> list[date]:
        return [self.start + timedelta(days=i) for i in range((self.end - self.start).days + 1)]

    @property
    def since(self) -> datetime:
        return datetime.combine(self.start, time.min, tzinfo=timezone.utc)

    @property
    def until(self) -> datetime:
        return datetime.combine(self.end + timedelta(days=1), time.min, tzinfo=timezone.utc)

    def query_string(self, *, account: bool = True) -> str:
        """These filters as GET parameters (the CSV link, the links of the page), with or
        without the account."""
        params = {"from": self.start.isoformat(), "to": self.end.isoformat()}
        if self.group:
            params["group"] = str(self.group.pk)
        if self.account and account:
            params["account"] = self.account.email
        if self.model:
            params["model"] = self.model
        if self.tag:
            params["tag"] = "=".join(self.tag)
        if self.batch:
            params["batch"] = self.batch
        return urlencode(params)


BATCH_FILTERS = {"": "Live and batch", "none": "Live calls only", "only": "Batch lines only"}


def parse_filters(params, *, today: date, groups: list) -> tuple[Filters | None, list[str]]:
    """The filters of the GET parameters `from`, `to` (YYYY-MM-DD, UTC days, both included;
    the last DEFAULT_DAYS days by default), `group` (an id of `groups`), `account` (an e-mail
    address or an id), `model` (server/model), `tag` (key=value) and `batch` (`only` the batch lines, `none`
    of them: the live calls). Returns the filters, or None and what is wrong with them, in words for the
    operator."""
    errors = []
    end = _date(params.get("to"), "to", errors) or today
    start = _date(params.get("from"), "from", errors) or max(end, date.min + timedelta(DEFAULT_DAYS)) - timedelta(
        days=DEFAULT_DAYS - 1)
    if not errors and start > end:
        errors.append(f"'from' ({start}) is after 'to' ({end}).")
    elif not errors and (end - start).days + 1 > MAX_DAYS:
        errors.append(f"The range is {(end - start).days + 1} days long; at most {MAX_DAYS} days can be shown at once.")
    elif not errors and end == date.max:
        errors.append(f"'to' must be before {date.max}.")
    group = None
    if raw := (params.get("group") or "").strip():
        group = next((g for g in groups if str(g.pk) == raw), None)
        if group is None:
            errors.append(f"There is no account group with id {raw!r}.")
    account = None
    if (raw := (params.get("account") or "").strip()) and not PRINTABLE.fullmatch(raw):
        errors.append("'account' holds control characters: give an e-mail address or an id.")
    elif raw:
        account = _account(raw)
        if account is None:
            errors.append(f"There is no account {raw!r} (give its e-mail address or its id).")
    model = (params.get("model") or "").strip()
    if len(model) > 300:
        errors.append("'model' is longer than any model id (300 characters).")
    elif not PRINTABLE.fullmatch(model):
        errors.append("'model' holds control characters, which no model id has.")
    tag, wrong = parse_tag(params.get("tag") or "")
    if wrong:
        errors.append(wrong)
    batch = (params.get("batch") or "").strip()
    if batch not in BATCH_FILTERS:
        errors.append(f"'batch' must be only (batch lines only) or none (live calls only), or empty for both, "
                      f"not {batch[:40]!r}.")
    if errors:
        return None, errors
    return Filters(start, end, group, account, model, tag, batch), []


def _date(raw: str | None, name: str, errors: list[str]) -> date | None:
    raw = (raw or "").strip()
    if not raw:
        return None
    try:
        if DATE.fullmatch(raw):
            return date.fromisoformat(raw)
    except ValueError:
        pass
    errors.append(f"'{name}' must be a date written YYYY-MM-DD, not {raw[:40]!r}.")
    return None


def _account(raw: str):
    lookup = {"pk": int(raw)} if raw.isdigit() and len(raw) < 19 else {"email__iexact": raw}
    return account_model().objects.select_related("group").filter(**lookup).first()


def parse_tag(text: str) -> tuple[tuple[str, str] | None, str | None]:
    """A tag filter written `key=value` (split at the first `=`): the (key, value), or None and what is
    wrong with it, in words for the operator. The empty text is no filter."""
    if not text:
        return None, None
    key, equals, value = text.partition("=")
    if not equals or not key:
        return None, f"'tag' must be written key=value, not {text[:80]!r}."
    if len(key) > MAX_TAG_KEY or len(value) > MAX_TAG_VALUE:
        return None, (f"'tag' is longer than any tag (keys up to {MAX_TAG_KEY} characters, values up to "
                      f"{MAX_TAG_VALUE}).")
    if not PRINTABLE.fullmatch(text):
        return None, "'tag' holds control characters."
    return (key, value), None


def with_tag(rows: QuerySet, tag: tuple[str, str] | None) -> QuerySet:
    """The rows (usage records, calls) whose `tags` have `tag` (key, value): PostgreSQL's JSON containment;
    elsewhere (SQLite) the object's members, compared by key and text (a JSON path would take a key of
    digits for an index, and cannot name a key with a double quote)."""
    if tag is None:
        return rows
    key, value = tag
    if connection.vendor == "postgresql":
        return rows.filter(tags__contains={key: value})
    column = f"{connection.ops.quote_name(rows.model._meta.db_table)}.{connection.ops.quote_name('tags')}"
    member = RawSQL(f"EXISTS (SELECT 1 FROM json_each({column}) AS t WHERE t.key = %s AND t.type = 'text' "
                    "AND t.value = %s)", (key, value), output_field=BooleanField())
    return rows.filter(member)


# --- the page's queries -----------------------------------------------------------------------


def with_batch(rows: QuerySet, batch: str) -> QuerySet:
    """The usage records of the batch lines (`only`), of the live calls (`none`), or all ("")."""
    if batch == "only":
        return rows.exclude(batch_id="")
    return rows.filter(batch_id="") if batch == "none" else rows


def _daily(f: Filters):
    """The rows the figures add up: the roll-up's days, or with a tag or batch filter the records that pass it."""
    if not f.from_records:
        rows = UsageDaily.objects.filter(day__gte=f.start, day__lte=f.end)
    else:
        rows = with_batch(with_tag(UsageRecord.objects.filter(created_at__gte=f.since, created_at__lt=f.until),
                                   f.tag), f.batch)
    if f.group:
        rows = rows.filter(account__group=f.group)
    if f.account:
        rows = rows.filter(account=f.account)
    return rows


SUMS = {"calls": Sum("calls"), "input_tokens": Sum("input_tokens"), "output_tokens": Sum("output_tokens"),
        "cost_units": Sum("cost_units")}
RECORD_SUMS = {**SUMS, "calls": Count("id")}  # a record is one call


def _sums(f: Filters) -> dict:
    return RECORD_SUMS if f.from_records else SUMS


def usage_by_day_and_model(f: Filters) -> list[dict]:
    """Calls, tokens and spend per day and model, of every model: the model filter is the caller's
    to apply, so that the same rows also give the models of the range (one query)."""
    if not f.from_records:
        rows = _daily(f).values("day", "model")
    else:  # a record's UTC day, as the roll-up's triggers take it
        rows = _daily(f).values("model", day=TruncDate("created_at", tzinfo=timezone.utc))
    return list(rows.annotate(**_sums(f)).order_by("day", "model"))


def top_accounts(f: Filters, limit: int = TOP_ACCOUNTS) -> list[dict]:
    """The ids of the accounts that used the most tokens in the range, with their sums and spend
    (one query, grouped by the account's id alone: the names are read for the few kept, by
    `account_names`)."""
    rows = _daily(f).filter(model=f.model) if f.model else _daily(f)
    return list(rows.values("account_id").annotate(tokens=Sum(TOKENS))  # before the sums named like columns
                .annotate(**_sums(f)).order_by("-tokens", "account_id")[:limit])


def usage_by_group(f: Filters) -> list[dict]:
    """Calls, tokens and spend per account group (its id: the page has every group's name), most
    spent first, then most tokens (one query; the account's group now, as the group filter reads it)."""
    rows = _daily(f).filter(model=f.model) if f.model else _daily(f)
    return list(rows.values(group_id=F("account__group_id")).annotate(tokens=Sum(TOKENS))
                .annotate(**_sums(f)).order_by("-cost_units", "-tokens", "group_id"))


class ModelPrice(NamedTuple):
    """A model's prices per million tokens now, in settings.CURRENCY; None: none of this kind."""

    input_price: Decimal | None
    cached_input_price: Decimal | None
    cache_write_price: Decimal | None
    output_price: Decimal | None


def model_prices() -> dict[str, ModelPrice]:
    """The current prices of every model by its id (`server/model`), one query. An alias
    deployment may have prices of its own, which the calls through it were metered with."""
    return {f"{server}/{name}": ModelPrice(*prices) for server, name, *prices in
            Model.objects.values_list("server__name", "name", *ModelPrice._fields)}


def cache_hits(f: Filters) -> list[dict]:
    """Per model, every model: the calls answered from the response cache (gateway/cache/) in the
    range, group and account filtered on, and the tokens they delivered, which no model server read or
    wrote (one query over the cached records alone: a partial index, migration 0009). The model filter
    is the caller's to apply. Read from the records, not the roll-up, which does not tell hits apart."""
    rows = _apart(f, UsageRecord.objects.filter(cached=True), f.batch)
    return list(rows.values("model").annotate(hits=Count("id"), input_tokens=Sum("input_tokens"),
                                              output_tokens=Sum("output_tokens")).order_by("model"))


def batch_use(f: Filters) -> list[dict]:
    """Per model, every model: the batch lines' calls metered in the range (each one record), their tokens and
    their spend at the batch price, under the group, account and tag filters (one query over the batch
    records alone: a partial index, migration 0023; none with the live calls only). The model filter is the
    caller's to apply."""
    if f.batch == "none":
        return []
    rows = _apart(f, UsageRecord.objects.exclude(batch_id=""), "")
    return list(rows.values("model").annotate(calls=Count("id"), input_tokens=Sum("input_tokens"),
                                              output_tokens=Sum("output_tokens"), cost_units=Sum("cost_units"))
                .order_by("model"))


def _apart(f: Filters, rows: QuerySet, batch: str) -> QuerySet:
    """Records read apart from the roll-up (`rows`), in the range and under the filters but the model's."""
    rows = with_batch(with_tag(rows.filter(created_at__gte=f.since, created_at__lt=f.until), f.tag), batch)
    if f.group:
        rows = rows.filter(account__group=f.group)
    if f.account:
        rows = rows.filter(account=f.account)
    return rows


def account_names(ids) -> dict[int, tuple[str, str]]:
    """E-mail address and group name of each account of `ids` (one query)."""
    return {pk: (email, group) for pk, email, group in
            account_model().objects.filter(pk__in=set(ids)).values_list("pk", "email", "group__name")}


def failure_counts(f: Filters) -> list[dict]:
    """Per model, every model: how often it fell through, failed last in its chain, was refused
    (one query). The model filter is the caller's to apply; the account, group and tag filters do
    not apply (the failures are counted per model only)."""
    rows = CallFailureDaily.objects.filter(day__gte=f.start, day__lte=f.end)
    by_model: dict[str, dict] = {}
    for row in rows.values("model", "kind").annotate(n=Sum("count")).order_by("model"):
        entry = by_model.setdefault(row["model"],
                                    {"model": row["model"], **dict.fromkeys(CallFailureDaily.Kind.values, 0)})
        entry[row["kind"]] = row["n"]
    return list(by_model.values())


# --- the calls log's counts (gateway/console/call_counts.py: the calls as the Calls list counts them) ----------


def _calls(f: Filters) -> QuerySet:
    """The calls of the range under the filters, as the Calls list filters them: the group the call was
    made in, the account, the model that answered (a call no model answered has none), the tag."""
    rows = with_tag(calls_between(f.since, f.until), f.tag)
    if f.group:
        rows = rows.filter(group=f.group)
    if f.account:
        rows = rows.filter(account=f.account)
    return rows


def calls_by_day_and_model(f: Filters) -> list[dict]:
    """Calls and failed calls per UTC day and model that answered ("" for none), of every model (the
    model filter is the caller's to apply, as for `usage_by_day_and_model`). One query."""
    return list(_calls(f).values("model", day=TruncDate("created_at", tzinfo=timezone.utc)).annotate(**COUNTS)
                .order_by("day", "model"))


def calls_by(f: Filters, name: str, ids) -> dict:
    """Calls per `name` (account_id or group_id) of `ids`, under every filter. One query."""
    rows = _calls(f).filter(model=f.model) if f.model else _calls(f)
    return {row[name]: row["calls"] for row in rows.filter(**{f"{name}__in": list(ids)}).values(name)
            .annotate(calls=COUNTS["calls"]).order_by()}
