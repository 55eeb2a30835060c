"""Routine management (spec 4.8, 3.3): list, change, delete, run-now, rotations, runs, blueprints,
the inbox; isolation between accounts. Creating a routine and its validation are in
test_routines_api.py."""

from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from routines.models import InboxMessage, Routine, Run
from tests.contract import assert_detail
from tests.factories import DeliveryFactory, RunFactory, api_key_for, bearer
from tests.routines import routines_api_support
from tests.routines.routines_api_support import HEX48, HEX64, ROUTINES, assert_validation, create

api_fixture = routines_api_support.api_fixture  # the fixture `api`


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
    assert_validation(api.put(f"{ROUTINES}/{rid}", {"trigger": "schedule", "schedule": "every day"}), "schedule")
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
                              "retry_of", "created_at", "started_at", "finished_at", "deliveries"}


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
