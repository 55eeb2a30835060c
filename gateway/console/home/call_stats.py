"""The home's view of the calls log (gateway.models.CallRecord): per model over the span
shown, the calls, the share that failed, and the median and 95th percentile of the latency and of
the time to first token. A failed call that no model answered counts for the model asked.

Three queries whatever the number of calls: the counts per model, then each percentile read in the
database by the row's rank within its model (a window function, on PostgreSQL and SQLite alike): the
rows whose rank is the nearest-rank 50th or 95th percentile, at most four a model, for the latency
of the answered calls and for the time to first token of the calls that had one."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, F, Q, Value, Window
from django.db.models.functions import Ceil, Coalesce, NullIf, RowNumber

from gateway.models import CallRecord

TOP_MODELS = 8
ERRORS = (CallRecord.Outcome.FAILED, CallRecord.Outcome.CUT)  # a model's failures, not the gateway's refusals
NOT_THE_MODELS = (CallRecord.Outcome.REFUSED, CallRecord.Outcome.CLIENT_CLOSED)
PERCENTILES = (50, 95)


@dataclass
class ModelCalls:
    model: str
    calls: int
    errors: int
    latency: dict[int, float | None]  # percentile → ms
    ttft: dict[int, float | None]

    @property
    def error_rate(self) -> float:
        return self.errors / self.calls if self.calls else 0.0

    @property
    def error_text(self) -> str:
        """"9.1%", "0%"."""
        return f"{100 * self.error_rate:.1f}".rstrip("0").rstrip(".") + "%"

    @property
    def timings(self) -> list[str]:
        """Latency p50 and p95, then time to first token p50 and p95, as the page writes them ("1,250 ms", "–")."""
        return [f"{values[p]:,.0f} ms" if values.get(p) is not None else "–"
                for values in (self.latency, self.ttft) for p in PERCENTILES]


def calls_by_model(*, since: datetime, until: datetime) -> list[ModelCalls]:
    """The TOP_MODELS models with the most calls in [since, until), with their error rate and percentiles."""
    rows = (CallRecord.objects.filter(created_at__gte=since, created_at__lt=until)
            .exclude(outcome__in=NOT_THE_MODELS)
            .annotate(name=Coalesce(NullIf("model", Value("")), "model_requested")))
    counts = list(rows.values("name").annotate(calls=Count("id"), errors=Count("id", filter=Q(outcome__in=ERRORS)))
                  .order_by("-calls", "name")[:TOP_MODELS])
    found = {row["name"]: ModelCalls(row["name"], row["calls"], row["errors"], {}, {}) for row in counts}
    if not found:
        return []
    scoped = rows.filter(name__in=list(found))
    for field, answered, target in (("latency_ms", Q(outcome=CallRecord.Outcome.OK), "latency"),
                                    ("ttft_ms", Q(ttft_ms__isnull=False), "ttft")):
        for name, percentile, value in _percentiles(scoped.filter(answered), field):
            getattr(found[name], target)[percentile] = value
    return list(found.values())


def _percentiles(rows, field: str):
    """(model, percentile, value) for PERCENTILES of `field` per model: nearest rank, ceil(p/100 × n)."""
    ranked = rows.annotate(rank=Window(RowNumber(), partition_by=[F("name")], order_by=[F(field).asc(), F("id").asc()]),
                           size=Window(Count("id"), partition_by=[F("name")]))
    wanted = Q()
    for percentile in PERCENTILES:
        wanted |= Q(rank=Ceil(F("size") * percentile / 100.0))
    for name, rank, size, value in ranked.filter(wanted).values_list("name", "rank", "size", field):
        for percentile in PERCENTILES:
            if rank == _nearest_rank(percentile, size):
                yield name, percentile, value


def _nearest_rank(percentile: int, size: int) -> int:
    return max(1, -(-percentile * size // 100))
