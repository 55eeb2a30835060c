"""`/api/v1/admin/usage` and `/api/v1/admin/calls`: what the gateway wrote of the calls it served, read
only, newest first. Usage records are the successful calls' tokens and cost as metered (the cost in the
installation's currency, exact decimal text; a later price change never rewrites it); the calls log holds
every call of a model surface, answered or refused, with the chain it tried (never its text).

Filters: `account` (an id), `model` (the model that answered, `server/model`), `since` and `until` (ISO
8601 times: `since` included, `until` not); and for calls `status` (an HTTP status) and `outcome`.
"""

from __future__ import annotations

from admin_api.access import admin_endpoint
from admin_api.filters import id_filter, time_filter
from admin_api.pages import paginate, query_parameters
from gateway.models import CallRecord, UsageRecord
from gateway.registry.prices import money_text
from gateway.web.errors import ValidationFailed
from gateway.web.output import respond

COMMON_FILTERS = ("account", "model", "since", "until")


def usage_record(row: UsageRecord) -> dict:
    return {"id": row.pk, "created_at": row.created_at, "account": row.account_id, "model": row.model,
            "surface": row.surface, "input_tokens": row.input_tokens, "output_tokens": row.output_tokens,
            "cached_input_tokens": row.cached_input_tokens, "cache_write_input_tokens": row.cache_write_input_tokens,
            "cost": money_text(row.cost_units), "cached": row.cached, "request_id": row.request_id,
            "batch_id": row.batch_id or None, "tags": row.tags}


def call_record(row: CallRecord) -> dict:
    return {"id": row.pk, "created_at": row.created_at, "account": row.account_id, "group": row.group_id,
            "surface": row.surface, "model_requested": row.model_requested, "model": row.model,
            "status": row.status, "outcome": row.outcome, "error_code": row.error_code,
            "latency_ms": row.latency_ms, "ttft_ms": row.ttft_ms, "input_tokens": row.input_tokens,
            "output_tokens": row.output_tokens, "cost": money_text(row.cost_units), "cached": row.cached,
            "fall_throughs": row.fall_throughs, "request_id": row.request_id, "attempts": row.attempts,
            "tags": row.tags, "guard": row.guard}


def _filtered(rows, params: dict[str, str]):
    if "account" in params:
        rows = rows.filter(account_id=id_filter(params, "account"))
    if "model" in params:
        rows = rows.filter(model=params["model"])
    if "since" in params:
        rows = rows.filter(created_at__gte=time_filter(params, "since"))
    if "until" in params:
        rows = rows.filter(created_at__lt=time_filter(params, "until"))
    return rows


@admin_endpoint("GET", "gateway.view_usagerecord")
def usage_list(request):
    params = query_parameters(request, COMMON_FILTERS)
    return respond(paginate(_filtered(UsageRecord.objects.all(), params), params, usage_record,
                            newest_first=True).body())


@admin_endpoint("GET", "gateway.view_callrecord")
def call_list(request):
    params = query_parameters(request, (*COMMON_FILTERS, "status", "outcome"))
    rows = _filtered(CallRecord.objects.all(), params)
    if "status" in params:
        if not params["status"].isdigit() or not 100 <= int(params["status"]) <= 599:
            raise ValidationFailed({"status": ["An HTTP status, 100 to 599."]})
        rows = rows.filter(status=int(params["status"]))
    if "outcome" in params:
        if params["outcome"] not in CallRecord.Outcome.values:
            raise ValidationFailed({"outcome": [f"One of {', '.join(CallRecord.Outcome.values)}."]})
        rows = rows.filter(outcome=params["outcome"])
    return respond(paginate(rows, params, call_record, newest_first=True).body())
