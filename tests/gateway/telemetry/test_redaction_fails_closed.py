"""Log redaction fails closed: a record that `RedactSecrets` cannot clean is written as a fixed
text, without its message, arguments, fields, traceback or the request id a client chose, and
counted in `gateway_log_redaction_failures_total` on /metrics; a record it can clean is written as
before. Written through handlers made as settings.LOGGING makes its console handler, with each of
its two formatters (plain text and JSON)."""

from __future__ import annotations

import io
import json
import logging

import pytest
from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from gateway.telemetry import metrics, redact
from gateway.telemetry.logfilters import WITHHELD, RedactSecrets
from gateway.telemetry.logjson import Exchange
from tests.factories import ModelFactory, ModelServerFactory
from tests.gateway.telemetry.test_metrics import samples, value

SERVER_KEY = "plainsecretvalueforthemodelserver"
BOT_TOKEN = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1"
FAILURES = "gateway_log_redaction_failures_total"
LOGGER = "tests.redaction_fails_closed"


def console_handler(formatter: str) -> tuple[logging.Handler, io.StringIO]:
    """settings.LOGGING's console handler with its `formatter` ("plain" or "json") and its
    filters, in their order, writing to a string."""
    config = django_settings.LOGGING
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    spec = config["formatters"][formatter]
    handler.setFormatter(import_string(spec["()"])() if "()" in spec else logging.Formatter(spec["format"]))
    for name in config["handlers"]["console"]["filters"]:
        handler.addFilter(import_string(config["filters"][name]["()"])())
    return handler, stream


@pytest.fixture
def written():
    """Attaches a plain and a JSON console handler to a logger (alone: it does not propagate);
    gives a function returning what each wrote: (plain text, JSON lines parsed)."""
    attached = []

    def attach(name: str = LOGGER):
        logger = logging.getLogger(name)
        handlers = [console_handler("plain"), console_handler("json")]
        attached.append((logger, handlers, logger.level, logger.propagate))
        for handler, _ in handlers:
            logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
        (_, plain), (_, as_json) = handlers
        return lambda: (plain.getvalue(), [json.loads(line) for line in as_json.getvalue().splitlines()])

    yield attach
    for logger, handlers, level, propagate in attached:
        for handler, _ in handlers:
            logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate


@pytest.fixture
def server_key(db):
    """A model server's key, known to the filter once this process has read the registry."""
    from gateway.registry.snapshot import registry

    ModelFactory(server=ModelServerFactory(api_key=SERVER_KEY), is_default=True)
    registry()
    assert SERVER_KEY in redact.configured_secrets()
    return SERVER_KEY


class Unprintable:
    def __str__(self) -> str:
        raise ValueError("no text for you")


def failing_source():
    raise LookupError("the registry's keys are not readable")


def log_a_secret(secret: str, *args) -> None:
    """An ERROR record carrying `secret` in its arguments (followed by `args`), its fields, its
    traceback and the request id its client chose."""
    try:
        raise RuntimeError(f"upstream said: invalid key {secret}")
    except RuntimeError:
        logging.getLogger(LOGGER).exception(
            "call failed with %s" + " (%s)" * len(args), f"key {secret}", *args,
            extra={"fields": {"event": "call_failed", "cause": f"key {secret}"}, "request_id": f"mine-{secret}"})


def assert_withheld(plain: str, lines: list[dict], secret: str, logger: str, exception: str) -> None:
    text = WITHHELD.format(exception)
    assert text == f"log record withheld: its redaction failed ({exception})"
    # one line each: no traceback under it
    assert plain.endswith(f" ERROR {logger} {text}\n") and plain.count("\n") == 1, plain
    (line,) = lines
    assert {k: v for k, v in line.items() if k != "time"} == {
        "level": "ERROR", "logger": logger, "message": text, "event": "redaction_failed"}
    for output in (plain, json.dumps(lines)):
        assert secret not in output and secret[:12] not in output and secret[-12:] not in output


@pytest.mark.parametrize("failure", ["an argument whose str() raises", "a source of secrets that raises"])
def test_a_record_the_filter_cannot_clean_is_written_as_a_fixed_text_and_counted_once(
        failure, server_key, written, monkeypatch):
    output = written()
    before = value(samples(), FAILURES)
    if failure == "a source of secrets that raises":
        with monkeypatch.context() as patched:  # until the scrape below, which logs lines of its own
            patched.setattr(redact, "secret_sources", [*redact.secret_sources, failing_source])
            log_a_secret(server_key)
        exception = "LookupError"
    else:
        log_a_secret(server_key, Unprintable())
        exception = "ValueError"
    plain, lines = output()
    assert_withheld(plain, lines, server_key, LOGGER, exception)
    # two handlers wrote the one record: it counts once
    assert value(samples(), FAILURES) == before + 1


def test_settings_that_cannot_be_read_withhold_the_record_rather_than_leave_their_secrets_out(
        db, settings, written, monkeypatch):
    settings.TELEGRAM_BOT_TOKEN = BOT_TOKEN
    assert BOT_TOKEN in redact.configured_secrets()
    output = written()
    before = value(samples(), FAILURES)

    class Unreadable:  # settings named, but failing to load
        configured = True

        def __getattr__(self, name):
            raise ImproperlyConfigured(f"{name}: the settings could not be read")

    with monkeypatch.context() as patched:
        patched.setattr("django.conf.settings", Unreadable())
        with pytest.raises(ImproperlyConfigured):
            redact.configured_secrets()
        log_a_secret(BOT_TOKEN)
    plain, lines = output()
    assert_withheld(plain, lines, BOT_TOKEN, LOGGER, "ImproperlyConfigured")
    assert value(samples(), FAILURES) == before + 1


def test_a_request_line_whose_client_chosen_id_cannot_be_cleaned_is_withheld(server_key, written, monkeypatch):
    """The request's own line (JSON logs) cleans a request id the client chose itself; without the
    secrets it leaves the line to the filter, which withholds it."""
    output = written("gateway.requests")
    before = value(samples(), FAILURES)
    exchange = Exchange("POST", request_id=f"mine-{server_key}")
    exchange.route = "v1/chat/completions"
    with monkeypatch.context() as patched:
        patched.setattr(redact, "secret_sources", [*redact.secret_sources, failing_source])
        exchange._log(logging.INFO, 200, 0.25)
    plain, (line,) = output()
    text = WITHHELD.format("LookupError")
    assert plain.endswith(f" INFO gateway.requests {text}\n") and server_key[:12] not in plain
    assert {k: v for k, v in line.items() if k != "time"} == {
        "level": "INFO", "logger": "gateway.requests", "message": text, "event": "redaction_failed"}
    assert value(samples(), FAILURES) == before + 1


def test_a_counter_that_fails_neither_raises_nor_logs_and_a_record_it_writes_is_not_counted(
        server_key, written, monkeypatch):
    output = written()
    calls = []

    def broken():
        calls.append(1)
        # a line written while counting, which the filter cannot clean either: withheld, not counted again
        logging.getLogger(LOGGER).error("counting %s %s", f"key {server_key}", Unprintable())
        raise OSError("no space left for the metrics file")

    monkeypatch.setattr(metrics, "log_redaction_failed", broken)
    record = logging.LogRecord(LOGGER, logging.ERROR, __file__, 1, "%s %s", (f"key {server_key}", Unprintable()),
                               None)
    assert RedactSecrets().filter(record) is True
    assert (record.getMessage(), record.args, record.fields) == (WITHHELD.format("ValueError"), (),
                                                                 {"event": "redaction_failed"})
    assert calls == [1]
    plain, lines = output()
    assert [line["message"] for line in lines] == [WITHHELD.format("ValueError")]  # the counter's own line, alone
    assert plain.count("\n") == 1 and server_key not in plain


def test_a_record_the_filter_can_clean_is_written_cleaned_and_not_counted(server_key, written):
    output = written()
    before = value(samples(), FAILURES)
    logging.getLogger(LOGGER).warning("call failed with %s (%d tries)", f"key {server_key}", 3,
                                      extra={"fields": {"event": "call_failed", "cause": f"key {server_key}"}})
    plain, (line,) = output()
    assert plain.endswith(f" WARNING {LOGGER} call failed with key [redacted] (3 tries)\n")
    assert {k: v for k, v in line.items() if k != "time"} == {
        "level": "WARNING", "logger": LOGGER, "message": "call failed with key [redacted] (3 tries)",
        "event": "call_failed", "cause": "key [redacted]"}
    assert value(samples(), FAILURES) == before
