"""No record is lost to its content: a call whose model name, message and tags hold a NUL (U+0000),
which PostgreSQL's text and jsonb refuse, is answered, metered and in the calls log, each NUL written
as U+FFFD (gateway/state/write_behind.py `without_nul`), on PostgreSQL and SQLite alike. Before, it was
answered and metered, and its row was dropped from the calls log with an error."""

import json

import pytest

from gateway.models import CallCapture, CallRecord, UsageRecord
from gateway.state.per_process import flush_all
from tests.asgi import call
from tests.factories import AccountFactory, AccountGroupFactory, ModelFactory, ModelServerFactory, api_key_for
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def key(upstream):  # noqa: F811
    account = AccountFactory(group=AccountGroupFactory(api_access=True, capture_calls=True))
    server = ModelServerFactory(name="oa", kind="openai", base_url=f"{upstream.url}/v1")
    ModelFactory(server=server, name="echo-1", is_default=True)
    return api_key_for(account)


def chat(key, body, request_id):
    """Through the project's ASGI application in this process, as uvicorn hands it a request."""
    status, _, content = call("POST", "/v1/chat/completions", body=json.dumps(body).encode(), headers=[
        (b"authorization", f"Bearer {key}".encode()), (b"content-type", b"application/json"),
        (b"x-request-id", request_id.encode())])
    return status, json.loads(content)


def test_a_call_with_a_nul_in_its_model_name_and_message_is_answered_metered_and_logged(key):
    body = {"model": "gpt\u0000mini", "messages": [{"role": "user", "content": "one\u0000two"}],
            "metadata": {"team": "a\u0000b"}}
    status, reply = chat(key, body, "nul-1")
    assert status == 200, reply
    assert reply["choices"][0]["message"]["content"] == "Echo: one\u0000two"  # a bare name: the default answered
    assert not CallRecord.objects.exists()  # spooled, as in a server process
    assert flush_all()
    assert UsageRecord.objects.get(request_id="nul-1").model == "oa/echo-1"
    call = CallRecord.objects.get(request_id="nul-1")
    assert (call.model_requested, call.model, call.status, call.outcome) == ("gpt\ufffdmini", "oa/echo-1", 200, "ok")
    assert call.tags == {"team": "a\ufffdb"}
    capture = CallCapture.objects.get(call=call)
    assert capture.reply == "Echo: one\ufffdtwo"
    assert "one\\u0000two" in capture.prompt  # the body as it came: the escape is text, kept as it was


def test_a_refused_call_with_a_nul_in_its_model_name_is_logged_too(key):
    status, reply = chat(key, {"model": "oa/echo-1\u0000", "messages": [{"role": "user", "content": "hi"}]}, "nul-2")
    assert status == 404, reply
    assert flush_all()
    call = CallRecord.objects.get(request_id="nul-2")
    assert (call.model_requested, call.status, call.outcome, call.error_code) == (
        "oa/echo-1\ufffd", 404, "refused", "model_not_found")
    assert not UsageRecord.objects.exists()


def test_a_usage_record_whose_text_holds_a_nul_is_written_not_dropped():
    """The usage writer's rule too (a record the database refuses is dropped, so it must never be
    refused for a NUL): a record from a spool line with one in its model and tags."""
    from datetime import datetime, timezone

    from gateway.usage.writer import insert_rows

    account = AccountFactory()
    at = datetime(2026, 11, 24, 10, 0, tzinfo=timezone.utc)
    insert_rows([("k-nul", account.pk, "oa/echo\u0000", "chat.completions", 3, 4, "req-nul", at, False, 0, 0,
                  {"team": "a\u0000b"}),
                 ("k-plain", account.pk, "oa/echo-1", "chat.completions", 1, 1, "req-plain", at, False, 0, 0, {})])
    record = UsageRecord.objects.get(key="k-nul")
    assert (record.model, record.tags, record.input_tokens) == ("oa/echo\ufffd", {"team": "a\ufffdb"}, 3)
    assert UsageRecord.objects.filter(key="k-plain").exists()
