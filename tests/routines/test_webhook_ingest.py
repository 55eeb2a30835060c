"""POST /api/v1/hooks/{token} (spec 4.6, 4.7, 5.4, 6.1): each check in its order with its exact
body, signatures, event ids, the duplicate window, the per-routine and per-address ceilings."""

import hashlib
import hmac
import json

import pytest
import time_machine

from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from routines.ingest import PENDING_SECONDS, event_text, ingest, pretty_json
from routines.models import Event, Run
from routines.routine_writes import new_token
from routines.run_start import queue_runs
from tests.contract import assert_too_many_attempts
from tests.factories import AccountFactory, RoutineFactory

# the hook view takes events in on a worker thread (routines/intake.py): it must see the test's rows
pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "s3cret-for-tests"
T0 = 1_800_000_000


@pytest.fixture
def routine(owner):
    return RoutineFactory(account=owner, name="Hook", prompt="Summarize.", trigger="webhook",
                          delivery_targets=["inapp"], webhook_secret=SECRET, webhook_token=new_token())


@pytest.fixture
def unsigned(owner):
    return RoutineFactory(account=owner, name="Open", prompt="Summarize.", trigger="webhook",
                          delivery_targets=["inapp"], webhook_secret=None, webhook_token=new_token())


def sig(body: bytes, secret: str = SECRET) -> str:
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def hook(client, routine_or_token, body=b"{}", *, signed=True, headers=None, content_type="application/json"):
    token = routine_or_token if isinstance(routine_or_token, str) else routine_or_token.webhook_token
    headers = dict(headers or {})
    if signed and not isinstance(routine_or_token, str) and routine_or_token.webhook_secret:
        headers.setdefault("X-Svc-Signature", sig(body, routine_or_token.webhook_secret))
    return client.post(f"/api/v1/hooks/{token}", body, content_type=content_type, headers=headers)


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


# --- 6.1 event ids ---------------------------------------------------------------------------


def test_event_id_sources_in_order(client, unsigned):
    all_headers = {"X-Event-Id": "h-event", "X-Request-Id": "h-request", "X-Delivery-Id": "h-delivery",
                   "X-Repo-Delivery": "h-repo"}
    body = json.dumps({"id": "b-id", "event_id": "b-event", "uuid": "b-uuid"}).encode()
    order = ["h-event", "h-request", "h-delivery", "h-repo"]
    for i, expected in enumerate(order):
        headers = {k: v for k, v in all_headers.items() if v in order[i:]}
        assert hook(client, unsigned, body, headers=headers).json()["event_id"] == expected
    for field in ("id", "event_id", "uuid"):
        data = {"id": "b-id", "event_id": "b-event", "uuid": "b-uuid"}
        for earlier in ("id", "event_id", "uuid"):
            if earlier == field:
                break
            del data[earlier]
        assert hook(client, unsigned, json.dumps(data).encode()).json()["event_id"] == data[field]
    plain = b"no id here"
    assert hook(client, unsigned, plain, content_type="text/plain").json()["event_id"] == hashlib.sha256(plain).hexdigest()


def test_the_gateways_own_request_id_is_not_an_event_id(client, unsigned):
    r = hook(client, unsigned, b"ping?", content_type="text/plain")
    assert r.json()["event_id"] == hashlib.sha256(b"ping?").hexdigest()
    assert r["X-Request-Id"] != r.json()["event_id"]


def test_identical_bodies_without_ids_and_empty_pings_are_duplicates(client, unsigned):
    assert hook(client, unsigned, b"same", content_type="text/plain").json()["queued"] is True
    assert hook(client, unsigned, b"same", content_type="text/plain").json()["ignored"] == "duplicate"
    assert hook(client, unsigned, b"", content_type="text/plain").json()["queued"] is True
    r = hook(client, unsigned, b"", content_type="text/plain")
    assert r.json() == {"ok": True, "ignored": "duplicate", "event_id": hashlib.sha256(b"").hexdigest()}


def test_the_duplicate_window_at_its_edges(client, unsigned):
    with time_machine.travel(T0, tick=False) as traveller:
        assert hook(client, unsigned, b'{"id": "w"}').json()["queued"] is True
        traveller.shift(599.9)
        assert hook(client, unsigned, b'{"id": "w"}').json()["ignored"] == "duplicate"
        traveller.shift(0.1)  # 600 s after the first: the window is over
        assert hook(client, unsigned, b'{"id": "w"}').json()["queued"] is True
        traveller.shift(1)
        assert hook(client, unsigned, b'{"id": "w"}').json()["ignored"] == "duplicate"


def test_the_window_is_a_setting(client, unsigned, settings):
    settings.WEBHOOK_DUPLICATE_WINDOW_SECONDS = 5
    with time_machine.travel(T0, tick=False) as traveller:
        assert hook(client, unsigned, b'{"id": "w"}').json()["queued"] is True
        traveller.shift(5)
        assert hook(client, unsigned, b'{"id": "w"}').json()["queued"] is True


def test_duplicates_are_per_routine(client, routine, unsigned):
    assert hook(client, routine, b'{"id": "same"}').json()["queued"] is True
    assert hook(client, unsigned, b'{"id": "same"}').json()["queued"] is True


def test_the_duplicate_window_on_redis(client, unsigned, redis_url):
    test_the_duplicate_window_at_its_edges(client, unsigned)


def test_an_event_lost_between_the_check_and_the_store_is_accepted_when_sent_again(client, unsigned, monkeypatch):
    """The process dies after the duplicate check and before the event is stored (nothing
    undoes the check): a retry is not answered "duplicate" for the whole window."""
    def dies(*args, **kwargs):
        raise SystemExit(1)

    with time_machine.travel(T0, tick=False) as traveller:
        monkeypatch.setattr("routines.ingest.queue_runs", dies)
        with pytest.raises(SystemExit):
            hook(client, unsigned, b'{"id": "lost"}')
        monkeypatch.undo()
        assert not Event.objects.exists()
        traveller.shift(PENDING_SECONDS)
        assert hook(client, unsigned, b'{"id": "lost"}').json() == {"ok": True, "queued": True, "event_id": "lost"}
        assert hook(client, unsigned, b'{"id": "lost"}').json()["ignored"] == "duplicate"


def test_the_same_id_arriving_while_the_first_is_being_stored_is_a_duplicate(unsigned, monkeypatch):
    real = queue_runs
    answers = []

    def meanwhile(entries, then=None):
        answers.append(ingest(unsigned.webhook_token, b'{"id": "twice"}', {}))
        return real(entries, then=then)

    monkeypatch.setattr("routines.ingest.queue_runs", meanwhile)
    assert ingest(unsigned.webhook_token, b'{"id": "twice"}', {})[1]["queued"] is True
    assert answers == [(200, {"ok": True, "ignored": "duplicate", "event_id": "twice"})]
    assert Event.objects.count() == 1


# --- bodies as the routine sees them ---------------------------------------------------------


def test_json_is_pretty_printed_other_content_is_text_empty_is_a_ping():
    assert event_text(b'{"a":{"b":"\xc3\xa9"}}') == '{\n  "a": {\n    "b": "\u00e9"\n  }\n}'
    assert event_text(b"plain words") == "plain words"
    assert event_text(b'"just a string"') == '"just a string"'
    assert event_text(b"") == ""
    assert event_text(b"\xff\xfe bad utf-8") == "\ufffd\ufffd bad utf-8"


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=30)


@hypothesis_settings(max_examples=300, deadline=None)
@given(value=JSON_VALUES, ensure_ascii=st.booleans())
def test_the_pretty_printer_writes_what_json_dumps_writes(value, ensure_ascii):
    """pretty_json replaces json.dumps(indent=2), whose Python encoder leaves reference cycles
    behind on every event (tests/gateway/test_hotpath.py): the same text, character for character."""
    assert pretty_json(value, ensure_ascii=ensure_ascii) == json.dumps(value, indent=2, ensure_ascii=ensure_ascii)


def test_lone_surrogates_in_json_are_stored_escaped(client, unsigned):
    r = hook(client, unsigned, b'{"a": "\\ud800", "b": "\xc3\xa9"}')
    assert r.status_code == 200 and r.json()["queued"] is True
    assert Event.objects.get().body == '{\n  "a": "\\ud800",\n  "b": "\\u00e9"\n}'
    r = hook(client, unsigned, b'{"id": "\\udfff-1"}')
    assert r.json() == {"ok": True, "queued": True, "event_id": "\\udfff-1"}
    assert Event.objects.filter(event_id="\\udfff-1").exists()
    assert hook(client, unsigned, b'{"id": "\\udfff-1"}').json()["ignored"] == "duplicate"


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
