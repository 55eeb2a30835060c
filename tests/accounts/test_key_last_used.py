"""When an API key was last used, moved at most once a minute per key and never on
the call's way (the warm credential check still reads no database; accounts/key_use.py)."""

from datetime import datetime, timedelta, timezone

import pytest
import time_machine

from accounts import key_use
from accounts.models import ApiKey
from tests.factories import AccountFactory, api_key_for, bearer, session_for

pytestmark = pytest.mark.django_db

VERIFY = "/api/v1/auth/verify"
START = datetime(2027, 1, 15, 8, 0, tzinfo=timezone.utc)


def last_used(account):
    return ApiKey.objects.get(account=account).last_used_at


def test_it_records_a_use_at_most_once_a_minute(client, owner):
    with time_machine.travel(START, tick=False) as clock:
        key = api_key_for(owner)
        assert last_used(owner) is None
        assert client.get(VERIFY, headers=bearer(key)).status_code == 200
        assert last_used(owner) is None  # nothing written by the call itself
        assert key_use.flush() == 1
        assert last_used(owner) == START

        clock.shift(30)
        assert client.get(VERIFY, headers=bearer(key)).status_code == 200
        assert key_use.flush() == 0
        assert last_used(owner) == START

        clock.shift(31)  # a minute and a second after the first use
        assert client.get(VERIFY, headers=bearer(key)).status_code == 200
        assert key_use.flush() == 1
        assert last_used(owner) == START + timedelta(seconds=61)


def test_several_processes_move_the_stored_time_once_a_minute(client, owner):
    """Each process notes a key at most once a minute; the write itself moves the stored time only
    when it is a minute old, so a second process's note of the same minute changes nothing."""
    with time_machine.travel(START, tick=False) as clock:
        key = api_key_for(owner)
        assert client.get(VERIFY, headers=bearer(key)).status_code == 200
        assert key_use.flush() == 1
        key_use.forget_all()  # another process, which has not noted this key yet
        clock.shift(20)
        assert client.get(VERIFY, headers=bearer(key)).status_code == 200
        assert key_use.flush() == 0
        assert last_used(owner) == START


def test_a_warm_call_still_reads_no_database(client, owner, redis_url, django_assert_num_queries):
    key = api_key_for(owner)
    assert client.get(VERIFY, headers=bearer(key)).status_code == 200
    key_use.forget_all()  # so the next call notes a use
    with django_assert_num_queries(0):
        assert client.get(VERIFY, headers=bearer(key)).status_code == 200
    assert key_use.flush() == 1


def test_a_session_token_or_a_refused_key_is_no_use_of_the_key(client, owner):
    key = api_key_for(owner)
    assert client.get(VERIFY, headers=bearer(session_for(owner))).status_code == 200
    assert client.get(VERIFY, headers=bearer(key[:-1] + ("A" if key[-1] != "A" else "B"))).status_code == 401
    assert key_use.flush() == 0
    assert last_used(owner) is None


def test_a_replaced_key_starts_with_no_use(client, owner):
    old = api_key_for(owner)
    assert client.get(VERIFY, headers=bearer(old)).status_code == 200
    key_use.flush()
    new = api_key_for(owner)
    assert last_used(owner) is None
    assert client.get(VERIFY, headers=bearer(new)).status_code == 200  # same account, same minute
    assert key_use.flush() == 1
    assert last_used(owner) is not None


def test_uses_the_database_refuses_are_kept_for_the_next_flush(client, owner, monkeypatch):
    key = api_key_for(owner)
    assert client.get(VERIFY, headers=bearer(key)).status_code == 200

    def down(*args, **kwargs):
        from django.db import OperationalError

        raise OperationalError("the database is away")

    monkeypatch.setattr(key_use.ApiKey.objects, "filter", down)
    with pytest.raises(Exception, match="away"):
        key_use.flush()
    monkeypatch.undo()
    assert key_use.flush() == 1
    assert last_used(owner) is not None


@pytest.mark.django_db(transaction=True)
def test_a_web_process_writes_the_use_from_its_own_thread(redis_url):
    """In a running gateway the write comes from the process's flush thread, within
    API_KEY_USE_FLUSH_SECONDS of the call."""
    import time

    import httpx

    from tests.factories import AccountGroupFactory
    from tests.servers import wait_for_quiet_database, web_process

    account = AccountFactory(group=AccountGroupFactory(api_access=True))
    key = api_key_for(account)
    with web_process(API_KEY_USE_FLUSH_SECONDS="0.2") as base:
        assert httpx.get(f"{base}{VERIFY}", headers=bearer(key), timeout=30).status_code == 200
        deadline = time.monotonic() + 10
        while last_used(account) is None:
            assert time.monotonic() < deadline, "the use was not written"
            time.sleep(0.05)
    wait_for_quiet_database()
    assert datetime.now(timezone.utc) - last_used(account) < timedelta(seconds=30)
