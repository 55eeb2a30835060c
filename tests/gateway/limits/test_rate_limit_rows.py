"""The rows of spec 8.1 as declared in gateway/limits/ratelimit.py, checked through the counting
functions (the endpoints of later issues declare these same limits in one line)."""

import time

import pytest
import time_machine

from gateway.limits import ratelimit
from gateway.web.errors import GeneralLimitReached, TooManyAttempts

ACCOUNT = "acct:4242"


@pytest.fixture(autouse=True)
def frozen(db):
    with time_machine.travel(time.time(), tick=False) as traveller:
        yield traveller


def hit(limit):
    return ratelimit.limit_hit(limit, subject=ACCOUNT)


def test_the_spec_example_with_its_own_endpoints():
    """After 20 calls to profiles, agent chat (20) is refused while chat (60) still works."""
    for _ in range(20):
        hit(ratelimit.PROFILES)
    with pytest.raises(TooManyAttempts):
        hit(ratelimit.AGENT_CHAT)
    assert hit(ratelimit.CHAT)["X-RateLimit-Limit"] == "60"


@pytest.mark.parametrize("limit", [ratelimit.CHAT, ratelimit.AGENT_CHAT, ratelimit.AGENT_RUN, ratelimit.EMBEDDINGS])
def test_native_chat_agent_and_embeddings_also_feed_the_general_counter(limit, settings):
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "general": 3}
    hit(limit)
    hit(ratelimit.DEFAULT)
    hit(ratelimit.DEFAULT)  # 3 of 3 on the general counter
    with pytest.raises(GeneralLimitReached) as exc:
        hit(limit)
    assert exc.value.code == "limite_de_requisicoes"
    assert exc.value.headers["X-RateLimit-Limit"] == "3"


@pytest.mark.parametrize("limit", [ratelimit.V1, ratelimit.PROFILES, ratelimit.VERSION,
                                   ratelimit.CONVERSATION_PURGE])
def test_v1_profiles_version_and_purge_do_not_feed_it(limit, settings):
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "general": 1}
    hit(limit)
    hit(limit)
    assert hit(ratelimit.DEFAULT)["X-RateLimit-Remaining"] == "0"  # the first general hit: 1 of 1


def test_collections_have_counters_of_their_own():
    for _ in range(6):
        hit(ratelimit.COLLECTION_REINDEX)
    with pytest.raises(TooManyAttempts):
        hit(ratelimit.COLLECTION_REINDEX)
    assert hit(ratelimit.COLLECTION_WRITE)["X-RateLimit-Remaining"] == "29"
    assert hit(ratelimit.CHAT)["X-RateLimit-Remaining"] == "59"


def test_per_address_limits_do_not_touch_the_accounts_counters():
    for _ in range(10):
        ratelimit.limit_hit(ratelimit.LOGIN, subject="ip:203.0.113.9")
    with pytest.raises(TooManyAttempts):
        ratelimit.limit_hit(ratelimit.LOGIN, subject="ip:203.0.113.9")
    assert ratelimit.limit_hit(ratelimit.HOOKS, subject="ip:203.0.113.9")["X-RateLimit-Limit"] == "120"
