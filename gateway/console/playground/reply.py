"""POST /admin/playground/reply: one playground call, made as the signed-in staff account and
streamed back to the page as server-sent events:

    meta  {request_id, model}                        the model that answers
    delta {text}                                     (any number)
    error {status, error: {message, type, code}}     a reply cut midway (at most one)
    done  {usage, cost, currency, ttft_ms, latency_ms}

Same origin only: the console's session and its CSRF token (X-CSRFToken), staff only (anonymous:
the admin's login; a signed-in account without staff rights: 403). Everything refused before the
reply is the answer /v1/chat/completions gives the same account, in its status and shape (the table of
paths gives this path the chat completions' errors): the request ceiling of /v1 (the account's own
counter), a field that cannot be read, the model's permission for the account's group, the quotas and
budgets (`call_plan`), no model answering. The group's "API access" is not asked: it governs keys, and
here the console's session is the credential. No response cache: the playground tries the model itself.

The call is one ModelCall (gateway/calls/model_call.py), metered once under the surface "playground" as
the reply has ended (or the page has gone), before `done`, so `done` gives what was metered."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.views import redirect_to_login
from django.http import HttpResponse, StreamingHttpResponse
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.http import require_POST

from gateway.calls.cuts import cut_error
from gateway.calls.metering import cache_write_of, cached_input_of, cost_units_of
from gateway.calls.model_call import ModelCall
from gateway.calls.plan import call_plan
from gateway.calls.screened import screening_for
from gateway.console.fields.money import currency
from gateway.console.playground.request import chat_of
from gateway.limits import ratelimit
from gateway.registry.prices import money_text
from gateway.state.counters import account_tag
from gateway.state.workers import in_worker
from gateway.upstream.sse import sse_event
from gateway.web.body import read_json_object
from gateway.web.errors import OPENAI_TYPES, ApiError, render_error

SURFACE = "playground"  # the usage records' and the calls log's name for these calls
NOT_STAFF = "The playground is for the console's staff."


@dataclass(frozen=True)
class StaffCaller:
    """The caller of a playground call, where the request's record looks for it (`request.principal`:
    the calls log's account and group, and its captured prompt for a group that keeps them)."""

    account: Any


@dataclass(frozen=True)
class Admitted:
    chain: list
    chat: dict[str, Any]
    group: Any  # the staff account's group: its guardrails apply here as on the API


@never_cache
@require_POST
@csrf_protect  # as every console view is (gateway/web/console_csrf.py): said here too, for a reader of the view
async def playground_reply(request):
    started = time.perf_counter()
    user = await request.auser()
    if not user.is_authenticated:
        return redirect_to_login(reverse("admin-playground"), reverse("admin:login"))
    if not (user.is_active and user.is_staff):
        return render_error(request, ApiError(403, NOT_STAFF, code="permission_denied"))
    headers: dict[str, str] = {}
    try:
        admitted = await in_worker(_admit)(request, user.pk, headers)
        call = ModelCall(admitted.chain, admitted.chat, account_id=user.pk, surface=SURFACE,
                         request_id=request.request_id, screening=screening_for(admitted.group, request.request_id))
        await call.open()
    except ApiError as exc:
        exc.headers = {**headers, **exc.headers}
        return render_error(request, exc)
    response = StreamingHttpResponse(_events(call, request.request_id, started), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return _with(response, headers)


def _admit(request, account_id: int, headers: dict[str, str]) -> Admitted:
    """The API's checks, in its order: the caller's ceiling (its X-RateLimit-* headers put in `headers`,
    for every answer after it), the body, the model and the quotas."""
    account = get_user_model().objects.select_related("group").get(pk=account_id)
    request.principal = StaffCaller(account)
    headers.update(ratelimit.limit_hit(ratelimit.V1, subject=f"acct:{account_tag(account.pk)}"))
    chat = chat_of(read_json_object(request))
    return Admitted(chain=call_plan(account=account, model_id=chat["model"]), chat=chat, group=account.group)


async def _events(call: ModelCall, request_id: str, started: float) -> AsyncIterator[bytes]:
    first_token = None
    try:
        yield sse_event("meta", {"request_id": request_id, "model": call.model})
        async for chunk in call.chunks():
            for choice in chunk.get("choices") or ():
                text = (choice.get("delta") or {}).get("content") if choice.get("index", 0) == 0 else None
                if text:
                    first_token = first_token or time.perf_counter()
                    yield sse_event("delta", {"text": text})
        ended = time.perf_counter()
        await asyncio.shield(call.meter_async())
        if call.cut is not None:
            error = cut_error(call.cut)
            yield sse_event("error", {"status": error.status, "error": {
                "message": error.message, "type": OPENAI_TYPES.get(error.status, "server_error"), "code": error.code}})
        yield sse_event("done", _done(call, started, first_token, ended))
    finally:  # the page went away mid-reply: what arrived is metered
        await asyncio.shield(call.meter_async())


def _done(call: ModelCall, started: float, first_token: float | None, ended: float) -> dict[str, Any]:
    """The figures of the reply as metered: its usage, and its cost at the answering model's price."""
    usage = call.usage()
    units = cost_units_of(model=call.model, price=call.target.price if call.target else None,
                          input_tokens=usage["prompt_tokens"], output_tokens=usage["completion_tokens"],
                          cached_input_tokens=min(cached_input_of(call.reply), usage["prompt_tokens"]),
                          cache_write_input_tokens=cache_write_of(call.reply))
    return {"model": call.model, "usage": usage, "cost": money_text(units), "currency": currency(),
            "ttft_ms": _ms(first_token - started) if first_token is not None else None,
            "latency_ms": _ms(ended - started)}


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 1)


def _with(response: HttpResponse, headers: dict[str, str]) -> HttpResponse:
    for name, value in headers.items():
        response[name] = value
    return response
