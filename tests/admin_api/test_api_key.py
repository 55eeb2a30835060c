"""/api/v1/admin/accounts/{id}/api-key: a key made here works on /v1 at once, and a revoked or replaced one
is refused at once (the same key functions and credential versions as the account's own endpoints)."""

import httpx
import pytest
from auditlog.models import LogEntry

from accounts.models import ApiKey
from tests.contract import assert_v1_unauthenticated
from tests.factories import AccountFactory, AccountGroupFactory, bearer, session_for
from tests.servers import web_process


def test_a_generated_key_works_at_once_and_a_revoked_one_is_refused_at_once(api, client, owner):
    made = api.post(f"/accounts/{owner.pk}/api-key")
    assert made.status_code == 201, made.content
    key = made.json()["api_key"]
    assert made.json()["preview"] == f"{key[:16]}…{key[-8:]}"
    assert client.get("/v1/models", headers=bearer(key)).status_code == 200
    shown = api.get(f"/accounts/{owner.pk}").json()["api_key"]
    assert shown["preview"] == made.json()["preview"] and key not in str(api.get("/accounts").content)
    assert api.delete(f"/accounts/{owner.pk}/api-key").status_code == 204
    assert_v1_unauthenticated(client.get("/v1/models", headers=bearer(key)))
    assert api.delete(f"/accounts/{owner.pk}/api-key").json() == {"detail": "The account has no API key to revoke."}


def test_a_new_key_replaces_the_old_one_at_once(api, client, owner):
    old = api.post(f"/accounts/{owner.pk}/api-key").json()["api_key"]
    assert client.get("/v1/models", headers=bearer(old)).status_code == 200
    new = api.post(f"/accounts/{owner.pk}/api-key").json()["api_key"]
    assert_v1_unauthenticated(client.get("/v1/models", headers=bearer(old)))
    assert client.get("/v1/models", headers=bearer(new)).status_code == 200


def test_no_key_for_a_group_without_api_access_or_a_deactivated_account(api, db):
    closed = AccountFactory(group=AccountGroupFactory(name="closed", api_access=False))
    response = api.post(f"/accounts/{closed.pk}/api-key")
    assert response.status_code == 409
    assert "has no API access" in response.json()["detail"]
    inactive = AccountFactory(is_active=False)
    assert api.post(f"/accounts/{inactive.pk}/api-key").status_code == 409
    assert not ApiKey.objects.exists()


def test_a_body_field_is_refused(api, owner):
    response = api.post(f"/accounts/{owner.pk}/api-key", {"password": "x"})
    assert response.json() == {"message": "Unknown field.", "errors": {"password": ["Unknown field."]}}


def test_the_audit_trail_names_the_actor_of_the_key_never_the_key(api, staff, owner):
    key = api.post(f"/accounts/{owner.pk}/api-key").json()["api_key"]
    entry = LogEntry.objects.filter(content_type__model="apikey", action=LogEntry.Action.CREATE).latest("pk")
    assert entry.actor_id == staff.pk
    assert key not in str(entry.changes) and key[-8:] in str(entry.changes)  # the preview only
    api.delete(f"/accounts/{owner.pk}/api-key")
    gone = LogEntry.objects.filter(content_type__model="apikey", action=LogEntry.Action.DELETE).latest("pk")
    assert gone.actor_id == staff.pk


@pytest.mark.django_db(transaction=True)
def test_a_key_made_and_revoked_through_one_process_is_seen_by_another_at_once(redis_url):
    """Two web processes sharing one Redis, as two hosts do: the key the API makes through the first works on
    the second at once, and once revoked through the first, the second refuses it at once (it had it cached)."""
    owner = AccountFactory(group=AccountGroupFactory(api_access=True))
    staff = AccountFactory(is_staff=True, is_superuser=True, group=AccountGroupFactory(name="ops", api_access=False))
    session = bearer(session_for(staff))
    with web_process(REDIS_URL=redis_url) as first, web_process(REDIS_URL=redis_url) as second:
        made = httpx.post(f"{first}/api/v1/admin/accounts/{owner.pk}/api-key", headers=session)
        assert made.status_code == 201, made.text
        key = bearer(made.json()["api_key"])
        statuses = [httpx.get(f"{base}/v1/models", headers=key).status_code for base in (second, first, second)]
        assert statuses == [200] * 3
        assert httpx.delete(f"{first}/api/v1/admin/accounts/{owner.pk}/api-key", headers=session).status_code == 204
        assert_v1_unauthenticated(httpx.get(f"{second}/v1/models", headers=key))
        assert_v1_unauthenticated(httpx.get(f"{first}/v1/models", headers=key))
