"""The usage console: the admin page an operator opens first (linked at the top of the admin
index), and the CSV export of its filtered usage records. Served through the admin site
(UsageRecordAdmin.get_urls): staff who may view usage records. The queries are in
gateway/console/usage_reads.py, the charts' geometry in gateway/console/usage_chart.py."""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime, timedelta

from asgiref.sync import sync_to_async
from django import forms
from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.core.handlers.asgi import ASGIRequest
from django.db.models import Q
from django.http import StreamingHttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone
from unfold.widgets import DATETIME_CLASSES, UnfoldAdminSelectWidget, UnfoldAdminTextInputWidget

from gateway.console.call_counts import calls_link
from gateway.console.fields.money import currency, price_summary
from gateway.console.styles import look
from gateway.console.usage_chart import chart_series, stacked_bars
from gateway.console.usage_reads import (
    BATCH_FILTERS,
    Filters,
    account_names,
    batch_use,
    cache_hits,
    calls_by,
    calls_by_day_and_model,
    failure_counts,
    model_prices,
    parse_filters,
    top_accounts,
    usage_by_day_and_model,
    usage_by_group,
    with_batch,
    with_tag,
)
from gateway.console.usage_windows import window_use
from gateway.models import CallFailureDaily, UsageRecord, account_group_model
from gateway.registry.prices import money_text
from gateway.web.output import timestamp

# cost and the cached columns, then the call's tags (a JSON object, empty for none), then the input tokens
# written to the provider's prompt cache, then a batch line's batch (empty for a live call) come after the
# first columns, which keep their places
CSV_COLUMNS = ["created_at", "account", "group", "model", "surface", "input_tokens", "output_tokens",
               "total_tokens", "request_id", "cost", "cached_input_tokens", "cached", "tags",
               "cache_write_input_tokens", "batch_id"]
METERED = ("input_tokens", "output_tokens", "cost_units")  # the usage records'
SUMMED = ("calls", "failed", *METERED)  # calls and failed calls: the calls log's
NONE_ANSWERED = "(none answered)"  # the calls no model answered, in the per-model figures
CSV_CHUNK = 5000
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def usage_console(request, admin_site):
    """The console page; filters that cannot be read are answered 400 with what is wrong."""
    _may_view_usage(request)
    now = timezone.now()
    groups = list(account_group_model().objects.order_by("name"))
    filters, errors = parse_filters(request.GET, today=now.date(), groups=groups)
    context = {**admin_site.each_context(request), "title": "Usage console", "groups": groups,
               "errors": errors, "params": request.GET, "filters": filters}
    if filters is not None:
        context.update(_figures(filters, now, groups))
    context["form"] = filter_form(filters, request.GET, groups=groups, models=context.get("models", []))
    context["look"] = look()
    return TemplateResponse(request, "admin/usage_console.html", context, status=400 if errors else 200)


# The filters drawn with the theme's widgets (django-unfold's inputs and selects, as every other console form
# has them). Only the drawing: usage_reads.parse_filters reads what was sent and says what is wrong with it.
DATE = {"type": "date", "class": " ".join(DATETIME_CLASSES)}


def filter_form(filters: Filters | None, params, *, groups: list, models: list[str]) -> forms.Form:
    """The form as the page shows it: the filters read (or, when they could not be read, what was sent). No
    field is required: an empty one is no filter (the browser must not refuse to send the form)."""
    day = forms.DateInput(attrs=DATE, format="%Y-%m-%d")
    fields = {
        "from": forms.CharField(label="From (UTC day)", widget=day),
        "to": forms.CharField(label="To (included)", widget=day),
        "group": forms.ChoiceField(label="Group", choices=[("", "All groups")] + [(g.pk, g.name) for g in groups],
                                   widget=UnfoldAdminSelectWidget),
        "account": forms.CharField(label="Account (e-mail or id)", widget=UnfoldAdminTextInputWidget),
        "model": forms.ChoiceField(label="Model", choices=[("", "All models")] + [(m, m) for m in models],
                                   widget=UnfoldAdminSelectWidget),
        "tag": forms.CharField(label="Tag (key=value)",
                               widget=UnfoldAdminTextInputWidget(attrs={"placeholder": "app=billing"})),
        "batch": forms.ChoiceField(label="Calls", choices=list(BATCH_FILTERS.items()), widget=UnfoldAdminSelectWidget),
    }
    for field in fields.values():
        field.required = False
    if filters is None:
        initial = {name: params.get(name, "") for name in fields}
    else:
        initial = {"from": filters.start, "to": filters.end,  # dates, written by the widget's format
                   "group": filters.group.pk if filters.group else "",
                   "account": filters.account.email if filters.account else "", "model": filters.model,
                   "tag": "=".join(filters.tag) if filters.tag else "", "batch": filters.batch}
    form = type("UsageFilterForm", (forms.Form,), dict(fields))(initial=initial)
    return form


def _figures(f: Filters, now: datetime, groups: list) -> dict:
    every_model = usage_by_day_and_model(f)
    # the calls log does not tell a batch line's call from a live one: with the batch filter, the records
    # count the calls (the metered ones; the failed are not told apart)
    calls_of_every_model = ([{**r, "failed": 0} for r in every_model] if f.batch else calls_by_day_and_model(f))
    failures_of_every_model = failure_counts(f)
    hits_of_every_model = cache_hits(f)
    batch_of_every_model = batch_use(f)
    models = ({r["model"] for r in every_model} | {r["model"] for r in calls_of_every_model}
              | {r["model"] for r in failures_of_every_model} | {f.model}) - {""}
    rows = [r for r in every_model if r["model"] == f.model] if f.model else every_model
    call_rows = [r for r in calls_of_every_model if r["model"] == f.model] if f.model else calls_of_every_model
    failures = [r for r in failures_of_every_model if r["model"] == f.model] if f.model else failures_of_every_model
    hits = [r for r in hits_of_every_model if r["model"] == f.model] if f.model else hits_of_every_model
    for r in hits:
        r["tokens"] = r["input_tokens"] + r["output_tokens"]
    batch_lines = [r for r in batch_of_every_model if r["model"] == f.model] if f.model else batch_of_every_model
    batch_totals = {"calls": 0, **dict.fromkeys(METERED, 0)}
    for r in batch_lines:
        _spend(r)
        for name in batch_totals:
            batch_totals[name] += r[name]
    _spend(batch_totals)
    tokens: dict = {}
    calls: dict = {}
    per_model: dict[str, dict] = {}
    per_day: dict = {}
    for r in rows:  # tokens and spend: the usage records (what was metered)
        tokens[(r["day"], r["model"])] = r["input_tokens"] + r["output_tokens"]
        for sums in (per_day.setdefault(r["day"], _sums(day=r["day"])),
                     per_model.setdefault(r["model"], _sums(model=r["model"]))):
            for name in METERED:
                sums[name] += r[name] or 0
    for r in call_rows:  # calls: the calls log (gateway/console/call_counts.py), as the Calls list counts them
        model = r["model"] or NONE_ANSWERED
        calls[(r["day"], model)] = r["calls"]
        for sums in (per_day.setdefault(r["day"], _sums(day=r["day"])),
                     per_model.setdefault(model, _sums(model=model))):
            sums["calls"] += r["calls"]
            sums["failed"] += r["failed"]
    series = chart_series({model: sums["input_tokens"] + sums["output_tokens"] for model, sums in per_model.items()})
    prices = model_prices()
    unpriced = {model for model in per_model if not _priced(prices.get(model))} - {NONE_ANSWERED}
    top = top_accounts(f)
    if not f.batch:  # with it, the records' count of calls (as above)
        account_calls = calls_by(f, "account_id", [a["account_id"] for a in top])
        for a in top:
            a["calls"] = account_calls.get(a["account_id"], 0)
    quotas, budgets = window_use(f, now=now)
    names = account_names([a["account_id"] for a in top] + [u.account_id for u in quotas.rows + budgets.rows])
    for a in top:
        a["email"], a["group"] = names.get(a["account_id"], ("(deleted)", ""))
    for u in quotas.rows + budgets.rows:
        u.email, u.group = names.get(u.account_id, ("(deleted)", ""))
    group_names = {g.pk: g.name for g in groups}
    per_group = usage_by_group(f)
    group_calls = {} if f.batch else calls_by(f, "group_id", [g["group_id"] for g in per_group])
    for g in per_group:
        g["calls"] = g["calls"] if f.batch else group_calls.get(g["group_id"], 0)
        g["name"] = group_names.get(g["group_id"], f"(group {g['group_id']})")
    for m in per_model.values():
        if m["model"] == NONE_ANSWERED:
            m["price"] = "no model answered these calls"
        else:
            m["price"] = price_summary(prices[m["model"]]) if m["model"] in prices else "no longer configured"
    totals = _sums()
    for d in per_day.values():
        for name in SUMMED:
            totals[name] += d[name]
    for figures in (totals, *per_day.values(), *per_model.values(), *top, *per_group):
        _spend(figures)
    return {
        "totals": totals,
        "currency": currency(),
        "series": series,
        "unpriced": unpriced,
        "charts": [stacked_bars(title="Tokens per day", unit="tokens", days=f.days, values=tokens, series=series),
                   stacked_bars(title="Calls per day", unit="calls", days=f.days, values=calls, series=series)],
        "per_day": [per_day[d] for d in sorted(per_day)],
        "per_model": sorted(per_model.values(), key=lambda m: (-m["cost_units"], -m["tokens"], m["model"])),
        "per_group": per_group,
        "top_accounts": top,
        "ceilings": quotas.rows,
        "ceiling_accounts": quotas.accounts,
        "budgets": budgets.rows,
        "budget_accounts": budgets.accounts,
        "failures": failures,
        "failure_totals": {kind: sum(r[kind] for r in failures) for kind in CallFailureDaily.Kind.values},
        "cache_hits": hits,
        "cache_totals": {name: sum(r[name] for r in hits) for name in ("hits", "input_tokens", "output_tokens",
                                                                       "tokens")},
        "batch_lines": batch_lines,
        "batch_totals": batch_totals,
        "batch_filter": BATCH_FILTERS[f.batch].lower() if f.batch else "",
        "models": sorted(models),
        "calls_kept_since": _calls_kept_since(f, now),
        "calls_kept_days": settings.CALL_LOG_RETENTION_DAYS,
        "calls_link": calls_link(f.since, f.until, **_calls_filters(f)),
        "failed_link": calls_link(f.since, f.until, failed=True, **_calls_filters(f)),
        "query": f.query_string(),
        "query_without_account": f.query_string(account=False),
    }


def _calls_kept_since(f: Filters, now: datetime):
    """The first UTC day the calls log still holds whole, when the range starts before it (the log keeps
    CALL_LOG_RETENTION_DAYS days; the usage records stay): the page says its calls start there. Else None."""
    kept = (now - timedelta(days=settings.CALL_LOG_RETENTION_DAYS)).date() + timedelta(days=1)
    return kept if f.start < kept else None


def _calls_filters(f: Filters) -> dict:
    """The usage console's filters as the Calls list's parameters."""
    params = {}
    if f.group:
        params["group__id__exact"] = f.group.pk
    if f.account:
        params["account__id__exact"] = f.account.pk
    if f.model:
        params["model"] = f.model
    if f.tag:
        params["q"] = "=".join(f.tag)
    return params


def _sums(**named) -> dict:
    return {**named, **dict.fromkeys(SUMMED, 0)}


def _spend(figures: dict) -> None:
    """Adds a figure's tokens and its spend as exact text of the currency (at least two decimals)."""
    figures["cost_units"] = figures["cost_units"] or 0
    figures["tokens"] = (figures["input_tokens"] or 0) + (figures["output_tokens"] or 0)
    figures["spend"] = money_text(figures["cost_units"], 2)


def _priced(price) -> bool:
    return price is not None and (price.input_price is not None or price.output_price is not None)


def usage_csv(request, admin_site):
    """The usage records matching the console's filters, oldest first, as a streamed CSV."""
    _may_view_usage(request)
    filters, errors = parse_filters(request.GET, today=timezone.now().date(),
                                    groups=list(account_group_model().objects.order_by("name")))
    if errors:
        return usage_console(request, admin_site)
    # Under ASGI a synchronous iterator would be read whole into memory before the first byte.
    lines = csv_lines_async(filters) if isinstance(request, ASGIRequest) else csv_lines(filters)
    name = f"usage_{filters.start}_{filters.end}.csv"
    return StreamingHttpResponse(lines, content_type="text/csv; charset=utf-8",
                                 headers={"Content-Disposition": f'attachment; filename="{name}"'})


def _may_view_usage(request) -> None:
    if not request.user.has_perm("gateway.view_usagerecord"):
        raise PermissionDenied


def csv_chunk(f: Filters, after: tuple[datetime, int] | None) -> list[tuple]:
    """The next CSV_CHUNK matching records after `after` (created_at, id), in that order: each
    chunk is one query that starts where the last ended (an index range on created_at, or on
    account and created_at), so memory and time per chunk stay flat however many there are."""
    rows = with_batch(with_tag(UsageRecord.objects.filter(created_at__gte=f.since, created_at__lt=f.until), f.tag),
                      f.batch)
    if f.group:
        rows = rows.filter(account__group=f.group)
    if f.account:
        rows = rows.filter(account=f.account)
    if f.model:
        rows = rows.filter(model=f.model)
    if after is not None:
        rows = rows.filter(Q(created_at__gt=after[0]) | Q(id__gt=after[1]), created_at__gte=after[0])
    return list(rows.order_by("created_at", "id").values_list(
        "id", "created_at", "account__email", "account__group__name", "model", "surface", "input_tokens",
        "output_tokens", "request_id", "cost_units", "cached_input_tokens", "cached", "tags",
        "cache_write_input_tokens", "batch_id")[:CSV_CHUNK])


def csv_text(rows: list[tuple], *, header: bool = False) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    if header:
        writer.writerow(CSV_COLUMNS)
    for _, at, email, group, model, surface, input_tokens, output_tokens, request_id, cost, cached_input, hit, tags, \
            cache_write, batch_id in rows:
        writer.writerow([timestamp(at), _cell(email), _cell(group), _cell(model), _cell(surface), input_tokens,
                         output_tokens, input_tokens + output_tokens, _cell(request_id), money_text(cost),
                         cached_input, "true" if hit else "false", _tags_cell(tags), cache_write, _cell(batch_id)])
    return out.getvalue()


def _tags_cell(tags) -> str:
    """The call's tags as compact JSON ({"app":"billing"}), empty for none (a JSON object never reads as a
    formula: it starts with a brace)."""
    return json.dumps(tags, ensure_ascii=False, separators=(",", ":")) if tags else ""


def _cell(text: str) -> str:
    """A text a spreadsheet would take for a formula is written with a leading apostrophe."""
    return f"'{text}" if text.startswith(FORMULA_START) else text


def csv_lines(f: Filters):
    yield csv_text([], header=True)
    after = None
    while rows := csv_chunk(f, after):
        yield csv_text(rows)
        if len(rows) < CSV_CHUNK:
            break
        after = (rows[-1][1], rows[-1][0])


async def csv_lines_async(f: Filters):
    yield csv_text([], header=True)
    after = None
    while rows := await sync_to_async(csv_chunk)(f, after):
        yield csv_text(rows)
        if len(rows) < CSV_CHUNK:
            break
        after = (rows[-1][1], rows[-1][0])
