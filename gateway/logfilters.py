"""Access logs must not carry the secrets some paths hold: a routine's webhook token (spec 4.5:
the whole URL is a secret) and the Telegram updates secret. `install()` puts a filter on the
loggers uvicorn and gunicorn write access lines to, and on Django's own request loggers (an
answer of 500 logs the path); it rewrites those path segments."""

from __future__ import annotations

import logging
import re

SECRET_PATH = re.compile(r"(/api/v1/hooks/|/api/v1/channels/telegram/updates/)[^/?#\s\"]+")
ACCESS_LOGGERS = ("uvicorn.access", "gunicorn.access")
REQUEST_LOGGERS = ("django.request", "django.server")


def redact(text: str) -> str:
    return SECRET_PATH.sub(r"\1[redacted]", text)


class RedactSecretPaths(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(redact(a) if isinstance(a, str) else a for a in record.args)
        elif isinstance(record.args, dict):  # gunicorn's access log formats from a dict
            record.args = {k: redact(v) if isinstance(v, str) else v for k, v in record.args.items()}
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        return True


def install() -> None:
    for name in ACCESS_LOGGERS + REQUEST_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactSecretPaths) for f in logger.filters):
            logger.addFilter(RedactSecretPaths())
