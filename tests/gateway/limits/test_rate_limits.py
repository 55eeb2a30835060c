"""Request ceilings (spec 8.1–8.3): windows, the shared and general counters, headers, bodies."""

import math
import time

import pytest
import time_machine

from tests.contract import (
    assert_limit_headers,
    assert_limit_headers_on_429,
    assert_native_unauthenticated,
    assert_no_rate_headers,
    assert_too_many_attempts,
    assert_v1_unauthenticated,
)
from tests.factories import api_key_for, bearer, session_for

VERSION = "/api/v1/version"  # shared counter, ceiling 60
MODELS = "/v1/models"  # shared counter, ceiling 20
VERIFY = "/api/v1/auth/verify"  # general counter, ceiling 300
JSON = {"Accept": "application/json"}


@pytest.fixture
def frozen():
    with time_machine.travel(time.time(), tick=False) as traveller:
        yield traveller


@pytest.fixture
def key(owner):
    return api_key_for(owner)


def test_the_spec_example_the_lowest_ceiling_in_play_wins(client, key, frozen):
    """20 calls to a 60-ceiling endpoint of the shared counter; then the 20-ceiling endpoint is
    refused while the 60-ceiling one still answers (spec 8.1 rule 1)."""
    now = int(time.time())
    for i in range(20):
        r = client.get(VERSION, headers=bearer(key))
        assert r.status_code == 200
        assert_limit_headers(r, 60, 60 - (i + 1))
    refused = client.get(MODELS, headers={**bearer(key), **JSON})
    assert_too_many_attempts(refused, 20, now=now)
    still = client.get(VERSION, headers=bearer(key))
    assert still.status_code == 200
    assert_limit_headers(still, 60, 39)


def test_the_last_allowed_and_first_refused_request_of_v1(client, key, frozen):
    now = int(time.time())
    for i in range(19):
        assert client.get(MODELS, headers=bearer(key)).status_code == 200
    last = client.get(MODELS, headers=bearer(key))
    assert last.status_code == 200
    assert_limit_headers(last, 20, 0)
    assert_too_many_attempts(client.get(MODELS, headers={**bearer(key), **JSON}), 20, now=now)


def test_a_v1_refusal_is_html_without_accept_json(client, key, frozen):
    for _ in range(20):
        client.get(MODELS, headers=bearer(key))
    r = client.get(MODELS, headers=bearer(key))
    assert r.status_code == 429
    assert r["Content-Type"].startswith("text/html")
    assert b"Too Many Attempts." in r.content
    assert_limit_headers_on_429(r, 20, now=int(time.time()))


def test_an_api_v1_refusal_is_json_whatever_the_accept_header(client, key, frozen):
    for _ in range(60):
        assert client.get(VERSION, headers=bearer(key)).status_code == 200
    r = client.get(VERSION, headers={**bearer(key), "Accept": "text/html"})
    assert_too_many_attempts(r, 60, now=int(time.time()))


def test_the_window_is_fixed_and_starts_at_the_first_request(client, key, frozen):
    start = time.time()
    client.get(MODELS, headers=bearer(key))
    frozen.shift(30)
    for _ in range(19):
        client.get(MODELS, headers=bearer(key))
    refused = client.get(MODELS, headers={**bearer(key), **JSON})
    assert refused.status_code == 429
    assert int(refused["X-RateLimit-Reset"]) == math.ceil(start + 60)
    assert int(refused["Retry-After"]) == 30
    frozen.shift(29.9)
    assert client.get(MODELS, headers={**bearer(key), **JSON}).status_code == 429
    frozen.shift(0.1)  # 60 s after the first request: a new window
    fresh = client.get(MODELS, headers=bearer(key))
    assert fresh.status_code == 200
    assert_limit_headers(fresh, 20, 19)


def test_a_refused_request_adds_nothing(client, key, frozen):
    for _ in range(20):
        client.get(MODELS, headers=bearer(key))
    for _ in range(5):
        assert client.get(MODELS, headers={**bearer(key), **JSON}).status_code == 429
    # the shared counter stands at 20, not 25: the version endpoint has 40 left
    r = client.get(VERSION, headers=bearer(key))
    assert_limit_headers(r, 60, 39)


def test_key_and_session_share_one_count(client, owner, key, frozen):
    session = session_for(owner)
    for i in range(20):
        assert client.get(MODELS, headers=bearer(key if i % 2 else session)).status_code == 200
    assert client.get(MODELS, headers={**bearer(session), **JSON}).status_code == 429
    assert client.get(MODELS, headers={**bearer(key), **JSON}).status_code == 429


def test_accounts_do_not_share_a_count(client, key, outsider, frozen):
    for _ in range(20):
        client.get(MODELS, headers=bearer(key))
    assert client.get(MODELS, headers={**bearer(key), **JSON}).status_code == 429
    other = client.get(MODELS, headers=bearer(api_key_for(outsider)))
    assert other.status_code == 200
    assert_limit_headers(other, 20, 19)


def test_the_general_counter_is_separate_and_answers_with_codigo(client, key, settings, frozen):
    settings.RATE_LIMITS = {**settings.RATE_LIMITS, "general": 5}
    for _ in range(20):  # /v1 and version calls do not feed the general counter
        client.get(MODELS, headers=bearer(key))
    for i in range(5):
        r = client.get(VERIFY, headers=bearer(key))
        assert r.status_code == 200
        assert_limit_headers(r, 5, 4 - i)
    refused = client.get(VERIFY, headers=bearer(key))
    assert refused.status_code == 429
    body = refused.json()
    assert set(body) == {"codigo", "detail"}
    assert body["codigo"] == "limite_de_requisicoes"
    assert_limit_headers_on_429(refused, 5, now=int(time.time()))
    assert client.get(VERSION, headers=bearer(key)).status_code == 200  # not fed, not refused


def test_the_general_limit_default_is_300(client, key, frozen):
    for _ in range(299):
        client.get(VERIFY, headers=bearer(key))
    last = client.get(VERIFY, headers=bearer(key))
    assert last.status_code == 200
    assert_limit_headers(last, 300, 0)
    assert client.get(VERIFY, headers=bearer(key)).json()["codigo"] == "limite_de_requisicoes"


def test_failed_authentication_carries_no_rate_headers_and_is_not_counted(client, key, frozen):
    for _ in range(25):
        assert_v1_unauthenticated(client.get(MODELS, headers=bearer("svc_usr_999_" + "a" * 32)))
        assert_native_unauthenticated(client.get(VERSION))
    ok = client.get(MODELS, headers=bearer(key))
    assert_limit_headers(ok, 20, 19)


def test_a_429_carries_a_request_id(client, key, frozen):
    for _ in range(20):
        client.get(MODELS, headers=bearer(key))
    r = client.get(MODELS, headers={**bearer(key), **JSON, "X-Request-Id": "abc-123"})
    assert r.status_code == 429
    assert r["X-Request-Id"] == "abc-123"
    assert_no_rate_headers(client.get(VERSION, headers=bearer("nope")))
