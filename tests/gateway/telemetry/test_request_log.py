"""django.request's line for a 501 (a feature the gateway does not provide) is a WARNING, not an
ERROR: the client asked for something that is not there, nothing failed. Other 5xx stay ERROR."""

import logging

import pytest

from tests.factories import api_key_for, bearer

pytestmark = pytest.mark.django_db


def request_lines(caplog):
    return [r for r in caplog.records if r.name == "django.request"]


def test_an_answered_501_is_logged_as_a_warning(client, owner, settings, caplog):
    settings.TELEGRAM_BOT_TOKEN = ""  # linking Telegram is then a feature this gateway does not provide
    with caplog.at_level(logging.INFO):
        response = client.post("/api/v1/channels/telegram/link", headers=bearer(api_key_for(owner)))
    assert response.status_code == 501
    [line] = request_lines(caplog)
    assert (line.levelno, line.levelname, line.status_code) == (logging.WARNING, "WARNING", 501)
    assert line.getMessage() == "Not Implemented: /api/v1/channels/telegram/link"


@pytest.mark.parametrize("status", [500, 502, 503])
def test_other_5xx_stay_errors(caplog, status):
    with caplog.at_level(logging.INFO):
        logging.getLogger("django.request").error("Server failed: /x", extra={"status_code": status})
    [line] = request_lines(caplog)
    assert (line.levelno, line.levelname) == (logging.ERROR, "ERROR")
