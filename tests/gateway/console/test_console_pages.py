"""HTML for browsers under the console: `/` and `/admin` lead to the console, an
unknown page and a server error under it are HTML pages in its theme that read no database, while
the API's answers (spec 7.1, rule 2 on /v1) and a client asking for JSON keep theirs exactly."""

import pytest
from django.db import OperationalError, connection
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext

from gateway.console.theme import error_pages
from tests.console_html import title
from tests.factories import AccountFactory

pytestmark = pytest.mark.django_db

THEME_CSS = "/static/unfold/css/styles.css"


@pytest.fixture
def operator(client):
    client.force_login(AccountFactory(email="op@example.test", is_staff=True, is_superuser=True))
    return client


@pytest.mark.parametrize("path", ["/", "/admin"])
def test_the_root_and_the_console_without_its_slash_lead_to_the_console(client, path):
    response = client.get(path)
    assert (response.status_code, response["Location"]) == (302, "/admin/")
    assert client.get(path, follow=True).redirect_chain[-1] == ("/admin/login/?next=/admin/", 302)


def test_an_operator_going_to_the_root_lands_on_the_home(operator):
    response = operator.get("/", follow=True)
    assert response.status_code == 200 and 'id="console-home"' in response.content.decode()


@pytest.mark.parametrize("path", ["/admin/no-such-page/", "/admin/gateway/nothing/", "/nowhere", "/livez/",
                                  "/favicon.ico"])
def test_an_unknown_page_under_the_console_is_html_in_the_theme(operator, path):
    response = operator.get(path, headers={"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"})
    html = response.content.decode()
    assert response.status_code == 404
    assert response["Content-Type"] == "text/html; charset=utf-8"
    assert f'href="{THEME_CSS}"' in html and "--color-primary-600:" in html  # the theme's sheet and colours
    assert title(html) == "404 Page not found | Model gateway"
    assert 'id="console-home-link" href="/admin/"' in html
    assert "Django" not in html


def test_signed_out_an_unknown_console_page_asks_for_the_login_and_any_other_is_the_html_404(client):
    assert client.get("/admin/no-such-page/")["Location"] == "/admin/login/?next=/admin/no-such-page/"
    response = client.get("/nowhere")
    assert response.status_code == 404 and title(response.content.decode()) == "404 Page not found | Model gateway"


def test_a_client_asking_for_json_keeps_the_json_404_under_the_console(operator):
    for path in ("/admin/no-such-page/", "/nowhere"):
        response = operator.get(path, headers={"Accept": "application/json"})
        assert (response.status_code, response.json()) == (404, {"message": "Not Found."})


def test_the_api_keeps_its_answers(client):
    json_v1 = client.get("/v1/nope", headers={"Accept": "application/json"})
    assert (json_v1.status_code, json_v1["Content-Type"], json_v1.json()) == (
        404, "application/json", {"message": "Not Found."})
    html_v1 = client.get("/v1/nope", headers={"Accept": "text/html"})  # spec 7.1 rule 2: the framework's page
    assert html_v1.status_code == 404 and THEME_CSS not in html_v1.content.decode()
    assert b"Not Found." in html_v1.content
    api = client.get("/api/v1/nope", headers={"Accept": "text/html"})
    assert (api.status_code, api.json()) == (404, {"message": "Not Found."})


def test_a_server_error_under_the_console_is_html_with_the_request_id(operator, monkeypatch):
    def broken(request, context):
        raise RuntimeError("the home broke")

    monkeypatch.setattr("gateway.console.home.page.dashboard", broken)
    operator.raise_request_exception = False
    response = operator.get("/admin/", headers={"X-Request-Id": "trace-500-page"})
    html = response.content.decode()
    assert response.status_code == 500 and response["Content-Type"] == "text/html; charset=utf-8"
    assert "500 · Server error" in html and "<code>trace-500-page</code>" in html
    assert "the home broke" not in html and "Traceback" not in html


def test_the_console_s_outage_is_still_the_503_with_retry_after(operator, monkeypatch, settings):
    def away(request, context):
        raise OperationalError("connection refused")

    monkeypatch.setattr("gateway.console.home.page.dashboard", away)
    operator.raise_request_exception = False
    response = operator.get("/admin/")
    assert response.status_code == 503 and response["Retry-After"] == str(settings.OUTAGE_RETRY_AFTER_SECONDS)


def test_the_error_pages_read_no_database_and_leave_the_api_s_500_alone():
    request = RequestFactory().get("/admin/x/")
    with CaptureQueriesContext(connection) as queries:
        page = error_pages.page(request, 500)
    assert page.status_code == 500 and len(queries) == 0
    api = error_pages.server_error(RequestFactory().get("/api/v1/routines"))
    assert (api.status_code, api["Content-Type"]) == (500, "application/json")
    assert api.content == b'{"detail": "Server Error."}'
