"""The level of django.request's line for an answered 501.

Django logs every 5xx answer at ERROR. A 501 is the gateway saying that a request asks for a
feature it does not provide (spec 7.2: tools on the Responses endpoint, stored responses, files):
nothing is wrong with the service, and an alert on ERROR lines should not fire for it. The line
stays, at WARNING, like the 4xx answers it resembles. Set on the django.request logger in
settings.LOGGING, so it sees the record after the logger's own ERROR level let it through.
"""

from __future__ import annotations

import logging
from http import HTTPStatus

CLIENTS_PROBLEMS = frozenset({HTTPStatus.NOT_IMPLEMENTED})


class NotImplementedIsWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "status_code", None) in CLIENTS_PROBLEMS and record.levelno > logging.WARNING:
            record.levelno, record.levelname = logging.WARNING, logging.getLevelName(logging.WARNING)
        return True
