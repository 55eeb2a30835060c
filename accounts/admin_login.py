"""The operator console's login (POST /admin/login/), limited like the API login: tries per
minute from one client address (ADMIN_LOGIN_LIMIT_PER_ADDRESS) and for one account
(ADMIN_LOGIN_LIMIT_PER_ACCOUNT), counted by django-ratelimit. A try over either limit is answered
429, the login page with the reason, before the password is looked at.

django-ratelimit counts in the `ratelimit` cache: Redis when REDIS_URL is set, otherwise the
database cache with its add and increment made atomic as the counters' cache backend makes its
own steps (`CounterCache`; the plain database cache increments with a read and a write)."""

from __future__ import annotations

from django.conf import settings
from django.contrib import admin
from django.core.cache.backends.db import DatabaseCache
from django.template.response import TemplateResponse
from django.utils.cache import add_never_cache_headers
from django_ratelimit.core import get_usage

from accounts.sso import login_context
from gateway.limits.ratelimit import client_address
from gateway.state.cache_backend import cache_step

REFUSED = "Too many login attempts. Wait a minute, then try again."


class CounterCache(DatabaseCache):
    """The database cache whose add and incr are one step (gateway.state.cache_backend.cache_step:
    a process lock and a transaction, which SQLite begins IMMEDIATE)."""

    def add(self, *args, **kwargs):
        with cache_step():
            return super().add(*args, **kwargs)

    def incr(self, *args, **kwargs):
        with cache_step():
            return super().incr(*args, **kwargs)


def _address(group: str, request) -> str:
    return client_address(request)


def _account(group: str, request) -> str:
    return request.POST.get("username", "").strip().lower()


def _per_address(group: str, request) -> str:
    return f"{settings.ADMIN_LOGIN_LIMIT_PER_ADDRESS}/m"


def _per_account(group: str, request) -> str:
    return f"{settings.ADMIN_LOGIN_LIMIT_PER_ACCOUNT}/m"


LIMITS = (("admin-login:address", _address, _per_address), ("admin-login:account", _account, _per_account))


def login(request, extra_context=None):
    """admin.site.login behind the two limits; every POST counts against both."""
    if request.method == "POST":
        usages = [get_usage(request, group=group, key=key, rate=rate, method="POST", increment=True)
                  for group, key, rate in LIMITS]
        refused = [usage for usage in usages if usage is not None and usage["should_limit"]]
        if refused:
            return _too_many_tries(request, retry_after=max(max(usage["time_left"] for usage in refused), 1))
    # with single sign-on configured, the page's "Sign in with <provider>" button (accounts/sso.py)
    return admin.site.login(request, {**login_context(request), **(extra_context or {})})


def _too_many_tries(request, *, retry_after: int) -> TemplateResponse:
    from django.contrib.admin.forms import AdminAuthenticationForm

    form = AdminAuthenticationForm(request)  # unbound: nothing submitted is checked
    form.cleaned_data = {}
    form.add_error(None, REFUSED)
    context = {**admin.site.each_context(request), "title": "Log in", "subtitle": None,
               "app_path": request.get_full_path(), "form": form, "username": "", **login_context(request)}
    response = TemplateResponse(request, "admin/login.html", context, status=429)
    response["Retry-After"] = str(retry_after)
    add_never_cache_headers(response)
    return response
