"""GET /api/v1/auth/verify, GET /api/auth/me, logout, and session tokens on both surfaces (4.4, 5.1, 5.3)."""

import re

from accounts.models import AccountGroup
from tests.contract import assert_auth_failure, assert_detail, assert_native_unauthenticated, assert_v1_unauthenticated
from tests.factories import AccountFactory, AccountGroupFactory, ModelFactory, api_key_for, bearer, session_for

VERIFY = "/api/v1/auth/verify"


def test_it_verifies_a_key(client, owner):
    r = client.get(VERIFY, headers=bearer(api_key_for(owner)))
    assert r.status_code == 200
    body = r.json()
    assert set(body) == {"valid", "via", "user", "checked_at"}
    assert body["valid"] is True
    assert body["via"] == "apikey"
    assert body["user"] == {
        "id": owner.pk,
        "full_name": "Olive Owner",
        "email": "owner@example.test",
        "work_group": owner.group.name,
        "role": "user",
        "is_active": True,
    }
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?[+-]\d\d:\d\d$", body["checked_at"])


def test_it_verifies_a_session_token(client, owner):
    body = client.get(VERIFY, headers=bearer(session_for(owner))).json()
    assert body["via"] == "sanctum"
    assert body["user"]["id"] == owner.pk


def test_a_bad_credential_is_401_never_valid_false(client, owner):
    assert_native_unauthenticated(client.get(VERIFY))
    assert_native_unauthenticated(client.get(VERIFY, headers=bearer("nonsense")))
    assert_native_unauthenticated(client.get(VERIFY, headers=bearer("svc_usr_1_short")))
    assert_native_unauthenticated(client.get(VERIFY, headers={"Authorization": "Basic Zm9vOmJhcg=="}))
    assert_native_unauthenticated(client.get(VERIFY, headers={"X-API-Key": session_for(owner)}))


def test_a_session_of_a_deactivated_account_gets_403_on_api_v1(client, owner):
    token = session_for(owner)
    owner.is_active = False
    owner.save()
    assert_auth_failure(client.get(VERIFY, headers=bearer(token)), 403)
    assert_detail(client.get("/api/v1/version", headers=bearer(token)), 403)
    assert_v1_unauthenticated(client.get("/v1/models", headers=bearer(token)))


def test_a_session_of_a_group_without_api_access_gets_403_on_api_v1_and_401_on_v1(client, db):
    account = AccountFactory(group=AccountGroupFactory(api_access=False))
    token = session_for(account)
    assert "API permission" in assert_auth_failure(client.get(VERIFY, headers=bearer(token)), 403)["message"]
    assert "API permission" in assert_detail(client.get("/api/v1/version", headers=bearer(token)), 403)
    assert_v1_unauthenticated(client.get("/v1/models", headers=bearer(token)))


def test_a_session_with_api_access_works_on_v1(client, owner):
    assert client.get("/v1/models", headers=bearer(session_for(owner))).status_code == 200


def test_logout_ends_the_session_only(client, owner):
    token, other = session_for(owner), session_for(owner)
    r = client.post("/api/v1/auth/logout", headers=bearer(token))
    assert r.status_code == 200
    assert_native_unauthenticated(client.get(VERIFY, headers=bearer(token)))
    assert client.get(VERIFY, headers=bearer(other)).status_code == 200


def test_logout_refuses_a_key(client, owner):
    assert client.post("/api/v1/auth/logout", headers=bearer(api_key_for(owner))).status_code == 403


def test_me_says_null_when_every_model_is_allowed(client, owner):
    ModelFactory()
    r = client.get("/api/auth/me", headers=bearer(api_key_for(owner)))
    assert r.status_code == 200
    body = r.json()
    assert body["allowed_models"] is None
    assert body["id"] == owner.pk and body["work_group"] == owner.group.name


def test_me_lists_the_allowed_models_of_the_group(client, owner):
    allowed, _other = ModelFactory(), ModelFactory()
    AccountGroup.objects.filter(pk=owner.group_id).update(all_models=False)
    owner.group.allowed_models.add(allowed)
    body = client.get("/api/auth/me", headers=bearer(api_key_for(owner))).json()
    assert body["allowed_models"] == [allowed.public_id]


def test_me_answers_a_session_of_a_group_without_api_access(client, db):
    account = AccountFactory(group=AccountGroupFactory(api_access=False))
    assert client.get("/api/auth/me", headers=bearer(session_for(account))).status_code == 200
