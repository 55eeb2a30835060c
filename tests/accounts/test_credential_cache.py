"""The per-process credential cache: a warm request reads no database, and every change to a
key, session, account or group is seen at once — also by another process (spec 3.1: a revoked
or replaced key is dead immediately)."""

import httpx
import pytest

from accounts.models import AccountGroup
from tests.contract import assert_native_unauthenticated, assert_v1_unauthenticated
from tests.factories import AccountFactory, AccountGroupFactory, api_key_for, bearer, session_for
from tests.servers import web_process

VERIFY = "/api/v1/auth/verify"


def test_a_warm_request_makes_no_database_query(client, owner, redis_url, django_assert_num_queries):
    """With Redis holding the counters (as in production) a warm request reads no database."""
    key = api_key_for(owner)
    with django_assert_num_queries(1):  # the key, its account and group, in one query
        assert client.get(VERIFY, headers=bearer(key)).status_code == 200
    with django_assert_num_queries(0):
        assert client.get(VERIFY, headers=bearer(key)).status_code == 200


def test_a_revoked_key_is_dead_at_once_though_it_was_cached(client, owner):
    key = api_key_for(owner)
    assert client.get(VERIFY, headers=bearer(key)).status_code == 200
    assert client.delete("/api/v1/auth/api-key/revoke", headers=bearer(session_for(owner))).status_code == 200
    assert_native_unauthenticated(client.get(VERIFY, headers=bearer(key)))


def test_deactivating_a_cached_account_refuses_it_at_once(client, owner):
    key = api_key_for(owner)
    assert client.get("/v1/models", headers=bearer(key)).status_code == 200
    owner.is_active = False
    owner.save()
    assert_v1_unauthenticated(client.get("/v1/models", headers=bearer(key)))


def test_a_group_losing_api_access_refuses_its_cached_keys_at_once(client, owner):
    key = api_key_for(owner)
    assert client.get(VERIFY, headers=bearer(key)).status_code == 200
    group = AccountGroup.objects.get(pk=owner.group_id)
    group.api_access = False
    group.save()
    assert_native_unauthenticated(client.get(VERIFY, headers=bearer(key)))


def test_a_cached_refusal_is_checked_again(client, owner):
    """A session of a group without API access is refused on /api/v1; once the group gets
    access the same session works, without waiting for the cache."""
    group = AccountGroup.objects.get(pk=owner.group_id)
    group.api_access = False
    group.save()
    token = session_for(owner)
    assert client.get("/api/auth/me", headers=bearer(token)).status_code == 200  # cached here
    assert client.get(VERIFY, headers=bearer(token)).status_code == 403
    group.api_access = True
    group.save()
    assert client.get(VERIFY, headers=bearer(token)).status_code == 200


@pytest.mark.django_db(transaction=True)
def test_every_process_sees_a_change_at_once(redis_url):
    group = AccountGroupFactory(api_access=True)
    account = AccountFactory(group=group)
    key, session = api_key_for(account), session_for(account)
    with web_process(REDIS_URL=redis_url) as first, web_process(REDIS_URL=redis_url) as second:
        def status(base, credential):
            return httpx.get(f"{base}{VERIFY}", headers=bearer(credential)).status_code

        assert [status(first, key), status(second, key), status(first, key), status(second, key)] == [200] * 4
        # revoked through one process: the other refuses at once
        assert httpx.delete(f"{first}/api/v1/auth/api-key/revoke", headers=bearer(session)).status_code == 200
        assert (status(second, key), status(first, key)) == (401, 401)

        key = api_key_for(account)
        assert (status(first, key), status(second, key)) == (200, 200)
        account.is_active = False  # as the admin saves it
        account.save()
        assert (status(first, key), status(second, key)) == (401, 401)
        account.is_active = True
        account.save()
        assert (status(first, key), status(second, key)) == (200, 200)

        group.api_access = False
        group.save()
        assert (status(first, key), status(second, key)) == (401, 401)
        group.api_access = True
        group.save()
        # a session ended through one process is refused by the other
        assert status(second, session) == 200
        assert httpx.post(f"{first}/api/v1/auth/logout", headers=bearer(session)).status_code == 200
        assert status(second, session) == 401
