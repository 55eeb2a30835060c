"""The API contract in the console: the served document in Swagger UI, whose files come
from the drf-spectacular-sidecar package through the console's static files (nothing from elsewhere), for
staff only; and a document fit to be read there: no section numbers of a document the reader does not have,
and no 301 on every route (the https redirect answers before any route, and the document says so once)."""

import re

import pytest
from django.test import Client

from gateway.openapi import document
from tests.contract import check_response
from tests.factories import AccountFactory

PAGE = "/admin/api-contract/"


def strings(node, where=""):
    if isinstance(node, dict):
        for key, value in node.items():
            yield from strings(value, f"{where}/{key}")
    elif isinstance(node, list):
        for n, value in enumerate(node):
            yield from strings(value, f"{where}/{n}")
    elif isinstance(node, str):
        yield where, node


def test_the_document_cites_no_section_of_another_document():
    cited = [(where, text) for where, text in strings(document()) if re.search(r"(?i)\bspec(ification)?\s+\d", text)]
    assert cited == []


def test_no_route_lists_a_301_and_the_https_redirect_is_said_once():
    doc = document()
    with_redirects = [(path, method) for path, item in doc["paths"].items() for method, op in item.items()
                      if method != "parameters" and {"301", "3XX"} & set(op["responses"])]
    assert with_redirects == []
    assert "`301`" in doc["info"]["description"] and "SECURE_SSL_REDIRECT" in doc["info"]["description"]
    assert "Location" not in doc["components"]["headers"]  # only the redirect's 301 had it


@pytest.mark.django_db
def test_the_https_redirect_of_an_api_route_is_still_within_the_contract(settings):
    settings.SECURE_SSL_REDIRECT = True
    answer = Client().get("/api/v1/version")  # the test client checks it against the document too
    assert answer.status_code == 301 and answer["Location"] == "https://testserver/api/v1/version"
    check_response("GET", "/api/v1/version", 301, answer.headers, answer.content)


@pytest.mark.django_db
def test_the_page_is_for_staff_only(client):
    answer = client.get(PAGE)
    assert answer.status_code == 302 and answer["Location"] == f"/admin/login/?next={PAGE}"
    client.force_login(AccountFactory(email="member@example.test", is_staff=False))
    answer = client.get(PAGE)
    assert answer.status_code == 302 and answer["Location"] == f"/admin/login/?next={PAGE}"
    client.force_login(AccountFactory(email="operator@example.test", is_staff=True))
    assert client.get(PAGE).status_code == 200


@pytest.mark.django_db
def test_swagger_ui_and_everything_the_page_loads_come_from_the_project(client):
    client.force_login(AccountFactory(email="operator@example.test", is_staff=True))
    html = client.get(PAGE).content.decode()
    assert not re.search(r"""(?i)(src|href|action)=["']?(https?:)?//""", html)  # no other host
    assert not re.search(r"(?i)(https?:)?//(cdn|unpkg|jsdelivr|fonts\.)", html)
    assets = re.findall(r"""(?:src|href)=["'](/static/[^"']+\.(?:js|css))["']""", html)
    swagger = [a for a in assets if "/drf_spectacular_sidecar/swagger-ui-dist/" in a]
    assert sorted(a.rsplit("/", 1)[1] for a in swagger) == ["swagger-ui-bundle.js", "swagger-ui.css"]
    for asset in assets:
        answer = client.get(asset)
        assert answer.status_code == 200, asset
        body = b"".join(answer.streaming_content) if answer.streaming else answer.content
        assert body, asset
        if asset.endswith("swagger-ui-bundle.js"):
            assert answer["Content-Type"].startswith("text/javascript") and b"SwaggerUIBundle" in body
    assert "SwaggerUIBundle({" in html and 'data-url="/api/v1/openapi.json"' in html
