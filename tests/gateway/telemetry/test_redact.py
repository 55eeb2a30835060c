"""`gateway.telemetry.redact`: credentials out of text that leaves the gateway, prose left alone; the log
filters: key-shaped strings out of every console line, credentials sent in a query string out of
the access log lines."""

from __future__ import annotations

import logging

import pytest

from gateway.telemetry.logfilters import RedactSecretPaths, RedactSecrets, install
from gateway.telemetry.redact import REDACTED, credentials_in, redact

KEY = "sk-test-SECRET1234567890abcdefXYZ"


@pytest.mark.parametrize("text", [
    f"Incorrect API key provided: {KEY}.",
    f"invalid x-api-key (received Authorization: Bearer {KEY})",
    "key sk-ant-api03-abcdefghijklmnop0123 refused",
    "gateway key svc_usr_12_abcdefABCDEF0123456789abcdefABCD",
    "AWS AKIAIOSFODNN7EXAMPLE denied",
    "token ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "hf_abcdefghijklmnopqrstuvwxyz0123 is not valid",
    "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "POST /bot123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw1/sendMessage failed",
    "Authorization: Basic dXNlcjpwYXNzd29yZA==",
    '{"api_key": "abcDEF123456"}',
    "password=hunter2hunter2",
    "GET /v1/models?key=whatever HTTP/1.1",
    "digest 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "blob QmVhcmVyIHNrLXRlc3QtU0VDUkVUMTIzNDU2Nzg5MA== end",
])
def test_what_looks_like_a_credential_goes(text):
    out = redact(text)
    assert REDACTED in out
    for secret in (KEY, "abcdefghijklmnop0123", "AKIAIOSFODNN7", "dXNlcjpw", "abcDEF123456", "hunter2",
                   "whatever", "9f86d081884c7d65", "QmVhcmVyIHNr", "AAHdqTcvCH1vGWJx", "eyJzdWIi"):
        assert secret not in out


@pytest.mark.parametrize("text", [
    "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens.",
    "The model `Meta-Llama-3.1-70B-Instruct-Turbo-FP8` does not exist",
    "The model gpt-4o-mini-2024-07-18 does not exist or you do not have access to it.",
    "Bearer tokens are required; missing bearer token.",
    "Basic authentication is not supported.",
    "password: expected at least 8 characters; max token: 4096",
    "See https://platform.openai.com/account/api-keys and /api/v1/channels/telegram/updates/sendMessage.",
    "Pneumonoultramicroscopicsilicovolcanoconiosis is a long word; risk-free sk-learn",
    "request 123e4567-e89b-12d3-a456-426614174000 failed",
    "",
])
def test_prose_stays(text):
    assert redact(text) == text


def test_the_known_credentials_go_whatever_their_shape_and_case():
    secret = "plainsecretvalueforthemodelserver"
    text = (f"key {secret}, upper {secret.upper()}, url-encoded {secret}%3D, cut short "
            f"{secret[:15]}…, tail …{secret[-12:]}, short one {secret[:6]}")
    out = redact(text, [secret])
    assert secret[:15] not in out and secret[-12:] not in out and secret.upper() not in out
    assert out.endswith(f"short one {secret[:6]}")  # six characters of it say nothing
    assert redact("the key ollama failed", ["ollama"]) == "the key ollama failed"  # too short to be a secret
    assert redact('{"k": "a\\/b+c\\/d=secret-value"}', ["a/b+c/d=secret-value"]) == '{"k": "[redacted]"}'


def test_the_credentials_of_a_request():
    assert credentials_in({"Authorization": "Bearer abc", "X-API-Key": "def", "Content-Type": "text/plain"}) == [
        "Bearer abc", "abc", "def"]
    assert credentials_in([(b"x-api-key", b"k1")]) == ["k1"]


def test_the_loose_shapes_are_left_out_of_log_lines():
    request_id = "0123456789abcdef0123456789abcdef"
    assert redact(f"request {request_id} failed", loose=False) == f"request {request_id} failed"
    assert redact(f"request {request_id} with {KEY}", loose=False) == f"request {request_id} with [redacted]"


# ---- logs ----------------------------------------------------------------------------------


def test_every_console_line_goes_through_the_filter():
    console = [h for h in logging.getLogger().handlers if type(h) is logging.StreamHandler]
    assert console and all(any(isinstance(f, RedactSecrets) for f in h.filters) for h in console)


def test_the_filter_redacts_message_arguments_and_traceback():
    try:
        raise RuntimeError(f"upstream said {KEY}")
    except RuntimeError as exc:
        record = logging.LogRecord("x", logging.WARNING, __file__, 1, "call failed: %s (%d tries) %s",
                                   (f"Bearer {KEY}", 3, exc), (type(exc), exc, exc.__traceback__))
    assert RedactSecrets().filter(record) is True
    line = logging.Formatter().format(record)
    assert KEY not in line and "SECRET123" not in line
    assert "call failed: Bearer [redacted] (3 tries) upstream said [redacted]" in line
    assert "RuntimeError: upstream said [redacted]" in line


def test_the_filter_knows_the_model_servers_keys_once_the_registry_is_read(db):
    from gateway.registry.snapshot import registry
    from tests.factories import ModelFactory, ModelServerFactory

    secret = "plainsecretvalueforthemodelserver"
    ModelFactory(server=ModelServerFactory(api_key=secret), is_default=True)
    registry()
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "upstream said %s", (f"no {secret}",), None)
    RedactSecrets().filter(record)
    assert record.getMessage() == "upstream said no [redacted]"


def test_the_filter_keeps_arguments_a_formatter_reads():
    """uvicorn's access formatter reads the arguments themselves: they stay a tuple of values."""
    args = ("127.0.0.1:5000", "GET", "/v1/models", "1.1", 200)
    record = logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d', args, None)
    RedactSecrets().filter(record)
    assert record.args == args


def _access_line(path: str, logger: str = "uvicorn.access") -> str:
    record = logging.LogRecord(logger, logging.INFO, __file__, 1, '%s - "%s %s HTTP/%s" %d',
                               ("127.0.0.1:5000", "GET", path, "1.1", 200), None)
    RedactSecretPaths().filter(record)
    return record.getMessage()


@pytest.mark.parametrize("param", ["api_key", "key", "token", "access_token", "password", "secret", "apiKey",
                                   "API-KEY", "client_secret"])
def test_a_credential_in_a_query_string_is_not_written_to_the_access_log(param):
    line = _access_line(f"/v1/models?limit=5&{param}=s3cr3t-VALUE&after=x")
    assert "s3cr3t-VALUE" not in line
    assert f"/v1/models?limit=5&{param}=[redacted]&after=x" in line


def test_other_query_parameters_stay():
    assert "/api/v1/conversations?page=2&search=monkey" in _access_line("/api/v1/conversations?page=2&search=monkey")


def test_gunicorn_access_lines_lose_query_credentials_too():
    install()
    record = logging.LogRecord("gunicorn.access", logging.INFO, __file__, 1, "%(r)s %(s)s",
                               ({"r": "GET /v1/models?api_key=sk-abc123456 HTTP/1.1", "s": "200",
                                 "U": "/v1/models", "q": "api_key=sk-abc123456"},), None)
    assert all(f.filter(record) for f in logging.getLogger("gunicorn.access").filters)
    assert record.getMessage() == "GET /v1/models?api_key=[redacted] HTTP/1.1 200"
    assert "sk-abc123456" not in str(record.args)
