"""What the console's home reads of the calls log: per model, over a window, the calls, how many
failed, and the latency and time to first token at the median and the 95th percentile.

    calls_per_model(since=now - timedelta(hours=1))  # [ModelCalls, ...], the busiest model first

A call counts under the model that answered it, or, when none did, the model it asked for. Calls
the gateway refused before any model (a credential, a ceiling, a quota, the input) are not a model's:
they are left out. Errors are the calls that failed (no model answered, a server's refusal, a 5xx)
or were cut midway; a client that left is a call, not an error.

Bounded work whatever the number of calls: on PostgreSQL one query, the percentiles by
`percentile_cont` (continuous, interpolated) in the database; on SQLite, which has no percentile
function, one query for the exact counts and one for the latencies of the window's most recent
SAMPLE_CAP calls, whose percentiles are worked out here the way `percentile_cont` does."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from django.db import connection
from django.db.models import Aggregate, Count, F, FloatField, Q, QuerySet, Value
from django.db.models.functions import Coalesce, NullIf

from gateway.models import CallRecord

SAMPLE_CAP = 20_000  # SQLite: the most recent calls of the window whose latencies are read
ERRORS = (CallRecord.Outcome.FAILED, CallRecord.Outcome.CUT)


@dataclass(frozen=True)
class ModelCalls:
    model: str
    calls: int
    errors: int
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    ttft_p50_ms: float | None
    ttft_p95_ms: float | None

    @property
    def error_rate(self) -> float:
        """Errors over calls, 0.0 to 1.0."""
        return self.errors / self.calls if self.calls else 0.0


class PercentileCont(Aggregate):
    """PostgreSQL's `percentile_cont(p) WITHIN GROUP (ORDER BY x)`; NULLs are left out."""

    function = "PERCENTILE_CONT"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()

    def __init__(self, expression, fraction: float) -> None:
        super().__init__(expression, fraction=float(fraction))


def calls_per_model(*, since: datetime, until: datetime | None = None) -> list[ModelCalls]:
    """The models' calls from `since` (to `until`, default now), the busiest first."""
    calls = _window(since, until).annotate(who=Coalesce(NullIf("model", Value("")), F("model_requested")))
    counted = calls.values("who").annotate(calls=Count("id"), errors=Count("id", filter=Q(outcome__in=ERRORS)))
    if connection.vendor == "postgresql":
        rows = counted.annotate(l50=PercentileCont("latency_ms", 0.5), l95=PercentileCont("latency_ms", 0.95),
                                t50=PercentileCont("ttft_ms", 0.5), t95=PercentileCont("ttft_ms", 0.95))
        found = [ModelCalls(r["who"], r["calls"], r["errors"], r["l50"], r["l95"], r["t50"], r["t95"]) for r in rows]
    else:
        timings: dict[str, tuple[list[float], list[float]]] = {}
        recent = calls.order_by("-created_at").values_list("who", "latency_ms", "ttft_ms")[:SAMPLE_CAP]
        for who, latency, ttft in recent:
            latencies, ttfts = timings.setdefault(who, ([], []))
            latencies.append(latency)
            if ttft is not None:
                ttfts.append(ttft)
        found = []
        for r in counted:
            latencies, ttfts = (sorted(values) for values in timings.get(r["who"], ([], [])))
            found.append(ModelCalls(r["who"], r["calls"], r["errors"], percentile(latencies, 0.5),
                                    percentile(latencies, 0.95), percentile(ttfts, 0.5), percentile(ttfts, 0.95)))
    return sorted(found, key=lambda m: (-m.calls, m.model))


def _window(since: datetime, until: datetime | None) -> QuerySet:
    calls = CallRecord.objects.filter(created_at__gte=since).exclude(outcome=CallRecord.Outcome.REFUSED)
    return calls.filter(created_at__lt=until) if until is not None else calls


def percentile(ordered: list[float], fraction: float) -> float | None:
    """`percentile_cont` of sorted values: interpolated between the two nearest ranks."""
    if not ordered:
        return None
    position = fraction * (len(ordered) - 1)
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)
