"""Webhook tokens and the Telegram updates secret never reach an access log line."""

import logging

import pytest

from gateway.telemetry.logfilters import ACCESS_LOGGERS, REQUEST_LOGGERS, RedactSecretPaths, install

TOKEN = "a" * 48


def _uvicorn_line(path: str) -> str:
    record = logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1,
                               '%s - "%s %s HTTP/%s" %d', ("127.0.0.1:5000", "POST", path, "1.1", 200), None)
    RedactSecretPaths().filter(record)
    return record.getMessage()


@pytest.mark.parametrize("path", [f"/api/v1/hooks/{TOKEN}", f"/api/v1/hooks/{TOKEN}?x=1",
                                  "/api/v1/channels/telegram/updates/s3cret-value"])
def test_secret_path_segments_are_redacted(path):
    line = _uvicorn_line(path)
    assert TOKEN not in line and "s3cret-value" not in line
    assert "[redacted]" in line and line.endswith("200")


def test_other_paths_are_left_alone():
    assert "/api/v1/routines/12/runs" in _uvicorn_line("/api/v1/routines/12/runs")


def test_gunicorn_dict_arguments_are_redacted():
    record = logging.LogRecord("gunicorn.access", logging.INFO, __file__, 1, "%(r)s %(s)s",
                               ({"r": f"POST /api/v1/hooks/{TOKEN} HTTP/1.1", "s": "200"},), None)
    RedactSecretPaths().filter(record)
    assert record.getMessage() == "POST /api/v1/hooks/[redacted] HTTP/1.1 200"


def test_the_asgi_application_installs_the_filter_once():
    import gateway.asgi  # noqa: F401

    install()
    for name in ACCESS_LOGGERS + REQUEST_LOGGERS:
        assert sum(isinstance(f, RedactSecretPaths) for f in logging.getLogger(name).filters) == 1


# the hook view counts the address on a worker thread without Redis: a connection of its own, which the
# test's open transaction would keep waiting on SQLite's write lock (and answer 503 "database is locked")
@pytest.mark.django_db(transaction=True)
def test_a_server_error_on_a_webhook_url_is_logged_without_the_token(client, caplog, monkeypatch):
    """Django logs the path of an answer of 500 through `django.request`."""
    install()

    def fails(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr("routines.views.take_in", fails)
    client.raise_request_exception = False
    with caplog.at_level(logging.ERROR, logger="django.request"):
        assert client.post(f"/api/v1/hooks/{TOKEN}", b"{}", content_type="application/json").status_code == 500
    lines = [r.getMessage() for r in caplog.records if r.name == "django.request"]
    assert lines == ["Internal Server Error: /api/v1/hooks/[redacted]"]


def test_django_server_lines_are_redacted():
    install()
    record = logging.getLogger("django.server").makeRecord(
        "django.server", logging.INFO, __file__, 1, '"%s" %s %s', (f"POST /api/v1/hooks/{TOKEN} HTTP/1.1", "200", "2"),
        None)
    assert all(f.filter(record) for f in logging.getLogger("django.server").filters)
    assert record.getMessage() == '"POST /api/v1/hooks/[redacted] HTTP/1.1" 200 2'
