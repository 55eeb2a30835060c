"""The account pages: the overview (usage and spend against quotas and budgets, with the last 30
days drawn as the console's home draws its charts), the API key, the last calls, the routines and
the inbox. Each reads the signed-in account's own rows only (account_pages/reads.py); an id that is
not one of its rows is a 404, whether it exists or not."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpResponseRedirect
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from account_pages import reads
from account_pages.session import account_page, render_page
from accounts.admin_keys import key_of, key_refusal
from accounts.keys import api_key_generate, api_key_revoke
from accounts.login import password_confirm
from gateway.console.fields.money import currency
from gateway.console.home.chart import bars
from gateway.registry.prices import money_text
from gateway.web.errors import ApiError
from routines.inbox import inbox_messages, mark_read
from routines.models import InboxMessage, Routine


def _not_yours(request, section: str):
    """The 404 of an id that is not one of the account's rows (another's, or none: the same answer), in
    the pages' own look with the way back to them."""
    return _page(request, "account/not_found.html", section, {"title": "Not found"}, status=404)


def _page(request, template: str, section: str, context: dict, **kwargs):
    unread = InboxMessage.objects.filter(account=request.user, read_at__isnull=True).count()
    return render_page(request, template, {"section": section, "account": request.user, "unread": unread,
                                           "currency": currency(), **context}, **kwargs)


@require_GET
@account_page
def home(request):
    account = request.user
    now = timezone.now()
    days = reads.last_days(account, today=now.date())
    charts = [
        {"title": "Calls per day", "svg": bars(name="calls", title="Calls per day", unit="calls", bucket="day",
                                               points=[(d.start, d.calls) for d in days])},
        {"title": "Tokens per day", "svg": bars(name="tokens", title="Tokens per day", unit="tokens", bucket="day",
                                                points=[(d.start, d.tokens) for d in days],
                                                color="var(--color-primary-400, #a78bfa)")},
    ]
    return _page(request, "account/home.html", "home", {
        "title": "Usage and spend",
        "windows": reads.current_windows(account, now=now),
        "charts": charts,
        "days_calls": sum(d.calls for d in days),
        "days_tokens": sum(d.tokens for d in days),
        "days_spend": money_text(sum(d.cost_units for d in days), 2),
        "key": key_of(account),
    })


def _key_page(request, *, error: str = "", refused: int | None = None):
    """The key's page; after a refused generation, with why and the status the API gives the same
    request (data-refusal), answered 200 as a form shown again (a browser logs a 4xx page as an error)."""
    account = request.user
    return _page(request, "account/key.html", "key", {"title": "API key", "key": key_of(account),
                                                       "refusal": key_refusal(account), "error": error,
                                                       "refused": refused})


@require_GET
@account_page
def key(request):
    return _key_page(request)


@require_POST
@account_page
def key_generate(request):
    """A new key with the account's password (spec 3.1: the password and a session), the whole key shown
    on this answer only; a wrong password counts toward the lockout as on the API."""
    account = request.user
    if refusal := key_refusal(account):
        return _key_page(request, error=refusal, refused=403)
    password = request.POST.get("password", "")
    if not password:
        return _key_page(request, error="Give your password to generate a key.", refused=422)
    try:
        password_confirm(account=account, password=password[:1024])
    except ApiError as refused:  # 422 wrong password, 423 locked
        return _key_page(request, error=refused.message, refused=refused.status)
    issued = api_key_generate(account=account)
    return _page(request, "account/key_shown.html", "key", {"title": "Your new API key", "issued": issued})


@require_POST
@account_page
def key_revoke(request):
    if api_key_revoke(account=request.user):
        messages.success(request, "API key revoked: it stops working at once.")
    else:
        messages.info(request, "There is no API key to revoke.")
    return HttpResponseRedirect(reverse("account:key"))


@require_GET
@account_page
def calls(request):
    shown = reads.last_calls(request.user)
    for found in shown:
        found.cost_text = money_text(found.cost_units)
    return _page(request, "account/calls.html", "calls", {"title": "Your last calls", "calls": shown,
                                                           "shown": reads.CALLS_SHOWN})


@require_GET
@account_page
def call(request, pk: int):
    found = reads.call_of(request.user, pk)
    if found is None:
        return _not_yours(request, "calls")
    return _page(request, "account/call.html", "calls", {"title": "Call", "call": found,
                                                          "cost": money_text(found.cost_units)})


@require_GET
@account_page
def routines(request):
    shown = reads.routines_with_last_run(request.user)
    return _page(request, "account/routines.html", "routines", {"title": "Your routines", "routines": shown})


@require_GET
@account_page
def routine(request, pk: int):
    found = reads.routine_of(request.user, pk)
    if found is None:
        return _not_yours(request, "routines")
    return _page(request, "account/routine.html", "routines", {"title": found.name, "routine": found,
                                                                "runs": reads.runs_of(found),
                                                                "shown": reads.RUNS_SHOWN})


@require_GET
@account_page
def inbox(request):
    shown = inbox_messages(request.user)
    names = dict(Routine.objects.filter(account=request.user, pk__in={m.routine_id for m in shown if m.routine_id})
                 .values_list("pk", "name"))
    for message in shown:
        message.routine_name = names.get(message.routine_id, "")
    return _page(request, "account/inbox.html", "inbox", {"title": "Inbox", "messages_shown": shown})


@require_GET
@account_page
def inbox_message(request, pk: int):
    found = InboxMessage.objects.filter(account=request.user, pk=pk).select_related("routine").first()
    if found is None:
        return _not_yours(request, "inbox")
    return _page(request, "account/inbox_message.html", "inbox", {"title": found.title, "message": found})


@require_POST
@account_page
def inbox_read(request, pk: int):
    try:
        mark_read(request.user, pk)
    except ApiError:  # not one of the account's messages
        return _not_yours(request, "inbox")
    return HttpResponseRedirect(reverse("account:inbox"))
