"""The console's static files through the ASGI application (gateway/web/static_files.py): the same
bytes and headers as WhiteNoise's, without Django's warning about a synchronous iterator."""

import warnings
from pathlib import Path

import django.contrib.admin
import pytest

from tests.asgi import call

BASE_CSS = "/static/admin/css/base.css"
ON_DISK = Path(django.contrib.admin.__file__).parent / "static/admin/css/base.css"
JQUERY = "/static/admin/js/vendor/jquery/jquery.js"  # several blocks long


@pytest.fixture
def caught():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught


def streaming_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if "StreamingHttpResponse" in str(w.message)]


def test_an_admin_static_file_comes_whole_without_the_sync_iterator_warning(caught):
    status, headers, body = call("GET", BASE_CSS)
    assert status == 200
    assert body == ON_DISK.read_bytes()
    assert headers[b"Content-Type"].startswith(b"text/css")
    assert headers[b"Content-Length"] == str(len(body)).encode()
    assert b"ETag" in headers and b"Cache-Control" in headers
    status, _, body = call("GET", JQUERY)
    assert status == 200 and len(body) > 4 * 64 * 1024
    assert streaming_warnings(caught) == []


def test_not_modified_and_head_answers_have_no_body_and_no_warning(caught):
    _, headers, _ = call("GET", BASE_CSS)
    status, _, body = call("GET", BASE_CSS, headers=[(b"if-none-match", headers[b"ETag"])])
    assert (status, body) == (304, b"")
    status, head_headers, body = call("HEAD", BASE_CSS)
    assert (status, body) == (200, b"")
    assert head_headers[b"Content-Length"] == headers[b"Content-Length"]
    assert streaming_warnings(caught) == []


def test_a_path_that_is_no_static_file_goes_on_to_the_console(caught, db):
    status, _, _ = call("GET", "/static/admin/css/no-such-file.css")
    assert status == 404
    status, headers, _ = call("GET", "/admin/login/")
    assert status == 200 and headers[b"Content-Type"].startswith(b"text/html")


def test_the_synchronous_test_client_still_gets_the_file(client):
    response = client.get(BASE_CSS)
    assert response.status_code == 200
    assert b"".join(response.streaming_content) == ON_DISK.read_bytes()
