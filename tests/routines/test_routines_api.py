"""Routine management (spec 4.5, 3.3): create, and its validation; the per-account limit and the
credentials it needs. Listing, changing, deleting, running, rotating and the inbox are in
test_routines_changes.py."""

from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from gateway.celery import app as celery_app
from routines.models import InboxMessage, Routine, Run
from routines.records import NO_SCHEDULE
from routines.runs import execute_run
from routines.schedules import enqueue_due
from tests.contract import assert_detail, assert_native_unauthenticated
from tests.factories import LinkedChannelFactory, api_key_for, bearer, session_for
from tests.routines import routines_api_support
from tests.routines.routines_api_support import HEX48, HEX64, ROUTINES, assert_validation, create, minimal

api_fixture = routines_api_support.api_fixture  # the fixture `api`


@pytest.fixture
def eager_tasks():
    """Tasks run inline where they are enqueued (a run's deliveries), so a run has ended when
    execute_run returns."""
    before = celery_app.conf.CELERY_TASK_ALWAYS_EAGER  # the app reads its settings under CELERY_
    celery_app.conf.CELERY_TASK_ALWAYS_EAGER = True
    assert celery_app.conf.task_always_eager
    yield
    celery_app.conf.CELERY_TASK_ALWAYS_EAGER = before


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


# --- a `schedule` routine without a schedule (spec 4.5: three required fields) -------------
# (docs/decisions/0061-schedule-routine-without-schedule.md)


THREE_FIELDS = {"name": "Digest", "prompt": "Summarize the event.", "delivery_targets": ["inapp"]}
NOT_SCHEDULED = {"trigger": "schedule", "schedule": None, "next_run_at": None, "schedule_note": NO_SCHEDULE}


def schedule_fields(routine: dict) -> dict:
    return {name: routine[name] for name in NOT_SCHEDULED}


def test_the_three_required_fields_alone_make_a_schedule_routine_that_says_it_has_no_schedule(api):
    r = api.post(ROUTINES, THREE_FIELDS)
    assert r.status_code == 201, r.content
    routine = r.json()["routine"]
    assert schedule_fields(routine) == NOT_SCHEDULED
    assert (routine["timezone"], routine["is_enabled"], routine["last_run_at"]) == ("UTC", True, None)
    stored = Routine.objects.get(pk=routine["id"])
    assert (stored.trigger, stored.schedule, stored.next_run_at) == ("schedule", "", None)
    (listed,) = api.get(ROUTINES).json()["routines"]
    assert schedule_fields(listed) == NOT_SCHEDULED
    assert schedule_fields(api.get(f"{ROUTINES}/{routine['id']}").json()["routine"]) == NOT_SCHEDULED


@pytest.mark.parametrize("schedule", ["", "   ", None])
def test_an_empty_or_null_schedule_is_no_schedule_too(api, schedule):
    routine = create(api, trigger="schedule", schedule=schedule)["routine"]
    assert schedule_fields(routine) == NOT_SCHEDULED


def test_a_routine_with_a_schedule_or_another_trigger_has_no_note(api):
    assert create(api, schedule="0 8 * * *")["routine"]["schedule_note"] is None
    for trigger in ("webhook", "email"):
        routine = api.post(ROUTINES, {**THREE_FIELDS, "trigger": trigger}).json()["routine"]
        assert (routine["trigger"], routine["schedule"], routine["schedule_note"]) == (trigger, None, None)


def test_a_routine_without_a_schedule_runs_by_run_now(api, owner, eager_tasks):
    rid = api.post(ROUTINES, {**THREE_FIELDS, "uses_ai": False}).json()["routine"]["id"]
    r = api.post(f"{ROUTINES}/{rid}/run-now")
    assert r.status_code == 202, r.content
    run = r.json()["run"]
    assert (run["trigger"], run["status"], run["event_id"]) == ("manual", "queued", None)
    done = execute_run(run["id"])
    assert (done.routine_id, done.status, done.output) == (rid, "succeeded", "Summarize the event.")
    (message,) = InboxMessage.objects.filter(account=owner, routine_id=rid)
    assert message.run_id == run["id"]


def test_the_beat_tick_never_runs_a_routine_without_a_schedule(api):
    rid = api.post(ROUTINES, THREE_FIELDS).json()["routine"]["id"]
    for later in (timedelta(minutes=1), timedelta(days=400)):
        with time_machine.travel(timezone.now() + later, tick=False):
            assert enqueue_due() == 0
    assert not Run.objects.filter(routine_id=rid).exists()
    assert Routine.objects.get(pk=rid).next_run_at is None


def test_put_takes_the_schedule_away_and_gives_it_back(api):
    rid = create(api, schedule="0 8 * * *")["routine"]["id"]
    for nothing in ("", None):
        r = api.put(f"{ROUTINES}/{rid}", {"schedule": nothing})
        assert r.status_code == 200, r.content
        assert schedule_fields(r.json()["routine"]) == NOT_SCHEDULED
        assert (Routine.objects.get(pk=rid).schedule, Routine.objects.get(pk=rid).next_run_at) == ("", None)
        with time_machine.travel(timezone.now() + timedelta(days=2), tick=False):
            assert enqueue_due() == 0
        routine = api.put(f"{ROUTINES}/{rid}", {"schedule": "30 9 * * *"}).json()["routine"]
        assert (routine["schedule"], routine["schedule_note"]) == ("30 9 * * *", None)
        assert routine["next_run_at"] is not None
    assert not Run.objects.exists()


def test_put_makes_a_webhook_routine_a_schedule_routine_without_a_schedule(api):
    rid = create(api, trigger="webhook", schedule="")["routine"]["id"]
    r = api.put(f"{ROUTINES}/{rid}", {"trigger": "schedule"})
    assert r.status_code == 200, r.content
    assert schedule_fields(r.json()["routine"]) == NOT_SCHEDULED


def test_a_schedule_that_is_sent_but_invalid_is_still_refused(api):
    body = assert_validation(api.post(ROUTINES, {**THREE_FIELDS, "schedule": "every day"}), "schedule")
    assert set(body["errors"]) == {"schedule"} and "exactly 5 fields" in body["errors"]["schedule"][0]
    body = assert_validation(api.post(ROUTINES, {**THREE_FIELDS, "timezone": "Mars/Base"}), "timezone")
    assert set(body["errors"]) == {"timezone"}  # no schedule is no error; a bad zone still is
    assert not Routine.objects.exists()
    rid = create(api, schedule="")["routine"]["id"]
    assert_validation(api.put(f"{ROUTINES}/{rid}", {"schedule": "0 0 30 2 *"}), "schedule")
    assert_validation(api.put(f"{ROUTINES}/{rid}", {"schedule": 5}), "schedule")
    assert schedule_fields(api.get(f"{ROUTINES}/{rid}").json()["routine"]) == NOT_SCHEDULED


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
    assert set(body["errors"]) == {"name", "prompt", "delivery_targets"}
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
