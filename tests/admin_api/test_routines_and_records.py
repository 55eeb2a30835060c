"""/api/v1/admin/routines (any account's, paused and resumed by PATCH), /api/v1/admin/usage and
/api/v1/admin/calls (read only, filtered by account, model and time)."""

from datetime import timedelta

from auditlog.models import LogEntry
from django.utils import timezone

from routines.models import Routine
from tests.factories import AccountFactory, CallRecordFactory, RoutineFactory, UsageRecordFactory


def test_every_accounts_routines_are_listed_and_filtered(api, owner, outsider):
    mine, theirs = RoutineFactory(account=owner), RoutineFactory(account=outsider, is_enabled=False)
    listed = api.get("/routines").json()["data"]
    assert [(row["id"], row["account"], row["account_email"]) for row in listed] == [
        (mine.pk, owner.pk, owner.email), (theirs.pk, outsider.pk, outsider.email)]
    assert "webhook_token" not in listed[0] and "webhook_secret" not in listed[0]
    assert [row["id"] for row in api.get("/routines", account=outsider.pk).json()["data"]] == [theirs.pk]
    assert [row["id"] for row in api.get("/routines", is_enabled="false").json()["data"]] == [theirs.pk]
    assert api.get("/routines", is_enabled="no").status_code == 422


def test_pause_and_resume_another_accounts_routine(api, staff, owner):
    routine = RoutineFactory(account=owner, consecutive_failures=2)
    paused = api.patch(f"/routines/{routine.pk}", {"is_enabled": False})
    assert paused.status_code == 200, paused.content
    assert (paused.json()["is_enabled"], paused.json()["disabled_reason"]) == (False, "user")
    resumed = api.patch(f"/routines/{routine.pk}", {"is_enabled": True}).json()
    assert (resumed["is_enabled"], resumed["disabled_reason"], resumed["consecutive_failures"]) == (True, None, 0)
    assert api.patch(f"/routines/{routine.pk}", {"name": "x"}).json()["errors"] == {"name": ["Unknown field."]}
    assert api.patch(f"/routines/{routine.pk}", {}).json()["errors"] == {"is_enabled": ["Required: true or false."]}
    assert api.get("/routines/999999").status_code == 404
    entry = LogEntry.objects.get_for_object(Routine.objects.get(pk=routine.pk)).latest("pk")
    assert entry.actor_id == staff.pk


def test_usage_is_listed_newest_first_and_filtered(api, owner, outsider):
    now = timezone.now()
    # 0.0042 of the currency, in COST_UNITS (10^-10 of it)
    old = UsageRecordFactory(account=owner, model="srv/a", created_at=now - timedelta(days=2), cost_units=42_000_000)
    new = UsageRecordFactory(account=owner, model="srv/b", created_at=now)
    theirs = UsageRecordFactory(account=outsider, model="srv/a", created_at=now)
    assert [row["id"] for row in api.get("/usage").json()["data"]] == [theirs.pk, new.pk, old.pk]
    assert [row["id"] for row in api.get("/usage", account=owner.pk).json()["data"]] == [new.pk, old.pk]
    assert [row["id"] for row in api.get("/usage", model="srv/a").json()["data"]] == [theirs.pk, old.pk]
    since = (now - timedelta(days=1)).isoformat()
    assert [row["id"] for row in api.get("/usage", account=owner.pk, since=since).json()["data"]] == [new.pk]
    assert [row["id"] for row in api.get("/usage", until=since).json()["data"]] == [old.pk]
    record = api.get("/usage", until=since).json()["data"][0]
    assert (record["account"], record["model"], record["input_tokens"], record["cost"]) == (
        owner.pk, "srv/a", 10, "0.004200")  # as the usage console writes it
    assert api.get("/usage", since="yesterday").json()["errors"] == {
        "since": ["An ISO 8601 time, e.g. 2030-01-31T00:00:00Z."]}
    assert api.get("/usage", since="2030-13-45T00:00:00Z").status_code == 422


def test_calls_are_listed_and_filtered(api, db):
    account = AccountFactory()
    ok = CallRecordFactory(account=account)
    failed = CallRecordFactory(account=account, status=502, outcome="failed", model="srv/b")
    assert [row["id"] for row in api.get("/calls").json()["data"]] == [failed.pk, ok.pk]
    assert [row["id"] for row in api.get("/calls", status=502).json()["data"]] == [failed.pk]
    assert [row["id"] for row in api.get("/calls", outcome="ok", account=account.pk).json()["data"]] == [ok.pk]
    assert api.get("/calls", status="teapot").status_code == 422
    assert api.get("/calls", outcome="maybe").status_code == 422
