"""No credential reaches a routine run's record: behind a leaky model server
(its errors echo the key it was sent), a failed run's `error`, its deliveries' errors, the inbox,
the runs API, the admin's run page and the log lines all do without the key. A channel provider
or a receiver that echoes a token or the routine's secret is redacted too."""

from __future__ import annotations

import logging

import pytest

from gateway.celery import app as celery_app
from gateway.registry.snapshot import registry
from gateway.web.errors import ApiError
from routines.ingest import ingest
from routines.models import Delivery, InboxMessage, Routine, Run
from routines.routine_writes import new_token
from routines.runs import execute_run
from routines.signatures import sign
from tests.factories import LinkedChannelFactory, ModelFactory, ModelServerFactory, RoutineFactory, api_key_for, bearer
from tests.routines.test_channels import ProviderStandIn
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture

KEY = "sk-test-SECRET1234567890abcdefXYZ"
PLAIN_KEY = "plainsecretvalueforthemodelserver"  # no shape: only known as the server's key
ROUTINE_SECRET = "routine-signing-secret-0123456789"
BOT_TOKEN = "987654321:AAthe-bot-token-nobody-may-see-0123"
WA_TOKEN = "EAAG-whatsapp-token-nobody-may-see"
LEAKS = ("SECRET1234567890", "secretvalueforthemodel", "signing-secret-0123", "bot-token-nobody",
         "whatsapp-token-nobody")


def leaked(text: str) -> list[str]:
    return [leak for leak in LEAKS if leak.lower() in (text or "").lower()]


@pytest.fixture(autouse=True)
def eager():
    before = celery_app.conf.CELERY_TASK_ALWAYS_EAGER
    celery_app.conf.CELERY_TASK_ALWAYS_EAGER = True
    yield
    celery_app.conf.CELERY_TASK_ALWAYS_EAGER = before


@pytest.fixture(params=[KEY, PLAIN_KEY], ids=["shaped key", "plain key"])
def server_key(request):
    return request.param


@pytest.fixture
def routine(owner, upstream, server_key):  # noqa: F811
    server = ModelServerFactory(name="oa", kind="openai", base_url=f"{upstream.url}/v1", read_timeout=5.0,
                                api_key=server_key)
    ModelFactory(server=server, name="echo-1", is_default=True)
    return RoutineFactory(account=owner, name="Digest", prompt="Summarize the event.", trigger="webhook",
                          delivery_targets=["inapp"], webhook_secret=ROUTINE_SECRET,
                          webhook_token=new_token())


def accept(routine, event_id="e1"):
    body = b'{"text": "hello"}'
    status, answer = ingest(routine.webhook_token, body, {
        "X-Event-Id": event_id, "Content-Type": "application/json",
        "X-Svc-Signature": "sha256=" + sign(ROUTINE_SECRET, body)})
    assert status == 200 and answer["queued"] is True, answer
    return Run.objects.get(event_id=event_id, routine=routine)


def surfaces(client, owner, routine, run) -> dict[str, str]:
    """Every place a run's failure is shown: the record, the runs API, the inbox, the admin."""
    headers = bearer(api_key_for(owner))
    run.refresh_from_db()
    return {
        "run error": run.error,
        "deliveries": " ".join(Delivery.objects.filter(run=run).values_list("error", flat=True)),
        "runs API": client.get(f"/api/v1/routines/{routine.pk}/runs", headers=headers).content.decode(),
        "inbox API": client.get("/api/v1/inbox", headers=headers).content.decode(),
        "inbox rows": " ".join(f"{m.title} {m.body}" for m in InboxMessage.objects.all()),
    }


@pytest.mark.parametrize("knobs", [{"fail_status": 400}, {"fail_status": 401}, {"fail_status": 500},
                                   {"error_after_tokens": 0}, {"error_after_tokens": 2}],
                         ids=["refusal", "key refused", "server error", "error event first", "error event mid-reply"])
def test_a_failed_run_does_not_carry_the_key(routine, owner, upstream, client, admin_client,  # noqa: F811
                                             caplog, knobs, settings):
    settings.ROUTINE_FAILURES_TO_DISABLE = 1  # the switched-off notice lands in the inbox too
    upstream.configure(leak_credentials=True, **knobs)
    with caplog.at_level(logging.INFO):
        run = execute_run(accept(routine).pk)
    assert run.status == "failed" and run.error
    assert upstream.requests, "the model server was asked (and leaked)"
    shown = surfaces(client, owner, routine, run)
    shown["admin run page"] = admin_client.get(f"/admin/routines/run/{run.pk}/change/").content.decode()
    shown["admin run list"] = admin_client.get("/admin/routines/run/").content.decode()
    for where, text in shown.items():
        assert not leaked(text), f"{where}: {text[:2000]}"
    lines = [record.getMessage() for record in caplog.records]
    assert not [line for line in lines if leaked(line)]
    if knobs.get("fail_status") == 400:  # the server's refusal is shown, in its words, without the key
        assert run.error.startswith("400: ") and "[redacted]" in run.error
    assert InboxMessage.objects.filter(title__contains="switched off").exists()


def test_any_error_a_run_ends_with_is_redacted(routine, monkeypatch, server_key, caplog):
    """Whatever path the error took (here an ApiError that quotes the key and the routine's
    secret), the stored error does without them: the keys of the registry the run read, and the
    routine's secret."""
    def failing(run, model_id):
        registry()  # as the real call: the model registry is read first
        raise ApiError(502, f"upstream said: key {server_key} / secret {ROUTINE_SECRET} / Bearer {server_key}")

    monkeypatch.setattr("routines.runs._ask_model", failing)
    run = execute_run(accept(routine).pk)
    assert run.status == "failed" and run.error.startswith("502: upstream said: key [redacted]")
    assert not leaked(run.error)


@pytest.fixture
def provider(settings):
    stand_in = ProviderStandIn()
    settings.TELEGRAM_API_BASE = stand_in.base
    settings.TELEGRAM_BOT_TOKEN = BOT_TOKEN
    settings.WHATSAPP_API_BASE = stand_in.base + "/v21.0"
    settings.WHATSAPP_PHONE_NUMBER_ID = "1098765"
    settings.WHATSAPP_TOKEN = WA_TOKEN
    settings.DELIVERY_RETRY_ATTEMPTS = 1
    yield stand_in
    stand_in.close()


@pytest.mark.parametrize("server_key", [KEY], ids=["shaped key"])
def test_delivery_errors_that_echo_a_token_or_the_secret_are_redacted(routine, owner, upstream, provider,  # noqa: F811
                                                                     client, admin_client, caplog):
    number = "+5511999990000"
    LinkedChannelFactory(account=owner, kind="telegram", address="-1001", verified_at="2026-01-01T00:00Z")
    LinkedChannelFactory(account=owner, kind="whatsapp", address=number, verified_at="2026-01-01T00:00Z")
    Routine.objects.filter(pk=routine.pk).update(delivery_targets=["telegram", f"whatsapp:{number}"])
    routine.refresh_from_db()
    echo = f"you sent bot{BOT_TOKEN} with Bearer {WA_TOKEN}, secret {ROUTINE_SECRET}"
    provider.replies = [(400, {"ok": False, "description": echo}), (401, {"error": {"message": echo}})]
    with caplog.at_level(logging.INFO):
        run = execute_run(accept(routine).pk)
    assert run.status == "failed"
    errors = list(Delivery.objects.filter(run=run).values_list("error", flat=True))
    assert len(errors) == 2 and all("answered 40" in e and "[redacted]" in e for e in errors), errors
    shown = surfaces(client, owner, routine, run)
    shown["admin run page"] = admin_client.get(f"/admin/routines/run/{run.pk}/change/").content.decode()
    for where, text in shown.items():
        assert not leaked(text), f"{where}: {text[:2000]}"
    assert not [r.getMessage() for r in caplog.records if leaked(r.getMessage())]
