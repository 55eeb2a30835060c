"""What the console's home reads: the usage of the span shown (the last hour by minute, the last
day by hour, the last 30 UTC days by day), the models and accounts that used the most, each model
server's health, and the accounts closest to a token ceiling or a budget now.

The number of queries is fixed, whatever the number of records, servers or accounts
(tests/gateway/console/test_console_home.py counts them): the hour and the day are read from the
usage records (an index range on `created_at`, three aggregates: per bucket, per model, per
account), the 30 days from the daily roll-up (UsageDaily, the same three over days); the calls per
bucket, and how many failed, from the calls log in one more (gateway/console/call_counts.py: the
count the Calls list and the usage console give too), and the calls of the models and accounts shown
in two more; the servers
in one query and their health in one read of the shared state (gateway/registry/server_health.py);
the quota and budget panels are the usage console's two queries (gateway/console/usage_windows.py);
the names of the accounts shown in one more. Spend is `cost_units` (COST_UNITS of settings.CURRENCY,
gateway/registry/prices.py), summed exactly and shown with `money_text`."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone

from django.db.models import Count, Sum
from django.db.models.functions import Trunc

from gateway.console.call_counts import COUNTS, calls_between
from gateway.console.usage_reads import TOKENS, Filters, account_names
from gateway.console.usage_windows import AccountUse, window_use
from gateway.models import ModelServer, UsageDaily, UsageRecord
from gateway.registry import server_health
from gateway.registry.prices import money_text

TOP_MODELS = 8
TOP_ACCOUNTS = 8
NEAREST = 5  # accounts shown in each of the quota and budget panels


@dataclass(frozen=True)
class Span:
    key: str  # the page's `range` parameter
    label: str
    bucket: str  # minute, hour or day: one bar of the charts
    buckets: int

    @property
    def bucket_length(self) -> timedelta:
        return {"minute": timedelta(minutes=1), "hour": timedelta(hours=1), "day": timedelta(days=1)}[self.bucket]

    def starts(self, now: datetime) -> list[datetime]:
        """The start of each bucket, oldest first; the last one holds `now`."""
        now = now.astimezone(timezone.utc)
        last = {"minute": now.replace(second=0, microsecond=0),
                "hour": now.replace(minute=0, second=0, microsecond=0),
                "day": now.replace(hour=0, minute=0, second=0, microsecond=0)}[self.bucket]
        return [last - self.bucket_length * (self.buckets - 1 - i) for i in range(self.buckets)]


SPANS = {span.key: span for span in (Span("hour", "Last hour", "minute", 60), Span("day", "Last 24 hours", "hour", 24),
                                     Span("30d", "Last 30 days", "day", 30))}
DEFAULT_SPAN = "day"


def span_of(value: str | None) -> Span:
    """The span the page's `range` names; anything else (missing, unknown) is the default."""
    return SPANS.get(value or "", SPANS[DEFAULT_SPAN])


@dataclass
class Bucket:
    start: datetime
    calls: int = 0  # of the calls log; the tokens and cost are the usage records'
    failed: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_units: int = 0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass
class Usage:
    """A model's or an account's sums over the span."""

    key: str  # the model id, or the account's e-mail address
    calls: int
    input_tokens: int
    output_tokens: int
    cost_units: int
    group: str = ""

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def spend(self) -> str:
        return money_text(self.cost_units, 2)


@dataclass
class ServerState:
    name: str
    pk: int
    enabled: bool
    models: int
    health: server_health.Health | None

    @property
    def state(self) -> str:
        """disabled, cooling down, failing (its last call failed), healthy, idle (no call seen) or
        unknown (the shared state could not be read and this process saw nothing)."""
        h = self.health
        if not self.enabled:
            return "disabled"
        if h is None:
            return "unknown"
        if h.cooling_down:
            return "cooling down"
        if h.last_failure and (h.last_success is None or h.last_failure > h.last_success):
            return "failing"
        if h.last_success:
            return "healthy"
        return "idle" if h.shared else "unknown"


@dataclass
class Home:
    span: Span
    since: datetime
    now: datetime
    buckets: list[Bucket]
    models: list[Usage]
    accounts: list[Usage]
    servers: list[ServerState]
    quotas: list[AccountUse] = field(default_factory=list)
    budgets: list[AccountUse] = field(default_factory=list)

    def total(self, name: str) -> int:
        return sum(getattr(b, name) for b in self.buckets)

    @property
    def until(self) -> datetime:
        """The end of the span's last bucket (after now)."""
        return self.buckets[-1].start + self.span.bucket_length

    @property
    def minutes(self) -> float:
        """Minutes from the span's start to now (the last bucket is still filling)."""
        return max((self.now - self.since).total_seconds() / 60, 1.0)

    @property
    def calls_per_minute(self) -> float:
        return self.total("calls") / self.minutes

    @property
    def peak_per_minute(self) -> float:
        """The busiest bucket's calls per minute (for the hour: the busiest minute)."""
        per = self.span.bucket_length.total_seconds() / 60
        return max((b.calls / per for b in self.buckets), default=0.0)


def home_figures(*, span: Span, now: datetime) -> Home:
    starts = span.starts(now)
    since = starts[0]
    buckets = {start: Bucket(start) for start in starts}
    if span.bucket == "day":
        rows = UsageDaily.objects.filter(day__gte=since.date(), day__lte=now.date())
        per_bucket = rows.values("day").annotate(n=Sum("calls"), i=Sum("input_tokens"), o=Sum("output_tokens"),
                                                 c=Sum("cost_units"))
        for row in per_bucket:
            _fill(buckets.get(_midnight(row["day"])), row)
        calls = Sum("calls")
    else:
        rows = UsageRecord.objects.filter(created_at__gte=since, created_at__lt=starts[-1] + span.bucket_length)
        per_bucket = rows.annotate(at=Trunc("created_at", span.bucket, tzinfo=timezone.utc)).values("at").annotate(
            n=Count("id"), i=Sum("input_tokens"), o=Sum("output_tokens"), c=Sum("cost_units"))
        for row in per_bucket.order_by():
            _fill(buckets.get(row["at"]), row)
        calls = Count("id")
    calls_log = calls_between(since, starts[-1] + span.bucket_length)
    for row in (calls_log.annotate(at=Trunc("created_at", span.bucket, tzinfo=timezone.utc)).values("at")
                .annotate(**COUNTS).order_by()):
        if (bucket := buckets.get(row["at"])) is not None:
            bucket.calls += row["calls"]
            bucket.failed += row["failed"]
    sums = {"n": calls, "i": Sum("input_tokens"), "o": Sum("output_tokens"), "c": Sum("cost_units")}
    models = [_usage(row["model"], row) for row in rows.values("model").annotate(t=Sum(TOKENS), **sums)
              .order_by("-c", "-t", "model")[:TOP_MODELS]]
    top = list(rows.values("account_id").annotate(t=Sum(TOKENS), **sums).order_by("-t", "account_id")[:TOP_ACCOUNTS])
    quotas, budgets = window_use(Filters(now.date(), now.date()), now=now)
    nearest = quotas.rows[:NEAREST] + budgets.rows[:NEAREST]
    names = account_names([row["account_id"] for row in top] + [use.account_id for use in nearest])
    # the calls of the models and accounts shown, as the Calls list counts them (their tokens stay metered)
    model_calls = dict(calls_log.filter(model__in=[m.key for m in models]).values("model")
                       .annotate(n=COUNTS["calls"]).order_by().values_list("model", "n"))
    account_calls = dict(calls_log.filter(account_id__in=[row["account_id"] for row in top]).values("account_id")
                         .annotate(n=COUNTS["calls"]).order_by().values_list("account_id", "n"))
    for model in models:
        model.calls = model_calls.get(model.key, 0)
    accounts = []
    for row in top:
        email, group = names.get(row["account_id"], ("(deleted)", ""))
        accounts.append(_usage(email, {**row, "n": account_calls.get(row["account_id"], 0)}, group=group))
    for use in nearest:
        use.email, use.group = names.get(use.account_id, ("(deleted)", ""))
    return Home(span, since, now, list(buckets.values()), models, accounts, server_states(),
                quotas.rows[:NEAREST], budgets.rows[:NEAREST])


def server_states() -> list[ServerState]:
    """Every model server with its number of models and its health (one query, one read of the
    shared state)."""
    servers = list(ModelServer.objects.annotate(model_count=Count("models")).order_by("name")
                   .values_list("pk", "name", "enabled", "model_count"))
    health = server_health.health_of(pk for pk, *_ in servers) if servers else {}
    return [ServerState(name, pk, enabled, count, health.get(pk)) for pk, name, enabled, count in servers]


def _midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=timezone.utc)


def _fill(bucket: Bucket | None, row: dict) -> None:
    if bucket is None:  # a record stamped in the future (a clock ahead): not in the span's buckets
        return
    bucket.input_tokens += row["i"] or 0
    bucket.output_tokens += row["o"] or 0
    bucket.cost_units += row["c"] or 0


def _usage(key: str, row: dict, *, group: str = "") -> Usage:
    return Usage(key, row["n"] or 0, row["i"] or 0, row["o"] or 0, row["c"] or 0, group)
