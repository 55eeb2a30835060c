"""API keys: generate, replace, revoke, expire (spec 2.1, 3.1, 4.2, 4.3, 5.2, 5.5)."""

import re
import time
from datetime import datetime, timedelta, timezone

import time_machine

from accounts.models import AccountGroup, ApiKey
from accounts.secrets import digest
from tests.contract import assert_auth_failure, assert_native_unauthenticated, assert_v1_unauthenticated
from tests.factories import PASSWORD, AccountFactory, AccountGroupFactory, api_key_for, bearer, session_for

GENERATE = "/api/v1/auth/api-key/generate"
REVOKE = "/api/v1/auth/api-key/revoke"
VERIFY = "/api/v1/auth/verify"
KEY_FORMAT = re.compile(r"^svc_usr_(\d+)_([A-Za-z0-9]{32})$")


def generate(client, token, password=PASSWORD):
    return client.post(GENERATE, {"password": password}, content_type="application/json", headers=bearer(token))


def test_it_generates_a_key_shown_once(client, owner):
    before = datetime.now(timezone.utc)
    r = generate(client, session_for(owner))
    assert r.status_code == 201
    body = r.json()
    assert body["status"] == "success" and body["message"]
    key = body["data"]["api_key"]
    match = KEY_FORMAT.match(key)
    assert match and int(match.group(1)) == owner.pk
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$", body["data"]["expires_at"])
    expires = datetime.strptime(body["data"]["expires_at"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)
    assert before + timedelta(days=365) <= expires <= datetime.now(timezone.utc) + timedelta(days=365)
    stored = ApiKey.objects.get(account=owner)
    assert stored.key_hash == digest(key)
    assert stored.preview == f"{key[:16]}…{key[-8:]}"
    assert key not in {stored.key_hash, stored.preview}


def test_the_key_works_on_both_surfaces_and_in_either_header(client, owner):
    key = api_key_for(owner)
    assert client.get(VERIFY, headers=bearer(key)).json()["via"] == "apikey"
    assert client.get(VERIFY, headers={"X-API-Key": key}).status_code == 200
    assert client.get("/v1/models", headers=bearer(key)).status_code == 200
    assert client.get("/v1/models", headers={"X-API-Key": key}).status_code == 200


def test_the_bearer_token_wins_over_x_api_key_even_when_wrong(client, owner):
    key = api_key_for(owner)
    headers = {"Authorization": "Bearer svc_usr_1_" + "x" * 32, "X-API-Key": key}
    assert_native_unauthenticated(client.get(VERIFY, headers=headers))
    assert_v1_unauthenticated(client.get("/v1/models", headers=headers))


def test_generating_again_replaces_the_old_key_at_once(client, owner):
    session = session_for(owner)
    first = generate(client, session).json()["data"]["api_key"]
    second = generate(client, session).json()["data"]["api_key"]
    assert first != second
    assert_native_unauthenticated(client.get(VERIFY, headers=bearer(first)))
    assert client.get(VERIFY, headers=bearer(second)).status_code == 200
    assert ApiKey.objects.filter(account=owner).count() == 1


def test_revoking_stops_the_key_at_once(client, owner):
    key = api_key_for(owner)
    session = session_for(owner)
    r = client.delete(REVOKE, headers=bearer(session))
    assert r.status_code == 200
    assert r.json()["status"] == "success"
    assert_native_unauthenticated(client.get(VERIFY, headers=bearer(key)))
    assert_v1_unauthenticated(client.get("/v1/models", headers=bearer(key)))
    assert_auth_failure(client.delete(REVOKE, headers=bearer(session)), 404)


def test_a_key_cannot_generate_or_revoke_a_key(client, owner):
    key = api_key_for(owner)
    assert_auth_failure(generate(client, key), 403)
    assert_auth_failure(client.delete(REVOKE, headers=bearer(key)), 403)
    assert client.get(VERIFY, headers=bearer(key)).status_code == 200  # still the same key


def test_a_group_without_api_access_cannot_generate(client, db):
    account = AccountFactory(group=AccountGroupFactory(api_access=False))
    body = assert_auth_failure(generate(client, session_for(account)), 403)
    assert "API permission" in body["message"]
    assert not ApiKey.objects.exists()


def test_generation_rechecks_the_password(client, owner):
    session = session_for(owner)
    body = assert_auth_failure(generate(client, session, "wrong"), 422)
    assert set(body["errors"]) == {"password"}
    body = assert_auth_failure(
        client.post(GENERATE, {}, content_type="application/json", headers=bearer(session)), 422
    )
    assert set(body["errors"]) == {"password"}
    assert not ApiKey.objects.exists()


def test_wrong_passwords_at_generation_count_toward_the_lock(client, owner):
    session = session_for(owner)
    for _ in range(4):
        assert generate(client, session, "wrong").status_code == 422
    assert generate(client, session, "wrong").status_code == 423
    assert generate(client, session).status_code == 423


def test_generation_needs_a_session(client, db):
    assert_native_unauthenticated(client.post(GENERATE, {"password": PASSWORD}, content_type="application/json"))


def test_the_key_expires_after_365_days(client, owner):
    with time_machine.travel(time.time(), tick=False) as traveller:
        key = api_key_for(owner)
        traveller.shift(timedelta(days=365) - timedelta(seconds=1))
        assert client.get(VERIFY, headers=bearer(key)).status_code == 200
        traveller.shift(timedelta(seconds=1))
        assert_native_unauthenticated(client.get(VERIFY, headers=bearer(key)))
        assert_v1_unauthenticated(client.get("/v1/models", headers=bearer(key)))


def test_a_key_is_refused_when_its_account_is_deactivated(client, owner):
    key = api_key_for(owner)
    owner.is_active = False
    owner.save()
    assert_native_unauthenticated(client.get(VERIFY, headers=bearer(key)))
    assert_v1_unauthenticated(client.get("/v1/models", headers=bearer(key)))


def test_a_key_is_refused_when_its_group_loses_api_access(client, owner):
    key = api_key_for(owner)
    AccountGroup.objects.filter(pk=owner.group_id).update(api_access=False)
    assert_native_unauthenticated(client.get(VERIFY, headers=bearer(key)))
    assert_v1_unauthenticated(client.get("/v1/models", headers=bearer(key)))


def test_a_key_of_one_account_is_not_anothers(client, owner, outsider):
    owner_key = api_key_for(owner)
    outsider_key = api_key_for(outsider)
    forged = f"svc_usr_{owner.pk}_{KEY_FORMAT.match(outsider_key).group(2)}"
    assert_native_unauthenticated(client.get(VERIFY, headers=bearer(forged)))
    assert client.get(VERIFY, headers=bearer(owner_key)).json()["user"]["id"] == owner.pk
    assert client.get(VERIFY, headers=bearer(outsider_key)).json()["user"]["id"] == outsider.pk
    # revoking the outsider's key leaves the owner's alone
    client.delete(REVOKE, headers=bearer(session_for(outsider)))
    assert client.get(VERIFY, headers=bearer(owner_key)).status_code == 200
