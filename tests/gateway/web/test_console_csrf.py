"""Every console view refuses a POST without the CSRF token, not only those that carry
`csrf_protect` (gateway/web/console_csrf.py): a plain view is protected, an exempt one is not, and a
protected one accepts the token. The API's paths never ask for it (they take keys, not cookies)."""

import pytest
from django.http import HttpResponse
from django.middleware.csrf import get_token
from django.test import Client
from django.urls import path
from django.views.decorators.csrf import csrf_exempt


def plain(request):
    return HttpResponse(f"{request.method} taken")


def form(request):
    return HttpResponse(get_token(request))


urlpatterns = [
    path("console-probe/plain", plain),
    path("console-probe/exempt", csrf_exempt(plain)),
    path("console-probe/form", form),
]

pytestmark = [pytest.mark.urls(__name__), pytest.mark.django_db]


@pytest.fixture
def browser():
    return Client(enforce_csrf_checks=True)


def test_a_plain_console_view_refuses_a_post_without_the_token(browser):
    refused = browser.post("/console-probe/plain", {"a": "1"})
    assert refused.status_code == 403
    assert b"CSRF" in refused.content


def test_the_token_lets_the_post_through(browser):
    token = browser.get("/console-probe/form").content.decode()  # the form's token, its cookie set
    assert "csrftoken" in browser.cookies
    taken = browser.post("/console-probe/plain", {"a": "1", "csrfmiddlewaretoken": token})
    assert (taken.status_code, taken.content) == (200, b"POST taken")


def test_an_exempt_view_takes_a_post_without_the_token(browser):
    taken = browser.post("/console-probe/exempt", {"a": "1"})
    assert (taken.status_code, taken.content) == (200, b"POST taken")


def test_a_path_that_resolves_to_nothing_is_the_usual_404(browser):
    assert browser.post("/console-probe/none").status_code == 404
