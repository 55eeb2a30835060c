"""POST /api/v1/auth/login (spec 4.1, 3.2, 5.6)."""

import time

import time_machine

from accounts.models import SessionToken
from accounts.secrets import digest
from tests.contract import assert_auth_failure, assert_too_many_attempts
from tests.factories import PASSWORD, AccountFactory, bearer

URL = "/api/v1/auth/login"


def login(client, email, password=PASSWORD, remote="127.0.0.1", **extra):
    return client.post(URL, {"email": email, "password": password, **extra}, content_type="application/json",
                       REMOTE_ADDR=remote)


def test_it_returns_a_session_token_for_a_day(client, owner):
    r = login(client, owner.email)
    assert r.status_code == 200
    body = r.json()
    assert body["status"] == "success" and isinstance(body["message"], str)
    data = body["data"]
    assert data["token_type"] == "Bearer"
    assert data["expires_in"] == 86400
    assert data["user"]["id"] == owner.pk
    assert data["user"]["email"] == owner.email
    assert data["user"]["work_group"] == owner.group.name
    session = SessionToken.objects.get(account=owner)
    assert session.token_hash == digest(data["access_token"])
    assert data["access_token"] not in session.token_hash


def test_it_returns_a_thirty_day_token_with_remember_me(client, owner):
    r = login(client, owner.email, remember_me=True)
    assert r.json()["data"]["expires_in"] == 2592000


def test_it_accepts_the_email_in_another_case(client, owner):
    assert login(client, owner.email.upper()).status_code == 200


def test_the_session_token_works_until_it_expires(client, owner):
    with time_machine.travel(time.time(), tick=False) as traveller:
        token = login(client, owner.email).json()["data"]["access_token"]
        assert client.get("/api/v1/auth/verify", headers=bearer(token)).status_code == 200
        traveller.shift(86400 - 1)
        assert client.get("/api/v1/auth/verify", headers=bearer(token)).status_code == 200
        traveller.shift(1)
        assert client.get("/api/v1/auth/verify", headers=bearer(token)).status_code == 401


def test_it_refuses_a_wrong_password_in_the_failure_shape(client, owner):
    body = assert_auth_failure(login(client, owner.email, "wrong password"), 401)
    assert body["errors"] == {}


def test_it_refuses_an_unknown_email_like_a_wrong_password(client, owner):
    wrong = login(client, owner.email, "wrong password").json()
    unknown = login(client, "nobody@example.test").json()
    assert wrong == unknown


def test_it_refuses_a_deactivated_account(client, group):
    account = AccountFactory(group=group, is_active=False)
    assert_auth_failure(login(client, account.email), 403)
    assert not SessionToken.objects.exists()


def test_it_validates_the_body(client, db):
    body = assert_auth_failure(client.post(URL, {"password": 5}, content_type="application/json"), 422)
    assert set(body["errors"]) == {"email"}
    body = assert_auth_failure(client.post(URL, {"email": "not-an-email"}, content_type="application/json"), 422)
    assert set(body["errors"]) == {"email", "password"}
    assert all(isinstance(m, str) for messages in body["errors"].values() for m in messages)


def test_it_answers_malformed_json_with_400_in_the_failure_shape(client, db):
    r = client.post(URL, b'{"email": ', content_type="application/json")
    assert_auth_failure(r, 400)


def test_five_failures_lock_the_account_for_thirty_minutes(client, owner):
    with time_machine.travel(time.time(), tick=False) as traveller:
        for _ in range(4):
            assert login(client, owner.email, "wrong").status_code == 401
        fifth = login(client, owner.email, "wrong")
        assert_auth_failure(fifth, 423)
        assert fifth["Retry-After"] == "1800"

        traveller.shift(60)  # a new minute: the per-address window is not what refuses
        refused = login(client, owner.email)
        assert_auth_failure(refused, 423)
        assert refused["Retry-After"] == str(1800 - 60)

        traveller.shift(1800 - 60 - 1)
        assert login(client, owner.email).status_code == 423
        traveller.shift(1)
        assert login(client, owner.email).status_code == 200


def test_a_success_resets_the_failure_count(client, owner):
    for _ in range(4):
        login(client, owner.email, "wrong")
    assert login(client, owner.email).status_code == 200
    for _ in range(4):
        assert login(client, owner.email, "wrong").status_code == 401
    assert login(client, owner.email).status_code == 200


def test_the_lock_of_one_account_leaves_another_alone(client, owner, outsider):
    for _ in range(5):
        login(client, owner.email, "wrong", remote="10.0.0.1")
    assert login(client, owner.email, remote="10.0.0.2").status_code == 423
    assert login(client, outsider.email, remote="10.0.0.2").status_code == 200


def test_ten_attempts_a_minute_per_address(client, owner):
    with time_machine.travel(time.time(), tick=False) as traveller:
        now = int(time.time())
        for i in range(9):
            assert login(client, owner.email, "wrong" if i % 4 else PASSWORD).status_code in (200, 401)
        tenth = login(client, owner.email)
        assert tenth.status_code == 200
        assert tenth["X-RateLimit-Limit"] == "10"
        assert tenth["X-RateLimit-Remaining"] == "0"
        assert_too_many_attempts(login(client, owner.email), 10, now=now)
        # another address has its own window
        assert login(client, owner.email, remote="192.0.2.7").status_code == 200
        traveller.shift(60)
        assert login(client, owner.email).status_code == 200
