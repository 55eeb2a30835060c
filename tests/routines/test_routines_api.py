"""Routine management (spec 4.5, 4.8, 3.3): create, list, change, delete, run-now, rotations,
runs, blueprints, the inbox; validation and the per-account limit; isolation between accounts."""

import re
from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from routines.models import InboxMessage, Routine, Run
from routines.routine_writes import SCHEDULE_REQUIRED
from tests.contract import assert_detail, assert_native_unauthenticated
from tests.factories import DeliveryFactory, LinkedChannelFactory, RunFactory, api_key_for, bearer, session_for

ROUTINES = "/api/v1/routines"
HEX48 = re.compile(r"^[0-9a-f]{48}$")
HEX64 = re.compile(r"^[0-9a-f]{64}$")


def minimal(**extra):
    """The smallest valid request: the default trigger (`schedule`) needs its schedule."""
    return {"name": "Digest", "prompt": "Summarize the event.", "delivery_targets": ["inapp"],
            "schedule": "0 8 * * *", **extra}


@pytest.fixture
def api(client, owner):
    key = api_key_for(owner)

    class Api:
        def post(self, path, data=None, **kw):
            return client.post(path, data or {}, content_type="application/json", headers=bearer(key), **kw)

        def put(self, path, data, **kw):
            return client.put(path, data, content_type="application/json", headers=bearer(key), **kw)

        def get(self, path, **kw):
            return client.get(path, headers=bearer(key), **kw)

        def delete(self, path, **kw):
            return client.delete(path, headers=bearer(key), **kw)

    return Api()


def create(api, **extra):
    r = api.post(ROUTINES, minimal(**extra))
    assert r.status_code == 201, r.content
    return r.json()


def assert_validation(response, field):
    assert response.status_code == 422, response.content
    body = response.json()
    assert set(body) == {"message", "errors"}
    assert isinstance(body["message"], str) and body["message"]
    assert field in body["errors"], body
    assert all(isinstance(m, str) for m in body["errors"][field])
    return body


# --- 4.5: create ---------------------------------------------------------------------------


def test_it_creates_a_routine_with_a_generated_secret_returned_once(api, owner):
    body = create(api)
    assert set(body) == {"routine", "webhook_url", "webhook_secret", "webhook_assinado", "webhook_aviso"}
    routine = body["routine"]
    assert {"id", "name", "trigger", "is_enabled", "webhook_token"} <= set(routine)
    assert routine["name"] == "Digest"
    assert routine["trigger"] == "schedule"
    assert routine["is_enabled"] is True
    assert routine["uses_ai"] is True
    assert HEX48.match(routine["webhook_token"])
    assert body["webhook_url"] == f"http://testserver/api/v1/hooks/{routine['webhook_token']}"
    assert HEX64.match(body["webhook_secret"])
    assert body["webhook_assinado"] is True
    assert body["webhook_aviso"] is None
    stored = Routine.objects.get(pk=routine["id"])
    assert stored.account == owner
    assert stored.webhook_secret == body["webhook_secret"]
    # never again: not in the list, not in a change
    assert body["webhook_secret"] not in api.get(ROUTINES).content.decode()
    assert body["webhook_secret"] not in api.put(f"{ROUTINES}/{routine['id']}", {"name": "x"}).content.decode()


def test_a_secret_chosen_by_the_caller_is_kept_and_not_returned(api):
    body = create(api, webhook_secret="my own secret")
    assert body["webhook_secret"] is None
    assert body["webhook_assinado"] is True
    assert body["webhook_aviso"] is None
    assert "my own secret" not in str(body)
    assert Routine.objects.get(pk=body["routine"]["id"]).webhook_secret == "my own secret"


def test_a_null_secret_makes_an_unsigned_webhook_with_a_warning(api):
    body = create(api, webhook_secret=None)
    assert body["webhook_secret"] is None
    assert body["webhook_assinado"] is False
    assert isinstance(body["webhook_aviso"], str) and body["webhook_aviso"]
    assert Routine.objects.get(pk=body["routine"]["id"]).webhook_secret is None


def test_the_webhook_url_uses_the_public_base_url_when_set(api, settings):
    settings.PUBLIC_BASE_URL = "https://gw.example.com/"
    body = create(api)
    assert body["webhook_url"] == f"https://gw.example.com/api/v1/hooks/{body['routine']['webhook_token']}"


def test_tokens_are_distinct(api):
    tokens = {create(api, name=f"r{i}")["routine"]["webhook_token"] for i in range(3)}
    assert len(tokens) == 3


def test_it_takes_every_field(api):
    body = create(api, trigger="webhook", uses_ai=False, is_enabled=False, timezone="Europe/Lisbon",
                   delivery_targets=["inapp", "email:ops@example.com", "webhook:https://hooks.example.com/x"])
    routine = body["routine"]
    assert routine["trigger"] == "webhook"
    assert routine["uses_ai"] is False
    assert routine["is_enabled"] is False
    assert routine["disabled_reason"] == "user"
    assert routine["timezone"] == "Europe/Lisbon"
    assert routine["delivery_targets"] == ["inapp", "email:ops@example.com", "webhook:https://hooks.example.com/x"]


def test_an_email_routine_shows_its_address_with_the_token(api, settings):
    settings.INBOUND_EMAIL_DOMAIN = "in.example.com"
    routine = create(api, trigger="email")["routine"]
    assert routine["email_address"] == f"{routine['webhook_token']}@in.example.com"
    assert create(api, trigger="webhook")["routine"]["email_address"] is None


def test_a_schedule_routine_gets_its_next_run(api):
    routine = create(api, trigger="schedule", schedule="30 8 * * 1-5")["routine"]
    assert routine["schedule"] == "30 8 * * 1-5"
    assert routine["next_run_at"] is not None


@pytest.mark.parametrize("field", ["name", "prompt", "delivery_targets"])
def test_the_three_required_fields(api, field):
    data = minimal()
    del data[field]
    assert_validation(api.post(ROUTINES, data), field)


def test_a_routine_with_neither_trigger_nor_schedule_is_refused_not_left_never_running(api):
    """`schedule` is the default trigger, and a schedule routine without a schedule would never run."""
    r = api.post(ROUTINES, {"name": "Digest", "prompt": "Summarize the event.", "delivery_targets": ["inapp"]})
    assert r.status_code == 422, r.content
    assert r.json() == {"message": SCHEDULE_REQUIRED, "errors": {"schedule": [SCHEDULE_REQUIRED]}}
    assert not Routine.objects.exists()
    for trigger in ("webhook", "email"):  # the other triggers need none
        assert api.post(ROUTINES, minimal(trigger=trigger, schedule="")).status_code == 201


@pytest.mark.parametrize(
    "field, ok, too_long",
    [("name", "n" * 120, "n" * 121), ("prompt", "p" * 8000, "p" * 8001), ("webhook_secret", "s" * 128, "s" * 129)],
)
def test_length_limits_at_their_boundary(api, field, ok, too_long):
    assert api.post(ROUTINES, minimal(**{field: ok})).status_code == 201
    assert_validation(api.post(ROUTINES, minimal(**{field: too_long})), field)


def test_a_blank_name_or_prompt_is_refused(api):
    assert_validation(api.post(ROUTINES, minimal(name="   ")), "name")
    assert_validation(api.post(ROUTINES, minimal(prompt=" \n ")), "prompt")


def test_one_to_five_targets(api):
    assert_validation(api.post(ROUTINES, minimal(delivery_targets=[])), "delivery_targets")
    five = ["inapp"] + [f"email:u{i}@example.com" for i in range(4)]
    assert api.post(ROUTINES, minimal(delivery_targets=five)).status_code == 201
    assert_validation(api.post(ROUTINES, minimal(delivery_targets=five + ["email:x@example.com"])),
                      "delivery_targets")


@pytest.mark.parametrize("target", [
    "sms:+5511999990000", "email:not-an-address", "webhook:http://insecure.example.com/x", "webhook:ftp://x",
    "webhook:https://", "whatsapp:12", "INAPP", "", 5, None, {"kind": "inapp"},
])
def test_targets_not_in_the_forms_of_2_4_are_refused(api, target):
    assert_validation(api.post(ROUTINES, minimal(delivery_targets=["inapp", target])), "delivery_targets")


def test_targets_must_be_a_list(api):
    assert_validation(api.post(ROUTINES, minimal(delivery_targets="inapp")), "delivery_targets")


def test_telegram_and_whatsapp_need_a_linked_channel(api, owner):
    body = assert_validation(api.post(ROUTINES, minimal(delivery_targets=["telegram"])), "delivery_targets")
    assert "Telegram" in body["errors"]["delivery_targets"][0]
    assert_validation(api.post(ROUTINES, minimal(delivery_targets=["whatsapp:+5511999990000"])), "delivery_targets")
    now = timezone.now()
    LinkedChannelFactory(account=owner, kind="telegram", address="12345", verified_at=now)
    LinkedChannelFactory(account=owner, kind="whatsapp", address="+5511999990000", verified_at=now)
    assert api.post(ROUTINES, minimal(delivery_targets=["telegram", "whatsapp:+5511999990000"])).status_code == 201
    # another number than the verified one is still refused
    assert_validation(api.post(ROUTINES, minimal(delivery_targets=["whatsapp:+5511888880000"])), "delivery_targets")


def test_an_unverified_channel_is_not_linked(api, owner):
    LinkedChannelFactory(account=owner, kind="telegram", address="12345")
    assert_validation(api.post(ROUTINES, minimal(delivery_targets=["telegram"])), "delivery_targets")


def test_schedule_and_timezone_are_checked(api):
    assert_validation(api.post(ROUTINES, minimal(trigger="schedule", schedule="")), "schedule")
    assert_validation(api.post(ROUTINES, minimal(trigger="schedule", schedule="every day")), "schedule")
    assert_validation(api.post(ROUTINES, minimal(trigger="schedule", schedule="0 8 * * *", timezone="Mars/Base")),
                      "timezone")
    assert_validation(api.post(ROUTINES, minimal(trigger="sometimes")), "trigger")


@pytest.mark.parametrize("field, value", [
    ("uses_ai", "yes"), ("uses_ai", 1), ("is_enabled", 1), ("is_enabled", "false"), ("name", 5), ("prompt", 5),
    ("webhook_secret", 5), ("schedule", 5), ("timezone", 0), ("model", 1), ("name", ["n"]), ("is_enabled", None),
])
def test_values_of_the_wrong_type_are_refused_not_converted(api, field, value):
    assert_validation(api.post(ROUTINES, minimal(**{field: value})), field)
    rid = create(api, trigger="webhook")["routine"]["id"]
    assert_validation(api.put(f"{ROUTINES}/{rid}", {field: value}), field)


@pytest.mark.parametrize("schedule", [5, 1.5, True, ["0 8 * * *"], {"cron": "0 8 * * *"}])
def test_a_schedule_that_is_not_text_next_to_another_error_is_422(api, schedule):
    body = assert_validation(api.post(ROUTINES, minimal(name="", schedule=schedule)), "schedule")
    assert "name" in body["errors"]
    rid = create(api)["routine"]["id"]
    body = assert_validation(api.put(f"{ROUTINES}/{rid}", {"name": "", "schedule": schedule}), "schedule")
    assert "name" in body["errors"]


def test_several_errors_come_together(api):
    body = api.post(ROUTINES, {"name": "", "prompt": "p" * 8001, "delivery_targets": []}).json()
    assert set(body["errors"]) == {"name", "prompt", "delivery_targets", "schedule"}
    assert "more error" in body["message"]


def test_a_body_that_is_not_a_json_object_is_refused(client, owner):
    r = client.post(ROUTINES, "[1]", content_type="application/json", headers=bearer(api_key_for(owner)))
    assert_detail(r, 400)


def test_an_integer_too_long_to_read_is_the_same_400_as_malformed_json(api):
    malformed = api.post(ROUTINES, '{"name": ')
    assert_detail(malformed, 400)
    rid = create(api)["routine"]["id"]
    huge = '{"name": 1' + "2" * 5000 + "}"
    for r in (api.post(ROUTINES, huge), api.put(f"{ROUTINES}/{rid}", huge)):
        assert (r.status_code, r.json()) == (400, malformed.json())


def test_the_per_account_routine_limit(api, settings, client, outsider):
    settings.ROUTINES_PER_ACCOUNT = 3
    for i in range(3):
        create(api, name=f"r{i}")
    detail = assert_detail(api.post(ROUTINES, minimal()), 403)
    assert "3" in detail
    assert Routine.objects.count() == 3
    # another account has its own allowance
    r = client.post(ROUTINES, minimal(), content_type="application/json", headers=bearer(api_key_for(outsider)))
    assert r.status_code == 201


def test_ten_routines_by_default(api):
    for i in range(10):
        create(api, name=f"r{i}")
    assert_detail(api.post(ROUTINES, minimal()), 403)


def test_credentials_are_required(client, owner):
    assert_native_unauthenticated(client.get(ROUTINES))
    assert_native_unauthenticated(client.post(ROUTINES, minimal(), content_type="application/json"))
    assert_native_unauthenticated(client.get("/api/v1/inbox"))


def test_a_session_token_works_too(client, owner):
    r = client.post(ROUTINES, minimal(), content_type="application/json", headers=bearer(session_for(owner)))
    assert r.status_code == 201


# --- 4.8: list, change, delete, run-now, rotations, runs ------------------------------------


def test_the_list_never_shows_a_secret_or_a_token(api):
    created = create(api, trigger="email")
    secret, token = created["webhook_secret"], created["routine"]["webhook_token"]
    r = api.get(ROUTINES)
    assert r.status_code == 200
    (item,) = r.json()["routines"]
    assert item["id"] == created["routine"]["id"]
    assert "webhook_token" not in item and "webhook_secret" not in item and "email_address" not in item
    assert secret not in r.content.decode() and token not in r.content.decode()
    assert r["X-RateLimit-Limit"] == "300"


def test_one_routine_is_shown_without_its_token(api):
    created = create(api)
    r = api.get(f"{ROUTINES}/{created['routine']['id']}")
    assert r.status_code == 200
    routine = r.json()["routine"]
    assert routine["id"] == created["routine"]["id"] and routine["webhook_assinado"] is True
    assert created["routine"]["webhook_token"] not in r.content.decode()
    assert created["webhook_secret"] not in r.content.decode()


def test_every_put_answer_has_the_token(api):
    created = create(api)
    rid, token = created["routine"]["id"], created["routine"]["webhook_token"]
    for change in ({"name": "Renamed"}, {"prompt": "New"}, {"is_enabled": False}, {}):
        r = api.put(f"{ROUTINES}/{rid}", change)
        assert r.status_code == 200, r.content
        assert r.json()["routine"]["webhook_token"] == token
    assert Routine.objects.get(pk=rid).name == "Renamed"


def test_put_validates_like_create(api):
    rid = create(api, trigger="webhook", schedule="")["routine"]["id"]
    assert_validation(api.put(f"{ROUTINES}/{rid}", {"name": "n" * 121}), "name")
    assert_validation(api.put(f"{ROUTINES}/{rid}", {"delivery_targets": []}), "delivery_targets")
    assert_validation(api.put(f"{ROUTINES}/{rid}", {"trigger": "schedule"}), "schedule")
    assert Routine.objects.get(pk=rid).name == "Digest"


def test_put_with_a_null_secret_removes_signing(api):
    rid = create(api)["routine"]["id"]
    body = api.put(f"{ROUTINES}/{rid}", {"webhook_secret": None}).json()
    assert body["webhook_assinado"] is False
    assert body["webhook_aviso"]
    assert Routine.objects.get(pk=rid).webhook_secret is None
    body = api.put(f"{ROUTINES}/{rid}", {"webhook_secret": "again signed"}).json()
    assert body["webhook_assinado"] is True and "again signed" not in str(body)


def test_pausing_and_enabling_again(api):
    rid = create(api)["routine"]["id"]
    body = api.put(f"{ROUTINES}/{rid}", {"is_enabled": False}).json()["routine"]
    assert body["is_enabled"] is False and body["disabled_reason"] == "user"
    Routine.objects.filter(pk=rid).update(consecutive_failures=3, disabled_reason="failures")
    body = api.put(f"{ROUTINES}/{rid}", {"is_enabled": True}).json()["routine"]
    assert body["is_enabled"] is True
    assert body["consecutive_failures"] == 0
    assert body["disabled_reason"] is None


def test_put_keeps_what_a_worker_or_the_tick_wrote_since_the_routine_was_read(api, monkeypatch):
    from routines import routine_writes
    from routines.schedules import enqueue_due

    rid = create(api, schedule="0 * * * *")["routine"]["id"]
    Routine.objects.filter(pk=rid).update(next_run_at=timezone.now() - timedelta(minutes=1),
                                          consecutive_failures=2)
    real = routine_writes.target_errors

    def meanwhile(account, targets):  # runs between the PUT's read of the routine and its save
        assert enqueue_due() == 1
        Routine.objects.filter(pk=rid).update(consecutive_failures=3, is_enabled=False, disabled_reason="failures")
        return real(account, targets)

    monkeypatch.setattr(routine_writes, "target_errors", meanwhile)
    r = api.put(f"{ROUTINES}/{rid}", {"name": "Renamed", "delivery_targets": ["inapp"]})
    assert r.status_code == 200, r.content
    routine = Routine.objects.get(pk=rid)
    assert routine.name == "Renamed"
    assert (routine.consecutive_failures, routine.is_enabled, routine.disabled_reason) == (3, False, "failures")
    assert routine.next_run_at > timezone.now()  # as the tick moved it: not queued again
    assert r.json()["routine"]["consecutive_failures"] == 3 and r.json()["routine"]["is_enabled"] is False


def test_delete(api):
    rid = create(api)["routine"]["id"]
    r = api.delete(f"{ROUTINES}/{rid}")
    assert r.status_code == 204
    assert not Routine.objects.filter(pk=rid).exists()
    assert_detail(api.delete(f"{ROUTINES}/{rid}"), 404)


def test_run_now_queues_a_manual_run(api, django_capture_on_commit_callbacks):
    rid = create(api)["routine"]["id"]
    with django_capture_on_commit_callbacks() as callbacks:
        r = api.post(f"{ROUTINES}/{rid}/run-now")
    assert r.status_code == 202
    run = r.json()["run"]
    assert run["status"] == "queued" and run["trigger"] == "manual" and run["event_id"] is None
    assert Run.objects.get(pk=run["id"]).routine_id == rid
    assert len(callbacks) == 1  # the task is enqueued when the transaction commits


def test_run_now_on_a_paused_routine_is_422(api):
    rid = create(api, is_enabled=False)["routine"]["id"]
    r = api.post(f"{ROUTINES}/{rid}/run-now")
    assert r.status_code == 422
    assert set(r.json()) == {"message", "errors"}
    assert not Run.objects.exists()


@pytest.mark.django_db(transaction=True)  # the hook view reads the routine on a worker thread
def test_rotate_token_issues_a_new_url(api, client):
    created = create(api, webhook_secret=None)
    rid, old = created["routine"]["id"], created["routine"]["webhook_token"]
    r = api.post(f"{ROUTINES}/{rid}/rotate-token")
    assert r.status_code == 200
    body = r.json()
    new = body["routine"]["webhook_token"]
    assert HEX48.match(new) and new != old
    assert body["webhook_url"].endswith(f"/api/v1/hooks/{new}")
    assert client.post(f"/api/v1/hooks/{old}", b"{}", content_type="application/json").status_code == 404
    assert client.post(f"/api/v1/hooks/{new}", b"{}", content_type="application/json").status_code == 200


def test_rotate_secret_returns_the_new_one_once(api):
    created = create(api)
    rid, old = created["routine"]["id"], created["webhook_secret"]
    r = api.post(f"{ROUTINES}/{rid}/rotate-secret")
    assert r.status_code == 200
    new = r.json()["webhook_secret"]
    assert HEX64.match(new) and new != old
    assert r.json()["webhook_assinado"] is True
    assert Routine.objects.get(pk=rid).webhook_secret == new
    assert new not in api.get(ROUTINES).content.decode()


def test_rotate_secret_signs_an_unsigned_webhook(api):
    rid = create(api, webhook_secret=None)["routine"]["id"]
    body = api.post(f"{ROUTINES}/{rid}/rotate-secret").json()
    assert body["webhook_assinado"] is True and body["webhook_aviso"] is None


def test_runs_lists_the_last_50_with_their_deliveries(api):
    rid = create(api)["routine"]["id"]
    routine = Routine.objects.get(pk=rid)
    runs = [RunFactory(routine=routine, trigger="manual", status="succeeded", output=f"out {i}")
            for i in range(52)]
    DeliveryFactory(run=runs[-1], target="inapp", status="succeeded", attempts=1)
    r = api.get(f"{ROUTINES}/{rid}/runs")
    assert r.status_code == 200
    listed = r.json()["runs"]
    assert len(listed) == 50
    assert listed[0]["id"] == runs[-1].pk and listed[-1]["id"] == runs[2].pk
    assert listed[0]["deliveries"] == [{"target": "inapp", "status": "succeeded", "attempts": 1, "error": None}]
    assert set(listed[0]) == {"id", "event_id", "trigger", "status", "output", "error", "model", "usage",
                              "created_at", "started_at", "finished_at", "deliveries"}


def test_another_accounts_routine_is_404(api, client, outsider):
    mine = create(api)["routine"]["id"]
    key = api_key_for(outsider)
    h = bearer(key)
    assert_detail(client.put(f"{ROUTINES}/{mine}", {"name": "x"}, content_type="application/json", headers=h), 404)
    assert_detail(client.delete(f"{ROUTINES}/{mine}", headers=h), 404)
    assert_detail(client.get(f"{ROUTINES}/{mine}", headers=h), 404)
    for action in ("run-now", "rotate-token", "rotate-secret"):
        assert_detail(client.post(f"{ROUTINES}/{mine}/{action}", headers=h), 404)
    assert_detail(client.get(f"{ROUTINES}/{mine}/runs", headers=h), 404)
    assert client.get(ROUTINES, headers=h).json() == {"routines": []}
    assert Routine.objects.get(pk=mine).name == "Digest"
    assert_detail(api.put(f"{ROUTINES}/999999", {"name": "x"}), 404)


def test_blueprints_are_valid_create_requests(api):
    r = api.get(f"{ROUTINES}/blueprints")
    assert r.status_code == 200
    blueprints = r.json()["blueprints"]
    assert len(blueprints) >= 3
    for blueprint in blueprints:
        assert {"id", "name", "description", "routine", "suggested_targets"} <= set(blueprint)
        assert api.post(ROUTINES, blueprint["routine"]).status_code == 201, blueprint["id"]


def test_the_inbox_shows_the_callers_messages_newest_first(api, owner, outsider):
    from routines.inbox import notify

    first = notify(owner, "first", "one")
    second = notify(owner, "second", "two")
    notify(outsider, "not yours", "x")
    r = api.get("/api/v1/inbox")
    assert r.status_code == 200
    messages = r.json()["messages"]
    assert [m["id"] for m in messages] == [second.pk, first.pk]
    assert messages[0]["title"] == "second" and messages[0]["body"] == "two"
    assert InboxMessage.objects.count() == 3


def test_a_message_is_marked_read_once_and_only_by_its_owner(api, owner, outsider):
    from routines.inbox import notify

    mine, theirs = notify(owner, "mine", "one"), notify(outsider, "theirs", "x")
    with time_machine.travel("2026-11-22T10:00:00Z", tick=False):
        r = api.post(f"/api/v1/inbox/{mine.pk}/read")
    assert r.status_code == 200
    assert r.json()["message"]["read_at"] == "2026-11-22T10:00:00.000000Z"
    with time_machine.travel("2026-11-22T11:00:00Z", tick=False):
        again = api.post(f"/api/v1/inbox/{mine.pk}/read")
    assert again.json()["message"]["read_at"] == "2026-11-22T10:00:00.000000Z"
    assert api.get("/api/v1/inbox").json()["messages"][0]["read_at"] == "2026-11-22T10:00:00.000000Z"
    for missing in (theirs.pk, 999999):
        r = api.post(f"/api/v1/inbox/{missing}/read")
        assert r.status_code == 404 and r.json() == {"detail": "Message not found."}
    theirs.refresh_from_db()
    assert theirs.read_at is None
