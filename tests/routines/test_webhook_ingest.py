"""POST /api/v1/hooks/{token} (spec 4.6, 4.7, 5.4): each check in its order with its exact body,
signatures, the per-routine and per-address ceilings, and the function the e-mail path calls.
Event ids, the duplicate window and the stored bodies are in test_webhook_events.py."""

import json

import pytest
import time_machine

from routines.ingest import ingest
from routines.models import Event, Run
from routines.routine_writes import new_token
from tests.contract import assert_too_many_attempts
from tests.factories import AccountFactory, RoutineFactory
from tests.routines import webhook_support
from tests.routines.webhook_support import T0, hook, sig

# the hook view takes events in on a worker thread (routines/intake.py): it must see the test's rows
pytestmark = pytest.mark.django_db(transaction=True)

routine_fixture = webhook_support.routine_fixture  # the fixture `routine`
unsigned_fixture = webhook_support.unsigned_fixture  # the fixture `unsigned`


# --- the eight checks, in order -------------------------------------------------------------


def test_1_webhooks_switched_off_answer_without_looking_at_the_token(client, routine, settings):
    settings.WEBHOOKS_ENABLED = False
    for token in (routine.webhook_token, "0" * 48, "A" * 48, "abc", "g" * 48, "a" * 65):
        r = hook(client, token, b"{}", signed=False)
        assert r.status_code == 200
        assert r.json() == {"ok": True, "ignored": "disabled"}
    assert not Event.objects.exists()


def test_2_an_unknown_token_is_404_not_found(client, routine):
    r = hook(client, "ab" * 24)
    assert r.status_code == 404
    body = r.json()
    assert body["error"] == "not_found"
    assert isinstance(body["message"], str) and body["message"]


@pytest.mark.parametrize("token", ["a" * 31, "a" * 65, "A" * 48, "g" * 48, "abc", "a" * 47 + "-"])
def test_2_a_token_of_the_wrong_form_gets_the_plain_404(client, db, token):
    r = client.post(f"/api/v1/hooks/{token}", b"{}", content_type="application/json")
    assert r.status_code == 404
    assert r.json() == {"message": "Not Found."}
    assert "X-RateLimit-Limit" not in r.headers


@pytest.mark.parametrize("token", ["a" * 31, "A" * 48, "a" * 47 + "-"])
def test_2_the_plain_404_is_the_answer_of_an_unknown_route(client, db, token):
    unknown = client.post("/api/v1/no-such-route", b"{}", content_type="application/json")
    for method in ("POST", "GET", "PUT"):
        r = client.generic(method, f"/api/v1/hooks/{token}", b"{}", content_type="application/json")
        assert (r.status_code, r.content) == (unknown.status_code, unknown.content)
        assert sorted(r.headers) == sorted(unknown.headers)


def test_a_token_of_the_wrong_form_counts_against_the_per_address_ceiling(client, db, settings):
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "hooks": 1}
    with time_machine.travel(T0, tick=False):
        assert client.post("/api/v1/hooks/abc", b"", content_type="text/plain").status_code == 404
        assert_too_many_attempts(client.post("/api/v1/hooks/abc", b"", content_type="text/plain"), 1, now=T0)


@pytest.mark.parametrize("length", [32, 64])
def test_2_tokens_of_32_and_64_hex_are_looked_up(client, owner, length):
    token = "c" * length
    RoutineFactory(account=owner, name="r", prompt="p", delivery_targets=["inapp"], webhook_token=token,
                   webhook_secret="x")
    assert hook(client, token, signed=False).status_code == 401  # found, then refused for its signature


def test_3_a_paused_routine_ignores_events(client, routine):
    routine.is_enabled = False
    routine.save()
    r = hook(client, routine, b"x" * 70000, signed=False)  # before the size and signature checks
    assert r.status_code == 200
    assert r.json() == {"ok": True, "ignored": "disabled_routine"}
    assert not Event.objects.exists()


def test_4_a_body_over_65536_bytes_is_413(client, routine):
    ok = b"a" * 65536
    assert hook(client, routine, ok).json()["queued"] is True
    big = b"a" * 65537
    r = hook(client, routine, big)
    assert r.status_code == 413
    body = r.json()
    assert body["error"] == "payload_too_large"
    assert body["message"] and body["max_bytes"] == 65536
    r = hook(client, routine, big, signed=False)  # the size check comes before the signature
    assert r.status_code == 413


def test_4_the_cap_is_a_setting(client, routine, settings):
    settings.WEBHOOK_MAX_BODY_BYTES = 10
    assert hook(client, routine, b"0123456789").status_code == 200
    assert hook(client, routine, b"0123456789a").status_code == 413


def test_5_a_missing_or_wrong_signature_is_401(client, routine):
    for headers in ({}, {"X-Svc-Signature": "sha256=" + "0" * 64}, {"X-Svc-Signature": sig(b"{}", "other")},
                    {"X-Hub-Signature-256": "nonsense"}):
        r = hook(client, routine, b"{}", signed=False, headers=headers)
        assert r.status_code == 401
        body = r.json()
        assert body["error"] == "unauthorized" and body["message"]
    assert not Event.objects.exists()


def test_6_the_same_event_id_within_the_window_is_a_duplicate(client, routine):
    first = hook(client, routine, b'{"id": "evt-1"}')
    assert first.json() == {"ok": True, "queued": True, "event_id": "evt-1"}
    again = hook(client, routine, b'{"id": "evt-1", "other": 1}')
    assert again.status_code == 200
    assert again.json() == {"ok": True, "ignored": "duplicate", "event_id": "evt-1"}
    assert Event.objects.count() == 1


def test_7_the_31st_event_in_a_minute_is_rate_limited_and_not_remembered(client, routine):
    with time_machine.travel(T0, tick=False) as traveller:
        for i in range(30):
            assert hook(client, routine, json.dumps({"id": i}).encode()).json()["queued"] is True
        r = hook(client, routine, b'{"id": "late"}')
        assert r.status_code == 200
        assert r.json() == {"ok": True, "ignored": "rate_limited"}
        assert Event.objects.count() == 30
        traveller.shift(60)
        # the refused event was not remembered as seen: sent again, it is accepted
        assert hook(client, routine, b'{"id": "late"}').json() == {"ok": True, "queued": True, "event_id": "late"}


def test_7_the_rate_is_per_routine_and_a_setting(client, routine, unsigned, settings):
    settings.WEBHOOK_EVENTS_PER_MINUTE = 2
    with time_machine.travel(T0, tick=False):
        assert hook(client, routine, b"1").json()["queued"] is True
        assert hook(client, routine, b"2").json()["queued"] is True
        assert hook(client, routine, b"3").json()["ignored"] == "rate_limited"
        assert hook(client, unsigned, b"3").json()["queued"] is True


def test_8_an_accepted_event_is_stored_with_a_queued_run_before_the_answer(client, routine):
    r = hook(client, routine, b'{"b": 1, "a": [1, 2]}', headers={"X-Event-Id": "e-42"})
    assert r.status_code == 200
    assert r.json() == {"ok": True, "queued": True, "event_id": "e-42"}
    event = Event.objects.get()
    assert event.routine == routine and event.event_id == "e-42" and event.source == "webhook"
    assert event.body == '{\n  "b": 1,\n  "a": [\n    1,\n    2\n  ]\n}'
    run = Run.objects.get()
    assert run.status == "queued" and run.trigger == "webhook" and run.source_event == event
    assert run.event_id == "e-42"  # its task is enqueued after the answer (tests/routines/test_intake.py)


def test_checks_run_in_order_paused_before_size_before_signature(client, routine):
    big_unsigned = b"x" * 70000
    assert hook(client, routine, big_unsigned, signed=False).status_code == 413
    routine.is_enabled = False
    routine.save()
    assert hook(client, routine, big_unsigned, signed=False).json()["ignored"] == "disabled_routine"


# --- 5.4 signatures --------------------------------------------------------------------------


def test_a_github_style_signed_delivery_is_accepted(client, routine):
    body = json.dumps({"ref": "refs/heads/main", "commits": [{"id": "abc"}]}, separators=(",", ":")).encode()
    r = hook(client, routine, body, signed=False, headers={
        "X-Hub-Signature-256": "sha256=" + sig(body), "X-GitHub-Event": "push", "X-Repo-Delivery": "gh-1"})
    assert r.status_code == 200
    assert r.json() == {"ok": True, "queued": True, "event_id": "gh-1"}


def test_the_prefix_is_optional_and_the_header_may_be_either(client, routine):
    for i, headers in enumerate([{"X-Svc-Signature": "sha256="}, {"X-Svc-Signature": ""},
                                 {"X-Hub-Signature-256": "sha256="}, {"X-Hub-Signature-256": ""}]):
        body = json.dumps({"n": i}).encode()
        name, prefix = next(iter(headers.items()))
        r = hook(client, routine, body, signed=False, headers={name: prefix + sig(body)})
        assert r.json()["queued"] is True, headers


def test_a_re_serialized_body_fails(client, routine):
    sent = b'{"b":1,  "a":2}'
    reserialized = json.dumps(json.loads(sent)).encode()
    assert reserialized != sent
    r = hook(client, routine, sent, signed=False, headers={"X-Svc-Signature": "sha256=" + sig(reserialized)})
    assert r.status_code == 401
    assert r.json()["error"] == "unauthorized"


def test_an_unsigned_routine_accepts_anyone(client, unsigned):
    assert hook(client, unsigned, b"hello", content_type="text/plain").json()["queued"] is True


def test_the_rotated_secret_replaces_the_old_one(client, routine):
    from routines.routine_writes import routine_rotate_secret

    new = routine_rotate_secret(routine=routine)
    body = b'{"n": 1}'
    assert hook(client, routine, body, signed=False, headers={"X-Svc-Signature": sig(body)}).status_code == 401
    assert hook(client, routine, body, signed=False, headers={"X-Svc-Signature": sig(body, new)}).status_code == 200


# --- the per-address ceiling (120 per minute) -------------------------------------------------


def test_the_121st_request_from_an_address_is_429(client, unsigned):
    with time_machine.travel(T0, tick=False):
        for i in range(120):
            r = hook(client, unsigned, b"", content_type="text/plain")
            assert r.status_code == 200, i
        assert r["X-RateLimit-Limit"] == "120" and r["X-RateLimit-Remaining"] == "0"
        r = hook(client, unsigned, b"", content_type="text/plain")
        assert_too_many_attempts(r, 120, now=T0)
        # before everything else: even an unknown token or the switched-off installation
        assert hook(client, "ab" * 24).status_code == 429
        other = client.post(f"/api/v1/hooks/{unsigned.webhook_token}", b"", content_type="text/plain",
                            REMOTE_ADDR="10.1.2.3")
        assert other.status_code == 200


def test_the_per_address_ceiling_comes_before_the_switch(client, unsigned, settings):
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "hooks": 1}
    settings.WEBHOOKS_ENABLED = False
    with time_machine.travel(T0, tick=False):
        assert hook(client, unsigned).json() == {"ok": True, "ignored": "disabled"}
        assert hook(client, unsigned).status_code == 429


# --- the function the e-mail path calls -------------------------------------------------------


def test_ingest_for_email_uses_the_message_id_and_skips_the_signature(routine, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks():
        status, body = ingest(routine.webhook_token, b"Subject: hi\n\nhello", {}, source="email",
                              event_id="<abc@mail.example>", verify_signature=False)
    assert (status, body) == (200, {"ok": True, "queued": True, "event_id": "<abc@mail.example>"})
    run = Run.objects.get()
    assert run.trigger == "email" and run.source_event.source == "email"
    status, body = ingest(routine.webhook_token, b"x", {}, source="email", event_id="<abc@mail.example>",
                          verify_signature=False)
    assert body == {"ok": True, "ignored": "duplicate", "event_id": "<abc@mail.example>"}


def test_another_accounts_token_reaches_only_its_routine(client, routine):
    other = AccountFactory(email="someone@example.test")
    theirs = RoutineFactory(account=other, name="Theirs", prompt="p", delivery_targets=["inapp"],
                            webhook_secret=None, webhook_token=new_token())
    assert hook(client, theirs, b"x", content_type="text/plain").json()["queued"] is True
    assert Event.objects.get().routine == theirs
    assert not routine.events.exists()
