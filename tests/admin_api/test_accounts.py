"""/api/v1/admin/accounts: create, read, change (deactivate, lock and unlock, budgets) and delete through
HTTP with a staff session; the console's validation in the 422 shape; the audit trail's actor."""

from datetime import timedelta

from auditlog.models import LogEntry
from django.utils import timezone

from accounts.models import Account
from tests.factories import PASSWORD, AccountFactory, AccountGroupFactory


def test_create_read_change_and_delete_an_account(api, client, group):
    created = api.post("/accounts", {"email": "New@Example.test", "full_name": "New Person", "group": group.pk,
                                     "password": PASSWORD, "daily_budget": "2.5"})
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["email"] == "new@example.test"
    assert (body["group"], body["group_name"], body["role"]) == (group.pk, group.name, "user")
    assert (body["is_active"], body["is_staff"], body["api_key"], body["locked_until"]) == (True, False, None, None)
    assert (body["daily_budget"], body["weekly_budget"]) == ("2.5", None)
    account_id = body["id"]
    assert api.get(f"/accounts/{account_id}").json() == body
    login = client.post("/api/v1/auth/login", {"email": "new@example.test", "password": PASSWORD},
                        content_type="application/json")
    assert login.status_code == 200
    changed = api.patch(f"/accounts/{account_id}", {"is_active": False, "monthly_budget": -1})
    assert changed.status_code == 200, changed.content
    assert (changed.json()["is_active"], changed.json()["monthly_budget"], changed.json()["daily_budget"]) == (
        False, "-1", "2.5")  # a field not sent keeps its value
    assert api.delete(f"/accounts/{account_id}").status_code == 204
    assert api.get(f"/accounts/{account_id}").status_code == 404
    assert not Account.objects.filter(pk=account_id).exists()


def test_an_account_without_password_cannot_log_in(api, client, group):
    created = api.post("/accounts", {"email": "sso@example.test", "group": group.pk})
    assert created.status_code == 201, created.content
    assert not Account.objects.get(email="sso@example.test").has_usable_password()


def test_lock_and_unlock(api, owner):
    until = (timezone.now() + timedelta(hours=1)).replace(microsecond=0)
    locked = api.patch(f"/accounts/{owner.pk}", {"locked_until": until.isoformat()})
    assert locked.status_code == 200, locked.content
    owner.refresh_from_db()
    assert owner.locked_until == until and owner.is_locked()
    owner.failed_logins = 5
    owner.save(update_fields=["failed_logins"])
    unlocked = api.patch(f"/accounts/{owner.pk}", {"locked_until": None})
    assert unlocked.json()["locked_until"] is None
    owner.refresh_from_db()
    assert (owner.locked_until, owner.failed_logins) == (None, 0)
    assert api.patch(f"/accounts/{owner.pk}", {"locked_until": "tomorrow"}).json() == {
        "message": "An ISO 8601 time with its offset (2030-01-01T00:00:00Z), or null to unlock.",
        "errors": {"locked_until": ["An ISO 8601 time with its offset (2030-01-01T00:00:00Z), or null to unlock."]}}


def test_validation_errors_are_the_422_shape(api, owner, group):
    duplicate = api.post("/accounts", {"email": owner.email, "group": group.pk, "password": PASSWORD})
    assert duplicate.status_code == 422
    assert duplicate.json() == {"message": "Account with this Email already exists.",
                                "errors": {"email": ["Account with this Email already exists."]}}
    unknown = api.post("/accounts", {"email": "a@example.test", "group": group.pk, "is_superuser": True})
    assert unknown.status_code == 422
    assert unknown.json() == {"message": "Unknown field.", "errors": {"is_superuser": ["Unknown field."]}}
    typed = api.patch(f"/accounts/{owner.pk}", {"is_active": "no", "group": "x"})
    assert typed.status_code == 422
    assert typed.json()["errors"] == {"is_active": ["Must be true or false."], "group": ["Must be an id."]}
    budget = api.patch(f"/accounts/{owner.pk}", {"daily_budget": -2})
    assert budget.json() == {"message": "A budget is “no limit” or an amount of at least 0.",
                             "errors": {"daily_budget": ["A budget is “no limit” or an amount of at least 0."]}}
    weak = api.post("/accounts", {"email": "weak@example.test", "group": group.pk, "password": "123"})
    assert weak.status_code == 422 and "password" in weak.json()["errors"]
    assert not Account.objects.filter(email__in=["a@example.test", "weak@example.test"]).exists()


def test_an_account_that_does_not_exist_is_404(api, db):
    for response in (api.get("/accounts/999999"), api.patch("/accounts/999999", {"full_name": "x"}),
                     api.delete("/accounts/999999"), api.post("/accounts/999999/api-key"),
                     api.get(f"/accounts/{2 ** 70}")):
        assert response.status_code == 404
        assert response.json() == {"detail": response.json()["detail"]}


def test_an_operator_cannot_delete_their_own_account(api, staff):
    response = api.delete(f"/accounts/{staff.pk}")
    assert response.status_code == 409
    assert response.json() == {"detail": "You cannot delete your own account."}


def test_the_list_filters_by_group_and_email(api, db):
    group = AccountGroupFactory(name="team")
    one = AccountFactory(group=group, email="alice@team.test")
    AccountFactory(email="bob@elsewhere.test")
    assert [row["id"] for row in api.get("/accounts", group=group.pk).json()["data"]] == [one.pk]
    assert [row["id"] for row in api.get("/accounts", email="ALICE").json()["data"]] == [one.pk]
    assert api.get("/accounts", group="team").json()["errors"] == {"group": ["An id: a whole number."]}


def test_the_audit_trail_names_the_staff_actor(api, staff, owner):
    assert api.patch(f"/accounts/{owner.pk}", {"full_name": "Renamed"}).status_code == 200
    entry = LogEntry.objects.get_for_object(owner).filter(action=LogEntry.Action.UPDATE).latest("pk")
    assert (entry.actor_id, entry.actor_email) == (staff.pk, staff.email)
    assert entry.changes_dict["full_name"] == ["Olive Owner", "Renamed"]
    api.patch(f"/accounts/{owner.pk}", {"locked_until": "2099-01-01T00:00:00Z"})
    lock = LogEntry.objects.get_for_object(owner).latest("pk")
    assert lock.actor_id == staff.pk
    assert lock.changes_dict["locked_until"] == [None, "2099-01-01T00:00:00.000000Z"]
