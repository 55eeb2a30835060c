"""The account pages' sign-in: a Django session, opened by the same password check and lockout as
POST /api/v1/auth/login (accounts/login.py `account_authenticate`: five consecutive failures lock
the account for 30 minutes, the same words for a wrong password and an unknown e-mail) and counted
against the same per-address login ceiling (spec 5.6, `ratelimit.LOGIN`), so that neither way in
gives more tries than the other. Every form carries Django's CSRF token, checked for every console
view (gateway/web/console_csrf.py); the views here say so with `csrf_protect` too. Logging out is a POST.

Any active account may sign in here: the session gives no staff right, so the console at /admin/
sends a non-staff account back to its own login."""

from __future__ import annotations

from functools import wraps

from django import forms
from django.contrib.auth import login as session_login
from django.contrib.auth import logout as session_logout
from django.contrib.auth.views import redirect_to_login
from django.http import HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.cache import add_never_cache_headers
from django.utils.decorators import method_decorator
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.csrf import csrf_protect
from django.views.decorators.http import require_POST
from django.views.generic import View

from account_pages.theme import theme_context
from accounts.login import account_authenticate
from gateway.limits import ratelimit
from gateway.web.errors import ApiError

BACKEND = "django.contrib.auth.backends.ModelBackend"  # the password backend (not the operators' sign-on)
TOO_MANY = "Too many login attempts from this address. Wait a minute, then try again."


class LoginForm(forms.Form):
    email = forms.EmailField(max_length=254)
    password = forms.CharField(max_length=1024, strip=False, widget=forms.PasswordInput)


def account_page(view):
    """A page of the signed-in account: without a session, the login page (coming back here after);
    never kept by a cache (it shows the account's own data); its POSTs checked for the CSRF token."""

    @csrf_protect
    @wraps(view)
    def page(request, *args, **kwargs):
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path(), login_url=reverse("account:login"))
        response = view(request, *args, **kwargs)
        add_never_cache_headers(response)
        return response

    return page


def render_page(request, template: str, context: dict, *, status: int = 200, headers=None):
    response = render(request, template, {**theme_context(request), **context}, status=status)
    for name, value in (headers or {}).items():
        response[name] = value
    add_never_cache_headers(response)
    return response


def _next(request) -> str:
    target = request.POST.get("next") or request.GET.get("next") or ""
    home = reverse("account:home")
    if target.startswith(home) and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()},
                                                                   require_https=request.is_secure()):
        return target
    return home


@method_decorator(csrf_protect, name="dispatch")
class Login(View):
    """GET the form, POST the e-mail and password (any other method: 405)."""

    def get(self, request):
        if request.user.is_authenticated:
            return HttpResponseRedirect(_next(request))
        return _login_page(request, LoginForm())

    def post(self, request):
        form = LoginForm(request.POST)
        try:  # counted before the password is looked at, as the API's login is
            ratelimit.limit_hit(ratelimit.LOGIN, subject=f"ip:{ratelimit.client_address(request)}")
        except ApiError as refused:
            return _login_page(request, form, error=TOO_MANY, status=429,
                               headers={"Retry-After": refused.headers.get("Retry-After", "60")})
        if not form.is_valid():
            return _login_page(request, form, refusal=422)
        try:
            account = account_authenticate(email=form.cleaned_data["email"], password=form.cleaned_data["password"])
        except ApiError as refused:  # 401 wrong (or unknown), 423 locked, 403 deactivated: the API's words
            headers = {"Retry-After": refused.headers["Retry-After"]} if "Retry-After" in refused.headers else None
            return _login_page(request, form, error=refused.message, refusal=refused.status, headers=headers)
        session_login(request, account, backend=BACKEND)  # a new session id: no fixation
        return HttpResponseRedirect(_next(request))


def _login_page(request, form, *, error: str = "", refusal: int | None = None, status: int = 200, headers=None):
    """The form again, with what was wrong. A refused password is answered 200, as Django's admin login
    answers it (a browser logs a 4xx page as an error); `refusal`, the status the API's login gives the
    same try, is on the page's error (data-refusal). Only the per-address ceiling keeps its 429."""
    return render_page(request, "account/login.html", {"form": form, "error": error, "refusal": refusal,
                                                      "next": _next(request), "title": "Log in"},
                       status=status, headers=headers)


@require_POST
@csrf_protect
def logout(request):
    session_logout(request)
    return HttpResponseRedirect(reverse("account:login"))
