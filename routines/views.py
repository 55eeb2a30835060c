"""Routines on the native surface: management (spec 4.5, 4.8), the inbox, and the webhook
(spec 4.6, 4.7). Views parse, call one function, render."""

from __future__ import annotations

import re

from django.conf import settings
from django.http import Http404, HttpResponse

from accounts.endpoints import NONE, endpoint
from gateway.limits import ratelimit
from gateway.web.body import read_json_object
from gateway.web.output import respond, timestamp
from routines import routine_writes as writes
from routines.blueprints import BLUEPRINTS
from routines.inbox import inbox_messages, mark_read
from routines.ingest import Incoming
from routines.intake import take_in
from routines.models import Routine
from routines.records import routine_record, run_record
from routines.runs import recent_runs

TOKEN_FORM = re.compile(r"[0-9a-f]{32,64}")


def webhook_url(request, routine: Routine) -> str:
    base = settings.PUBLIC_BASE_URL.rstrip("/") or request.build_absolute_uri("/").rstrip("/")
    return f"{base}/api/v1/hooks/{routine.webhook_token}"


def _written(request, routine: Routine, **extra) -> dict:
    """The answer to create, change and rotate: the routine with its token, its webhook's URL and
    whether it is signed (with a warning when it is not)."""
    record = routine_record(routine, with_token=True)
    signed = record["webhook_assinado"]
    return {"routine": record, "webhook_url": webhook_url(request, routine), "webhook_assinado": signed,
            "webhook_aviso": None if signed else writes.UNSIGNED_WARNING, **extra}


@endpoint("GET")
def routine_list(request):
    mine = Routine.objects.filter(account=request.principal.account).select_related("account__group").order_by("id")
    return respond({"routines": [routine_record(r) for r in mine]})


@endpoint("POST", idempotent=True)
def routine_create(request):
    written = writes.routine_create(account=request.principal.account, data=read_json_object(request))
    routine = written.routine
    return respond(_written(request, routine, webhook_secret=written.secret_shown), status=201)


@endpoint("GET")
def routine_detail(request, routine_id: int):
    routine = writes.routine_for(account=request.principal.account, routine_id=routine_id)
    return respond({"routine": routine_record(routine)})  # like the list: no token, no secret


@endpoint("PUT")
def routine_update(request, routine_id: int):
    routine = writes.routine_for(account=request.principal.account, routine_id=routine_id)
    routine = writes.routine_update(routine=routine, data=read_json_object(request)).routine
    return respond(_written(request, routine))


@endpoint("DELETE")
def routine_delete(request, routine_id: int):
    routine = writes.routine_for(account=request.principal.account, routine_id=routine_id)
    writes.routine_delete(routine=routine)
    return HttpResponse(status=204)


@endpoint("POST", idempotent=True)
def run_now(request, routine_id: int):
    routine = writes.routine_for(account=request.principal.account, routine_id=routine_id)
    run = writes.routine_run_now(routine=routine)
    return respond({"run": run_record(run)}, status=202)


@endpoint("POST")
def rotate_token(request, routine_id: int):
    routine = writes.routine_for(account=request.principal.account, routine_id=routine_id)
    routine = writes.routine_rotate_token(routine=routine)
    return respond(_written(request, routine))


@endpoint("POST")
def rotate_secret(request, routine_id: int):
    routine = writes.routine_for(account=request.principal.account, routine_id=routine_id)
    secret = writes.routine_rotate_secret(routine=routine)
    return respond(_written(request, routine, webhook_secret=secret))


@endpoint("GET")
def runs(request, routine_id: int):
    routine = writes.routine_for(account=request.principal.account, routine_id=routine_id)
    return respond({"runs": [run_record(r) for r in recent_runs(routine)]})


@endpoint("GET")
def blueprints(request):
    return respond({"blueprints": BLUEPRINTS})


def inbox_record(message) -> dict:
    return {"id": message.pk, "title": message.title, "body": message.body, "routine_id": message.routine_id,
            "run_id": message.run_id, "read_at": timestamp(message.read_at),
            "created_at": timestamp(message.created_at)}


@endpoint("GET")
def inbox(request):
    return respond({"messages": [inbox_record(m) for m in inbox_messages(request.principal.account)]})


@endpoint("POST")
def inbox_read(request, message_id: int):
    return respond({"message": inbox_record(mark_read(request.principal.account, message_id))})


@endpoint("POST", auth=NONE, limit=ratelimit.HOOKS)
async def _hook(request, token: str):
    """Spec 4.7. The per-address ceiling ran before this (the endpoint wrapper); then check 1
    here, the token's form, and checks 2 to 8 in `ingest`. At most one byte over the cap is read
    from the body."""
    if not settings.WEBHOOKS_ENABLED:
        return respond({"ok": True, "ignored": "disabled"})
    if not TOKEN_FORM.fullmatch(token):
        raise Http404  # the framework's plain 404, as for an unknown route (no rate headers)
    body = request.read(settings.WEBHOOK_MAX_BODY_BYTES + 1)
    status, answer = await take_in(Incoming(token, body, request.headers))
    return respond(answer, status=status)


async def hook(request, token: str):
    """A malformed token is no route: the plain 404 for every method (a POST is counted first,
    like any other, since the per-address limit comes before everything)."""
    if request.method != "POST" and not TOKEN_FORM.fullmatch(token):
        raise Http404
    return await _hook(request, token)


hook.csrf_exempt = True
