"""Replay protection beyond the spec: a routine whose `webhook_signature_scheme`
is "standard" takes Standard Webhooks signatures (webhook-id, webhook-timestamp, webhook-signature
over "id.timestamp.body"), five minutes' tolerance either way, the id as the event id. The spec's
body scheme stays the default and is unchanged (tests/routines/test_webhook_ingest.py)."""

import base64
import hashlib
import hmac
import json
from datetime import datetime, timezone

import pytest
import time_machine
from standardwebhooks import Webhook

from routines.ingest import BAD_SIGNATURE, BAD_STANDARD_SIGNATURE, BAD_STANDARD_TIMESTAMP
from routines.models import Event, Routine, Run
from routines.routine_writes import new_secret, new_token
from routines.signatures import standard_check, standard_keys, standard_sign
from tests.conftest import clear_counters
from tests.factories import RoutineFactory, api_key_for, bearer

# the hook view takes events in on a worker thread (routines/intake.py): it must see the test's rows
pytestmark = pytest.mark.django_db(transaction=True)

HEX_SECRET = "5f" * 32  # the form of a generated secret: 64 hex characters
WHSEC = "whsec_" + base64.b64encode(b"a Standard Webhooks secret, 32 b").decode()
T0 = 1_800_000_000
BODY = json.dumps({"id": "body-id", "action": "opened"}).encode()
ROUTINES = "/api/v1/routines"


def make(owner, secret=HEX_SECRET, scheme="standard"):
    return RoutineFactory(account=owner, name="Std", prompt="Summarize.", trigger="webhook",
                          delivery_targets=["inapp"], webhook_secret=secret, webhook_token=new_token(),
                          webhook_signature_scheme=scheme)


@pytest.fixture
def routine(owner):
    return make(owner)


def plain_signature(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """What a sender without the library computes: the secret's UTF-8 bytes as the key."""
    content = f"{msg_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(secret.encode(), content, hashlib.sha256).digest()).decode()


def std_headers(secret=HEX_SECRET, msg_id="msg_1", timestamp=T0, body=BODY):
    return {"webhook-id": msg_id, "webhook-timestamp": str(timestamp),
            "webhook-signature": plain_signature(secret, msg_id, timestamp, body)}


def hook(client, routine, body=BODY, headers=None):
    return client.post(f"/api/v1/hooks/{routine.webhook_token}", body, content_type="application/json",
                       headers=headers or {})


@pytest.fixture
def at_t0():
    with time_machine.travel(T0, tick=False) as traveller:
        yield traveller


# --- accepted ------------------------------------------------------------------------------------


def test_a_valid_delivery_is_queued_with_the_webhook_id_as_event_id(client, routine, at_t0):
    r = hook(client, routine, headers={**std_headers(), "X-Event-Id": "ignored-here"})
    assert r.status_code == 200, r.content
    assert r.json() == {"ok": True, "queued": True, "event_id": "msg_1"}
    event = Event.objects.get(routine=routine)
    assert event.event_id == "msg_1"
    assert Run.objects.get(source_event=event).event_id == "msg_1"


@pytest.mark.parametrize("offset", [-300, -1, 0, 1, 300])
def test_a_timestamp_within_five_minutes_either_way_is_accepted(client, routine, at_t0, offset):
    r = hook(client, routine, headers=std_headers(timestamp=T0 + offset))
    assert r.status_code == 200 and r.json()["queued"] is True, r.content


def test_a_delivery_signed_by_the_reference_library_is_accepted_as_it_is(client, owner, at_t0):
    """`Webhook(secret).sign(...)` of the `standardwebhooks` package, headers sent as it makes them,
    for a `whsec_` secret, for a generated hex secret given as it was returned, and for any secret
    given as its UTF-8 bytes."""
    generated = new_secret()
    cases = [(WHSEC, Webhook(WHSEC)), (generated, Webhook(generated)),
             ("my own secret", Webhook("my own secret".encode())), (generated, Webhook(generated.encode()))]
    for n, (secret, signer) in enumerate(cases):
        routine = make(owner, secret=secret)
        msg_id = f"msg_lib_{n}"
        signature = signer.sign(msg_id, datetime.fromtimestamp(T0, tz=timezone.utc), BODY.decode())
        headers = {"webhook-id": msg_id, "webhook-timestamp": str(T0), "webhook-signature": signature}
        signer.verify(BODY, headers)  # the library itself takes it
        r = hook(client, routine, headers=headers)
        assert r.status_code == 200, (secret, r.content)
        assert r.json() == {"ok": True, "queued": True, "event_id": msg_id}


def test_any_matching_v1_signature_among_several_is_enough(client, routine, at_t0):
    headers = std_headers()
    other = plain_signature("another secret", "msg_1", T0, BODY)
    headers["webhook-signature"] = f"v2,abc {other} v1,not-base64!! {headers['webhook-signature']}"
    r = hook(client, routine, headers=headers)
    assert r.status_code == 200 and r.json()["event_id"] == "msg_1"


def test_a_signature_made_with_v1a_or_another_version_is_not_taken(client, routine, at_t0):
    headers = std_headers()
    headers["webhook-signature"] = headers["webhook-signature"].replace("v1,", "v2,")
    assert hook(client, routine, headers=headers).status_code == 401


# --- refused -------------------------------------------------------------------------------------


def assert_refused(response, body=BAD_STANDARD_SIGNATURE):
    assert response.status_code == 401, response.content
    assert response.json() == body
    assert set(response.json()) == set(BAD_SIGNATURE)  # the spec's refusal, in its shape
    assert not Event.objects.exists()


@pytest.mark.parametrize("offset", [-301, -3600, -T0 + 1])
def test_a_stale_timestamp_is_refused(client, routine, at_t0, offset):
    assert_refused(hook(client, routine, headers=std_headers(timestamp=T0 + offset)), BAD_STANDARD_TIMESTAMP)


@pytest.mark.parametrize("offset", [301, 3600])
def test_a_timestamp_from_the_future_is_refused(client, routine, at_t0, offset):
    assert_refused(hook(client, routine, headers=std_headers(timestamp=T0 + offset)), BAD_STANDARD_TIMESTAMP)


def test_the_same_delivery_sent_later_is_refused_once_its_timestamp_is_stale(client, routine, at_t0):
    headers = std_headers()
    assert hook(client, routine, headers=headers).status_code == 200
    at_t0.shift(301)
    clear_counters()
    r = hook(client, routine, headers=headers)
    assert r.status_code == 401 and r.json() == BAD_STANDARD_TIMESTAMP
    assert Event.objects.count() == 1


def test_a_replayed_id_is_a_duplicate_while_its_timestamp_is_accepted(client, routine, at_t0):
    headers = std_headers()
    assert hook(client, routine, headers=headers).json()["queued"] is True
    # at once (the short mark), and later from the stored events
    assert hook(client, routine, headers=headers).json() == {"ok": True, "ignored": "duplicate", "event_id": "msg_1"}
    at_t0.shift(299)
    clear_counters()
    # sent again with another X-Event-Id: the id signed is still webhook-id
    r = hook(client, routine, headers={**headers, "X-Event-Id": "fresh-id"})
    assert r.json() == {"ok": True, "ignored": "duplicate", "event_id": "msg_1"}
    assert Event.objects.count() == 1 and Run.objects.count() == 1


def test_a_replay_is_refused_for_as_long_as_its_timestamp_could_be_accepted(client, routine, at_t0, settings):
    """A delivery stamped five minutes ahead, received now, stays acceptable for ten minutes: the
    ids of a standard routine are seen for at least that long, whatever the duplicate window."""
    settings.WEBHOOK_DUPLICATE_WINDOW_SECONDS = 60
    headers = std_headers(timestamp=T0 + 300)
    assert hook(client, routine, headers=headers).json()["queued"] is True
    at_t0.shift(600)
    clear_counters()
    assert hook(client, routine, headers=headers).json()["ignored"] == "duplicate"
    at_t0.shift(1)
    clear_counters()
    assert hook(client, routine, headers=headers).json() == BAD_STANDARD_TIMESTAMP


def test_a_new_id_with_a_fresh_signature_is_a_new_event(client, routine, at_t0):
    assert hook(client, routine, headers=std_headers(msg_id="msg_a")).json()["queued"] is True
    assert hook(client, routine, headers=std_headers(msg_id="msg_b")).json()["queued"] is True
    assert Event.objects.count() == 2


def test_a_tampered_body_is_refused(client, routine, at_t0):
    headers = std_headers()
    assert_refused(hook(client, routine, body=BODY.replace(b"opened", b"closed"), headers=headers))


def test_a_changed_id_or_timestamp_is_refused(client, routine, at_t0):
    assert_refused(hook(client, routine, headers={**std_headers(), "webhook-id": "msg_2"}))
    assert_refused(hook(client, routine, headers={**std_headers(), "webhook-timestamp": str(T0 + 1)}))


def test_a_wrong_secret_is_refused(client, routine, at_t0):
    assert_refused(hook(client, routine, headers=std_headers(secret="not the secret")))


@pytest.mark.parametrize("missing", ["webhook-id", "webhook-timestamp", "webhook-signature"])
def test_a_missing_header_is_refused(client, routine, at_t0, missing):
    headers = std_headers()
    del headers[missing]
    assert_refused(hook(client, routine, headers=headers))


@pytest.mark.parametrize("stamp", ["", "abc", "1800000000.5", "-1800000000", "1" * 16, "1e9"])
def test_a_malformed_timestamp_is_refused(client, routine, at_t0, stamp):
    headers = std_headers()
    headers["webhook-timestamp"] = stamp
    assert_refused(hook(client, routine, headers=headers))


def test_the_body_scheme_signature_is_not_enough_for_a_standard_routine(client, routine, at_t0):
    signature = hmac.new(HEX_SECRET.encode(), BODY, hashlib.sha256).hexdigest()
    assert_refused(hook(client, routine, headers={"X-Svc-Signature": signature, "X-Event-Id": "e1"}))
    assert_refused(hook(client, routine, headers={"X-Hub-Signature-256": "sha256=" + signature}))


def test_no_answer_but_the_signature_one_before_the_signature_is_checked(client, routine, at_t0):
    """A stale timestamp under a wrong signature is a wrong signature: the clock is told only to
    whoever knows the secret."""
    assert_refused(hook(client, routine, headers=std_headers(secret="wrong", timestamp=T0 - 3600)))


def test_the_checks_before_the_signature_keep_their_order(client, routine, at_t0, settings):
    settings.WEBHOOK_MAX_BODY_BYTES = 10
    r = hook(client, routine, headers=std_headers())
    assert r.status_code == 413
    routine.is_enabled = False
    routine.save()
    assert hook(client, routine).json() == {"ok": True, "ignored": "disabled_routine"}


def test_a_standard_routine_without_a_secret_is_unsigned_and_keys_by_webhook_id(client, owner, at_t0):
    routine = make(owner, secret=None)
    r = hook(client, routine, headers={"webhook-id": "msg_open"})
    assert r.json() == {"ok": True, "queued": True, "event_id": "msg_open"}
    r = hook(client, routine, body=b'{"id": "x"}')  # no webhook-id: spec 6.1 as ever
    assert r.json() == {"ok": True, "queued": True, "event_id": "x"}


def test_a_body_scheme_routine_ignores_standard_headers(client, owner, at_t0):
    routine = make(owner, scheme="body")
    assert hook(client, routine, headers=std_headers()).json() == BAD_SIGNATURE
    signature = hmac.new(HEX_SECRET.encode(), BODY, hashlib.sha256).hexdigest()
    r = hook(client, routine, headers={**std_headers(), "X-Svc-Signature": signature})
    assert r.json() == {"ok": True, "queued": True, "event_id": "body-id"}  # webhook-id is not its id


def test_inbound_email_to_a_standard_routine_is_not_asked_for_a_signature(owner, at_t0):
    from routines.ingest import ingest

    routine = make(owner)
    status, answer = ingest(routine.webhook_token, b"hello", {}, source="email", event_id="<m@x>",
                            verify_signature=False)
    assert (status, answer) == (200, {"ok": True, "queued": True, "event_id": "<m@x>"})


# --- the key a secret stands for -----------------------------------------------------------------


def test_the_keys_of_a_secret():
    assert standard_keys(WHSEC) == [b"a Standard Webhooks secret, 32 b"]
    assert standard_keys(HEX_SECRET) == [HEX_SECRET.encode(), base64.b64decode(HEX_SECRET)]
    assert standard_keys("my own secret") == [b"my own secret"]
    assert standard_keys("whsec_!!") == [b"whsec_!!"]  # not base64 after the prefix: a plain secret


def test_standard_sign_agrees_with_the_reference_library():
    stamp = datetime.fromtimestamp(T0, tz=timezone.utc)
    for secret in (WHSEC, HEX_SECRET):
        ours = {standard_sign(key, "msg_x", T0, BODY) for key in standard_keys(secret)}
        assert Webhook(secret).sign("msg_x", stamp, BODY.decode()) in ours
    headers = {"webhook-id": "msg_x", "webhook-timestamp": str(T0),
               "webhook-signature": standard_sign(standard_keys(WHSEC)[0], "msg_x", T0, BODY)}
    with time_machine.travel(T0, tick=False):
        Webhook(WHSEC).verify(BODY, headers)
    assert standard_check(WHSEC, BODY, headers, now=T0) == "ok"


# --- the management API --------------------------------------------------------------------------


@pytest.fixture
def api(client, owner):
    key = api_key_for(owner)

    class Api:
        def post(self, path, data=None):
            return client.post(path, data or {}, content_type="application/json", headers=bearer(key))

        def put(self, path, data):
            return client.put(path, data, content_type="application/json", headers=bearer(key))

        def get(self, path):
            return client.get(path, headers=bearer(key))

    return Api()


def minimal(**extra):
    return {"name": "Digest", "prompt": "Summarize the event.", "trigger": "webhook", "delivery_targets": ["inapp"],
            **extra}


def test_the_scheme_is_body_by_default_and_shown(api):
    r = api.post(ROUTINES, minimal())
    assert r.status_code == 201
    assert r.json()["routine"]["webhook_signature_scheme"] == "body"
    assert Routine.objects.get().webhook_signature_scheme == "body"
    assert api.get(ROUTINES).json()["routines"][0]["webhook_signature_scheme"] == "body"


def test_the_scheme_round_trips_through_create_get_put_and_rotations(api):
    r = api.post(ROUTINES, minimal(webhook_signature_scheme="standard"))
    assert r.status_code == 201, r.content
    created = r.json()
    routine_id = created["routine"]["id"]
    assert created["routine"]["webhook_signature_scheme"] == "standard"
    assert api.get(f"{ROUTINES}/{routine_id}").json()["routine"]["webhook_signature_scheme"] == "standard"
    r = api.put(f"{ROUTINES}/{routine_id}", {"name": "Renamed"})  # a change without it keeps it
    assert r.json()["routine"]["webhook_signature_scheme"] == "standard"
    r = api.post(f"{ROUTINES}/{routine_id}/rotate-secret")
    assert r.json()["routine"]["webhook_signature_scheme"] == "standard"
    r = api.put(f"{ROUTINES}/{routine_id}", {"webhook_signature_scheme": "body"})
    assert r.status_code == 200 and r.json()["routine"]["webhook_signature_scheme"] == "body"
    assert Routine.objects.get(pk=routine_id).webhook_signature_scheme == "body"


def test_a_generated_secret_signs_standard_deliveries_end_to_end(api, client):
    created = api.post(ROUTINES, minimal(trigger="webhook", webhook_signature_scheme="standard")).json()
    secret, url = created["webhook_secret"], created["webhook_url"]
    with time_machine.travel(T0, tick=False):
        signature = Webhook(secret).sign("msg_e2e", datetime.fromtimestamp(T0, tz=timezone.utc), BODY.decode())
        r = client.post(url.removeprefix("http://testserver"), BODY, content_type="application/json",
                        headers={"webhook-id": "msg_e2e", "webhook-timestamp": str(T0),
                                 "webhook-signature": signature})
    assert r.json() == {"ok": True, "queued": True, "event_id": "msg_e2e"}


@pytest.mark.parametrize("value", ["hmac", "Standard", "", None, 1, True, ["standard"], {"v": "standard"}])
def test_an_unknown_scheme_is_422(api, value):
    r = api.post(ROUTINES, minimal(webhook_signature_scheme=value))
    assert r.status_code == 422, r.content
    body = r.json()
    assert set(body) == {"message", "errors"} and "webhook_signature_scheme" in body["errors"]
    assert not Routine.objects.exists()
    routine_id = api.post(ROUTINES, minimal()).json()["routine"]["id"]
    r = api.put(f"{ROUTINES}/{routine_id}", {"webhook_signature_scheme": value})
    assert r.status_code == 422 and "webhook_signature_scheme" in r.json()["errors"]
    assert Routine.objects.get().webhook_signature_scheme == "body"
