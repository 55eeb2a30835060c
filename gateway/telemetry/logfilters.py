"""Log lines must not carry secrets.

Access logs: a routine's webhook token (spec 4.5: the whole URL is a secret), the Telegram updates
secret, and a credential sent by mistake in a query string (`?api_key=`, `?key=`, `?token=`,
`?access_token=`, `?password=`, `?secret=`, … : `gateway.telemetry.redact.QUERY_SECRET`). `install()` puts
`RedactSecretPaths` on the loggers uvicorn and gunicorn write access lines to, and on Django's own
request loggers (an answer of 500 logs the path); it rewrites those parts of the line.

Every other line: `RedactSecrets` sits on the console handler (settings.LOGGING) and takes out of
a record's message, arguments and traceback whatever is shaped like a credential and the
credentials this process holds (`gateway.telemetry.redact.configured_secrets`: the model servers' keys, the
channel tokens). It leaves long hex strings alone (`loose=False`): request ids are made of them.

It fails closed: a record it cannot clean (anything raised while cleaning it: an argument whose
`str()` fails, a source of secrets that fails) is still written, as a fixed text
(`log record withheld: its redaction failed (<exception type>)`, JSON field
`event: redaction_failed`), without its message, arguments, fields, traceback or a request id the
client chose, and counted in `gateway_log_redaction_failures_total` (gateway/telemetry/metrics.py).

And one filter of level, `NotImplementedIsWarning`: Django logs every 5xx answer at ERROR, but a 501 is the
gateway saying a request asks for a feature it does not provide (spec 7.2), nothing wrong with the service;
its line stays, at WARNING, like the 4xx answers it resembles (on the django.request logger, settings.LOGGING)."""

from __future__ import annotations

import logging
import re
import threading
from http import HTTPStatus

from gateway.telemetry.redact import QUERY_SECRET, REDACTED, configured_secrets
from gateway.telemetry.redact import redact as redact_secrets

SECRET_PATH = re.compile(r"(/api/v1/hooks/|/api/v1/channels/telegram/updates/)[^/?#\s\"]+")
ACCESS_LOGGERS = ("uvicorn.access", "gunicorn.access")
REQUEST_LOGGERS = ("django.request", "django.server")


def redact(text: str) -> str:
    """An access log line (or a part of one) without secret path segments and query values."""
    return QUERY_SECRET.sub(r"\1" + REDACTED, SECRET_PATH.sub(r"\1" + REDACTED, text))


class RedactSecretPaths(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(redact(a) if isinstance(a, str) else a for a in record.args)
        elif isinstance(record.args, dict):  # gunicorn's access log formats from a dict
            record.args = {k: redact(v) if isinstance(v, str) else v for k, v in record.args.items()}
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        return True


_PLAIN = (int, float, bool, type(None))
_formatter = logging.Formatter()
WITHHELD = "log record withheld: its redaction failed ({})"  # with the exception's type name
WITHHELD_FIELDS = {"event": "redaction_failed"}
_OWN_REQUEST_ID = re.compile(r"[0-9a-f]{32}")  # one the gateway made (gateway/telemetry/logjson.py)
_counting = threading.local()


class RedactSecrets(logging.Filter):
    """Credentials out of any record (a handler's filter: it sees every record the handler
    writes, whichever logger made it). Arguments stay arguments, so a formatter that reads them
    (uvicorn's access formatter) still works; an argument that is not a plain value is replaced by
    its redacted text."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "redacted", False):  # cleaned by the code that wrote it (gateway/telemetry/logjson.py)
            return True
        try:
            secrets = configured_secrets()

            def clean(value):
                if isinstance(value, _PLAIN):
                    return value
                text = value if isinstance(value, str) else str(value)
                cleaned = redact_secrets(text, secrets, loose=False)
                return value if cleaned == text else cleaned  # an object stays itself unless it told a secret

            record.msg = clean(record.msg)
            if isinstance(record.args, tuple):
                record.args = tuple(clean(a) for a in record.args)
            elif isinstance(record.args, dict):
                record.args = {k: clean(v) for k, v in record.args.items()}
            fields = getattr(record, "fields", None)  # the JSON log's fields (gateway/telemetry/logjson.py)
            if isinstance(fields, dict):
                record.fields = {k: clean(v) for k, v in fields.items()}
            if isinstance(getattr(record, "request_id", None), str):  # a client may choose its request id
                record.request_id = clean(record.request_id)
            if record.exc_info and not record.exc_text:
                record.exc_text = _formatter.formatException(record.exc_info)
            if record.exc_text:
                record.exc_text = clean(record.exc_text)
        except Exception as exc:  # fail closed: the line is written, its content is not
            return withhold(record, exc)
        return True


def withhold(record: logging.LogRecord, exc: BaseException) -> bool:
    """Replace what `record` says by a fixed text (a line is not lost, its content is) and count
    it. The record is marked clean: a second handler's filter writes it as it is, counted once.
    Never raises: a record that cannot even be overwritten is not written at all."""
    try:
        record.msg = WITHHELD.format(type(exc).__name__)
        record.args = ()
        record.exc_info = record.exc_text = record.stack_info = None
        record.fields = dict(WITHHELD_FIELDS)
        request_id = getattr(record, "request_id", None)
        if request_id is not None and not (isinstance(request_id, str) and _OWN_REQUEST_ID.fullmatch(request_id)):
            record.request_id = None  # a client may choose its request id: it goes with the rest
        record.redacted = True
        kept = True
    except Exception:
        kept = False
    count_redaction_failure()
    return kept


def count_redaction_failure() -> None:
    """gateway_log_redaction_failures_total + 1. Never raises, never logs; a record written by
    the counting itself (on this thread, while it counts) is not counted again."""
    if getattr(_counting, "active", False):
        return
    _counting.active = True
    try:
        # imported when first needed: metrics.py puts prometheus_client in multiprocess mode, which a
        # process that only set up its logging (gunicorn's master) has no use for
        from gateway.telemetry import metrics

        metrics.log_redaction_failed()
    except Exception:  # a failure to count is passed over: the record was withheld
        pass
    finally:
        _counting.active = False


def install() -> None:
    for name in ACCESS_LOGGERS + REQUEST_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactSecretPaths) for f in logger.filters):
            logger.addFilter(RedactSecretPaths())


def install_on_handlers(logger: logging.Logger | None = None) -> None:
    """`RedactSecrets` on every handler of `logger` (the root logger by default), once: for
    handlers set up outside settings.LOGGING (Celery's worker replaces the root's handlers)."""
    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, RedactSecrets) for f in handler.filters):
            handler.addFilter(RedactSecrets())


def _on_celery_logging(logger=None, **_kwargs) -> None:
    install_on_handlers(logger)


try:  # a Celery worker sets up the root's handlers itself (after Django's LOGGING): they get the filter too
    from celery import signals as _celery_signals

    _celery_signals.after_setup_logger.connect(_on_celery_logging, weak=False, dispatch_uid="gateway-redact-root")
    _celery_signals.after_setup_task_logger.connect(_on_celery_logging, weak=False, dispatch_uid="gateway-redact-task")
except ImportError:  # pragma: no cover - celery is a dependency; a bare import still works without it
    pass


class NotImplementedIsWarning(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "status_code", None) == HTTPStatus.NOT_IMPLEMENTED and record.levelno > logging.WARNING:
            record.levelno, record.levelname = logging.WARNING, logging.getLevelName(logging.WARNING)
        return True
