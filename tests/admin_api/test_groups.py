"""/api/v1/admin/groups: API access, models and aliases allowed, quotas, budgets, remote servers,
attachments, the cache and guardrails, through the console's group form; a webhook secret is write-only."""

from auditlog.models import LogEntry

from accounts.models import AccountGroup
from tests.factories import ModelFactory, api_key_for, bearer


def test_create_read_change_and_delete_a_group(api, db):
    model = ModelFactory()
    created = api.post("/groups", {"name": "team", "api_access": True, "all_models": False,
                                   "allowed_models": [model.pk], "daily_tokens": 1000, "monthly_budget": 25,
                                   "remote_servers_allowed": False, "attachments_per_message": 3,
                                   "response_cache_ttl": 60})
    assert created.status_code == 201, created.content
    body = created.json()
    assert (body["name"], body["api_access"], body["all_models"], body["allowed_models"]) == (
        "team", True, False, [model.pk])
    assert (body["daily_tokens"], body["weekly_tokens"], body["monthly_budget"], body["daily_budget"]) == (
        1000, -1, "25", "-1")
    assert (body["remote_servers_allowed"], body["attachments_per_message"], body["response_cache_ttl"]) == (
        False, 3, 60)
    group_id = body["id"]
    assert api.get(f"/groups/{group_id}").json() == body
    changed = api.patch(f"/groups/{group_id}", {"daily_tokens": None, "allowed_models": []}).json()
    assert (changed["daily_tokens"], changed["allowed_models"], changed["monthly_budget"]) == (-1, [], "25")
    assert api.delete(f"/groups/{group_id}").status_code == 204
    assert not AccountGroup.objects.filter(pk=group_id).exists()


def test_a_group_with_accounts_is_not_deleted(api, owner):
    response = api.delete(f"/groups/{owner.group_id}")
    assert response.status_code == 409
    assert response.json() == {"detail": f"The group is still in use and was not deleted (by {owner.email})."}


def test_guardrails_are_checked_and_their_webhook_secret_is_write_only(api, db):
    hook = {"check": "webhook", "on": "input", "action": "block", "url": "https://guard.example.test/check",
            "secret": "s3cret-value"}
    created = api.post("/groups", {"name": "guarded", "guardrails": [hook]})
    assert created.status_code == 201, created.content
    assert "s3cret-value" not in created.content.decode()
    group = AccountGroup.objects.get(name="guarded")
    assert group.guardrails[0]["secret"] == "s3cret-value"
    api.patch(f"/groups/{group.pk}", {"api_access": True})  # guardrails not sent: kept with their secret
    group.refresh_from_db()
    assert group.guardrails[0]["secret"] == "s3cret-value"
    refused = api.patch(f"/groups/{group.pk}", {"guardrails": [{"check": "pii", "on": "input", "action": "explode"}]})
    assert refused.status_code == 422
    assert list(refused.json()["errors"]) == ["guardrails"]
    assert "action" in refused.json()["errors"]["guardrails"][0]
    assert api.patch(f"/groups/{group.pk}", {"guardrails": "pii"}).json()["errors"] == {
        "guardrails": ["Must be a list of checks."]}


def test_the_console_refusals_are_the_apis(api, db):
    response = api.post("/groups", {"name": "x", "weekly_budget": -5, "attachments_per_message": -1})
    assert response.status_code == 422
    assert set(response.json()["errors"]) == {"weekly_budget", "attachments_per_message"}
    assert api.post("/groups", {"name": "x", "allowed_models": [999999]}).json()["errors"] == {
        "allowed_models": ["Select a valid choice. 999999 is not one of the available choices."]}
    assert not AccountGroup.objects.filter(name="x").exists()


def test_a_change_of_api_access_reaches_the_members_keys_at_once(api, client, owner):
    key = api_key_for(owner)
    assert client.get("/v1/models", headers=bearer(key)).status_code == 200
    api.patch(f"/groups/{owner.group_id}", {"api_access": False})
    assert client.get("/v1/models", headers=bearer(key)).status_code == 401


def test_the_audit_trail_names_the_actor(api, staff, db):
    group_id = api.post("/groups", {"name": "audited"}).json()["id"]
    api.patch(f"/groups/{group_id}", {"daily_tokens": 5})
    entries = LogEntry.objects.get_for_object(AccountGroup.objects.get(pk=group_id)).order_by("pk")
    assert [(e.action, e.actor_id) for e in entries] == [(LogEntry.Action.CREATE, staff.pk),
                                                         (LogEntry.Action.UPDATE, staff.pk)]
    assert entries.last().changes_dict["daily_tokens"] == [-1, 5]
