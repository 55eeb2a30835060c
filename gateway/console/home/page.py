"""The console's home page: the figures of gateway/console/home/reads.py for the admin index
(templates/admin/index.html), handed over by unfold's DASHBOARD_CALLBACK (settings.UNFOLD). Staff
who may view usage records see the usage, the accounts and the quota and budget panels; those who
may view model servers see their health; the others see the index's list of models alone."""

from __future__ import annotations

from collections import Counter
from urllib.parse import urlencode

from django.utils import timezone

from gateway.console.call_counts import calls_link
from gateway.console.fields.money import currency
from gateway.console.home.call_stats import calls_by_model
from gateway.console.home.chart import bars
from gateway.console.home.reads import SPANS, home_figures, server_states, span_of
from gateway.registry.prices import money_text

STATE_ORDER = ("failing", "cooling down", "unknown", "healthy", "idle", "disabled")


def dashboard(request, context: dict) -> dict:
    """unfold's DASHBOARD_CALLBACK: the index's context with the home's figures (`home`)."""
    user = request.user
    may_usage = user.has_perm("gateway.view_usagerecord")
    may_servers = user.has_perm("gateway.view_modelserver")
    if not (may_usage or may_servers):
        return context
    span = span_of(request.GET.get("range"))
    home: dict = {"span": span, "currency": currency(),
                  "spans": [{"key": s.key, "label": s.label, "active": s == span,
                             "query": urlencode({"range": s.key})} for s in SPANS.values()]}
    if may_usage:
        figures = home_figures(span=span, now=timezone.now())
        servers = figures.servers
        points = [(b.start, b.calls) for b in figures.buckets]
        tokens = [(b.start, b.tokens) for b in figures.buckets]
        home.update({
            "figures": figures,
            "calls": figures.total("calls"),
            "failed": figures.total("failed"),
            "calls_link": calls_link(figures.since, figures.until),
            "failed_link": calls_link(figures.since, figures.until, failed=True),
            "input_tokens": figures.total("input_tokens"),
            "output_tokens": figures.total("output_tokens"),
            "tokens": figures.total("input_tokens") + figures.total("output_tokens"),
            "spend": money_text(figures.total("cost_units"), 2),
            "quotas": [(use, _closest(use)) for use in figures.quotas],
            "budgets": [(use, _closest(use)) for use in figures.budgets],
            "calls_log": calls_by_model(since=figures.since, until=figures.until),
            "per_minute": rate_text(figures.calls_per_minute),
            "peak_per_minute": rate_text(figures.peak_per_minute),
            "charts": [{"title": f"Calls per {span.bucket}",
                        "svg": bars(name="calls", title=f"Calls per {span.bucket}", unit="calls", bucket=span.bucket,
                                    points=points)},
                       {"title": f"Tokens per {span.bucket}",
                        "svg": bars(name="tokens", title=f"Tokens per {span.bucket}", unit="tokens",
                                    bucket=span.bucket, points=tokens, color="var(--color-primary-400, #a78bfa)")}],
        })
    else:
        servers = server_states()
    if may_servers:
        counts = Counter(server.state for server in servers)
        home["servers"] = sorted(servers, key=lambda s: (STATE_ORDER.index(s.state), s.name))
        home["server_counts"] = [(state, counts[state]) for state in STATE_ORDER if counts[state]]
    return {**context, "home": home}


def _closest(use):
    """The window of `use` nearest its ceiling or budget (the day's first on a tie), or None."""
    windows = [w for w in use.windows if w.share is not None]
    return max(windows, key=lambda w: w.share) if windows else None


def rate_text(per_minute: float) -> str:
    """Calls a minute for people: "0", "under 0.01", "0.25", "12.5", "1,200"."""
    if per_minute == 0:
        return "0"
    if per_minute < 0.01:
        return "under 0.01"
    return f"{per_minute:,.2f}".rstrip("0").rstrip(".")
