"""Prometheus metrics, counted in every process: web workers and Celery workers alike.

prometheus_client runs in multiprocess mode: each process writes its values to files of its own
in settings.PROMETHEUS_MULTIPROC_DIR (a change is one write to a memory-mapped file), and
GET /metrics adds up the files of every process (gateway/ops/metrics_collectors.py). What each series
means, and alert rules on them: docs/operations.md.

Label values are bounded, so that no client can make series without end: a route is the URL
pattern (`api/v1/hooks/<str:token>`), never the path, which would make a series per webhook token
or id; a method outside the usual ones is `other`; a server and a model are the registry's names,
never a name a client sent.

On the call's path a change costs a dict lookup and a memory write: each labelled child is made
once (`.labels()` checks its values and takes a lock) and kept in a dict keyed by its values.
"""

from __future__ import annotations

import os

from django.conf import settings

os.makedirs(settings.PROMETHEUS_MULTIPROC_DIR, exist_ok=True)  # made, and named where prometheus_client reads it,
os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(settings.PROMETHEUS_MULTIPROC_DIR)  # before it is imported
from prometheus_client import Counter, Gauge, Histogram, values  # noqa: E402 — after the folder is set

if not values.ValueClass._multiprocess:  # imported before the folder was named (by metrics_view, say)
    values.ValueClass = values.MultiProcessValue()

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
UNMATCHED = "unmatched"  # a path no route matched (a 404): the path itself is never a label
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
RUN_BUCKETS = (0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)

REQUESTS = Counter("gateway_http_requests", "HTTP requests answered, by route pattern, method and status.",
                   ["route", "method", "status"], registry=None)
REQUEST_SECONDS = Histogram("gateway_http_request_duration_seconds",
                            "Time from a request's arrival to the end of its answer (a stream's last byte), "
                            "by route pattern.", ["route"], buckets=LATENCY_BUCKETS, registry=None)
UPSTREAM_CALLS = Counter("gateway_upstream_calls", "Calls to model servers, by server, model and outcome (ok: "
                         "the reply began; refused, unavailable, unreachable, bad_response: it failed before "
                         "its first byte).", ["server", "model", "outcome"], registry=None)
UPSTREAM_CUTS = Counter("gateway_upstream_cuts", "Replies that began and stopped midway, by server, model and "
                        "reason (read_timeout, disconnected, upstream_error).", ["server", "model", "reason"],
                        registry=None)
FALL_THROUGHS = Counter("gateway_fall_throughs", "Models that failed before their first byte while a next model "
                        "was left in the chain, which was tried: by the failing server, model and reason.",
                        ["server", "model", "reason"], registry=None)
TOKENS = Counter("gateway_tokens", "Tokens metered, by model and direction (input, output).",
                 ["model", "direction"], registry=None)
CACHE_HITS = Counter("gateway_cache_hits", "Chat replies given from the response cache (no model server called), "
                     "by the model that made the cached reply.", ["model"], registry=None)
CACHE_SAVED_TOKENS = Counter("gateway_cache_saved_tokens", "Tokens of the replies given from the response cache, "
                             "which no model server had to read or write, by model and direction (input, output). "
                             "They are also in gateway_tokens: a hit is metered like any call.",
                             ["model", "direction"], registry=None)
RATE_LIMIT_REFUSALS = Counter("gateway_rate_limit_refusals", "Requests refused 429 by a request ceiling, by the "
                              "counter that refused (shared, general, login, hooks, collection_*).", ["limit"],
                              registry=None)
QUOTA_REFUSALS = Counter("gateway_quota_refusals", "Calls refused 403 because a token quota was used up, by "
                         "window (day, week, month).", ["window"], registry=None)
BUDGET_REFUSALS = Counter("gateway_budget_refusals", "Calls refused 403 because a budget in money was spent, by "
                          "window (day, week, month).", ["window"], registry=None)
SPEND = Counter("gateway_spend", "What the metered calls cost, in the installation's currency (the currency label), "
                "by the model that answered: its price times its tokens; a reply from the response cache costs "
                "nothing.", ["model", "currency"], registry=None)
ROUTINE_RUNS = Counter("gateway_routine_runs", "Routine runs ended, by outcome (succeeded, failed).", ["outcome"],
                       registry=None)
ROUTINE_RUN_SECONDS = Histogram("gateway_routine_run_duration_seconds", "Time from a run's start to its end.",
                                buckets=RUN_BUCKETS, registry=None)
LOG_REDACTION_FAILURES = Counter("gateway_log_redaction_failures", "Log records whose redaction failed, each "
                                 "written as a fixed text instead, its message, arguments, fields and traceback left "
                                 "out (gateway/telemetry/logfilters.py).", registry=None)
BATCH_SPEND = Counter("gateway_batch_spend", "Of gateway_spend, what batch lines cost (at their batch price), by "
                      "model.", ["model", "currency"], registry=None)
PROCESSES = Gauge("gateway_processes", "Processes alive that count metrics, by kind (web, worker).", ["kind"],
                  multiprocess_mode="livesum", registry=None)

_children: dict[tuple, object] = {}


def _child(metric, *label_values):
    """The child of `metric` for these label values, made once (the values as given, unconverted,
    are the key: a status is an int here and its text in the series)."""
    key = (metric, *label_values)
    child = _children.get(key)
    if child is None:
        child = _children[key] = metric.labels(*label_values)
    return child


def request_done(route: str | None, method: str, status: int, seconds: float) -> None:
    route = route or UNMATCHED
    _child(REQUESTS, route, method if method in METHODS else "other", status).inc()
    _child(REQUEST_SECONDS, route).observe(seconds)


def upstream_call(server: str, model: str, outcome: str) -> None:
    _child(UPSTREAM_CALLS, server, model, outcome).inc()


def upstream_cut(server: str, model: str, reason: str) -> None:
    _child(UPSTREAM_CUTS, server, model, reason).inc()


def fall_through(server: str, model: str, reason: str) -> None:
    _child(FALL_THROUGHS, server, model, reason).inc()


def tokens(model: str, input_tokens: int, output_tokens: int) -> None:
    if input_tokens:
        _child(TOKENS, model, "input").inc(input_tokens)
    if output_tokens:
        _child(TOKENS, model, "output").inc(output_tokens)


def cache_hit(model: str, input_tokens: int, output_tokens: int) -> None:
    _child(CACHE_HITS, model).inc()
    if input_tokens:
        _child(CACHE_SAVED_TOKENS, model, "input").inc(input_tokens)
    if output_tokens:
        _child(CACHE_SAVED_TOKENS, model, "output").inc(output_tokens)


def spend(model: str, cost_units: int, *, batch: bool = False) -> None:
    """A call's cost (COST_UNITS, gateway/registry/prices.py), added in the currency; a float here only. A batch
    line's is counted in the batch spend too."""
    if cost_units:
        _child(SPEND, model, settings.CURRENCY).inc(cost_units / 10**10)
        if batch:
            _child(BATCH_SPEND, model, settings.CURRENCY).inc(cost_units / 10**10)


def budget_refused(window: str) -> None:
    _child(BUDGET_REFUSALS, window).inc()


def rate_limit_refused(limit: str) -> None:
    _child(RATE_LIMIT_REFUSALS, limit).inc()


def quota_refused(window: str) -> None:
    _child(QUOTA_REFUSALS, window).inc()


def routine_run_ended(outcome: str, seconds: float | None) -> None:
    _child(ROUTINE_RUNS, outcome).inc()
    if seconds is not None:
        ROUTINE_RUN_SECONDS.observe(max(seconds, 0.0))


def log_redaction_failed() -> None:
    """A log record withheld (gateway/telemetry/logfilters.py, which calls it so that it never raises)."""
    LOG_REDACTION_FAILURES.inc()


def process_started(kind: str) -> None:
    """This process counts as one `kind` process until it is marked dead (gateway/telemetry/metrics_files.py)."""
    _child(PROCESSES, kind).set(1)
