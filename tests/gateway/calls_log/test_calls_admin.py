"""The console's "Calls" through the Django test client as staff: the list, each filter and the
search, a call's page with its chain and kept text, who may see it; and the home's read per model."""

import re
from datetime import timedelta
from urllib.parse import urlencode

import pytest
from django.contrib.auth.models import Permission
from django.utils import timezone

from tests.factories import (
    AccountFactory,
    AccountGroupFactory,
    CallCaptureFactory,
    CallRecordFactory,
    ModelFactory,
    ModelServerFactory,
)

LIST = "/admin/gateway/callrecord/"
FAILED_CHAIN = [
    {"model": "srv/model-a", "server": "srv", "outcome": "unavailable", "status": 503, "ttfb_ms": 12.5,
     "error": "503 <b>overloaded</b>"},
    {"model": "srv/model-b", "server": "srv", "outcome": "unreachable", "status": 503, "ttfb_ms": 5000.0,
     "error": "connect timeout"},
]


@pytest.fixture
def calls(db):
    now = timezone.now()
    research, ops = AccountGroupFactory(name="research"), AccountGroupFactory(name="ops")
    alice = AccountFactory(email="alice@example.test", group=research)
    bob = AccountFactory(email="bob@example.test", group=ops)
    server = ModelServerFactory(name="srv")
    ModelFactory(server=server, name="model-a")
    ModelFactory(server=server, name="model-b")
    return {
        "alice_ok": CallRecordFactory(account=alice, created_at=now - timedelta(minutes=5), request_id="req-alice-ok"),
        "alice_failed": CallRecordFactory(account=alice, created_at=now - timedelta(minutes=3), model="", status=503,
                                          outcome="failed", error_code="service_unavailable", ttft_ms=None,
                                          attempts=FAILED_CHAIN, fall_throughs=1, request_id="req-alice-503"),
        "bob_cached": CallRecordFactory(account=bob, created_at=now - timedelta(minutes=1), model="srv/model-b",
                                        model_requested="srv/model-b", cached=True, attempts=[],
                                        surface="native_chat", request_id="req-bob-hit"),
        "bob_old": CallRecordFactory(account=bob, created_at=now - timedelta(days=3), status=429, outcome="refused",
                                     model="", error_code="rate_limit_exceeded", attempts=[], request_id="req-old"),
        "anonymous": CallRecordFactory(account=None, group=None, created_at=now - timedelta(minutes=2), status=401,
                                       outcome="refused", model="", model_requested="", error_code="invalid_api_key",
                                       attempts=[], request_id="req-anon"),
    }


@pytest.fixture
def operator(client, db):
    client.force_login(AccountFactory(email="operator@example.test", is_staff=True, is_superuser=True))
    return client


def listed(client, query: str = "") -> list[str]:
    response = client.get(LIST + query)
    assert response.status_code == 200, response.content[:500]
    return [call.request_id for call in response.context["cl"].result_list]


def test_it_lists_every_call_newest_first(operator, calls):
    assert listed(operator) == ["req-bob-hit", "req-anon", "req-alice-503", "req-alice-ok", "req-old"]
    page = operator.get(LIST).content.decode()
    for text in ("alice@example.test", "(no valid credential)", "service_unavailable", "none answered",
                 "asked: srv/model-a", "120 ms", "first token 40 ms", "10 in<"):
        assert text in page


@pytest.mark.parametrize("query, expected", [
    ("?when=1h", ["req-bob-hit", "req-anon", "req-alice-503", "req-alice-ok"]),
    ("?outcome__exact=failed", ["req-alice-503"]),
    ("?outcome__exact=refused", ["req-anon", "req-old"]),
    ("?status_class=5xx", ["req-alice-503"]),
    ("?status_class=4xx", ["req-anon", "req-old"]),
    ("?status=429", ["req-old"]),
    ("?model=srv/model-b", ["req-bob-hit"]),
    ("?model=-", ["req-anon", "req-alice-503", "req-old"]),
    ("?surface=native_chat", ["req-bob-hit"]),
    ("?cached__exact=1", ["req-bob-hit"]),
    ("?q=req-alice-503", ["req-alice-503"]),
    ("?q=bob%40", ["req-bob-hit", "req-old"]),
    ("?q=no+such+id", []),
])
def test_each_filter_and_the_search(operator, calls, query, expected):
    assert listed(operator, query) == expected


def test_it_filters_by_account_group_and_time_range(operator, calls):
    alice, bob = calls["alice_ok"].account, calls["bob_old"].account
    assert listed(operator, f"?account__id__exact={alice.pk}") == ["req-alice-503", "req-alice-ok"]
    assert listed(operator, f"?group__id__exact={bob.group_id}") == ["req-bob-hit", "req-old"]
    since = urlencode({"created_at__gte": (timezone.now() - timedelta(minutes=4)).isoformat()})
    assert listed(operator, f"?{since}") == ["req-bob-hit", "req-anon", "req-alice-503"]


@pytest.mark.parametrize("query", ["?when=yesterday", "?status_class=9xx", "?status=abc", "?created_at__gte=soon",
                                   "?q=%3Cscript%3E"])
def test_bad_filter_values_are_no_error(operator, calls, query):
    response = operator.get(LIST + query)
    assert response.status_code in (200, 302)  # ignored, or the admin's own "?e=1" page
    if response.status_code == 302:
        assert operator.get(response["Location"]).status_code == 200


def test_a_calls_page_shows_its_chain_escaped(operator, calls):
    call = calls["alice_failed"]
    page = operator.get(f"{LIST}{call.pk}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    rows = [(outcome, re.findall(r"<td[^>]*>(.*?)</td>", cells))
            for outcome, cells in re.findall(r"<tr data-outcome='([^']*)'>(.*?)</tr>", html)]
    assert rows == [
        ("unavailable", ["1", "srv/model-a", "srv", "unavailable<br><small>429, 5xx, quota or key</small>", "503",
                         "12.5 ms", "503 &lt;b&gt;overloaded&lt;/b&gt;"]),
        ("unreachable", ["2", "srv/model-b", "srv", "unreachable<br><small>no connection, or a timeout</small>", "503",
                         "5,000.0 ms", "connect timeout"]),
    ]
    assert "req-alice-503" in html and "Prompt and reply" not in html


def test_a_calls_page_shows_its_kept_text_when_there_is_some(operator, calls):
    call = calls["alice_ok"]
    CallCaptureFactory(call=call, prompt='{"messages": "<hi>"}', reply="Echo: [redacted]")
    html = operator.get(f"{LIST}{call.pk}/change/").content.decode()
    assert "Prompt and reply (redacted)" in html
    assert "{&quot;messages&quot;: &quot;&lt;hi&gt;&quot;}" in html and "Echo: [redacted]" in html
    cached = operator.get(f"{LIST}{calls['bob_cached'].pk}/change/").content.decode()
    assert "No model was called" in cached


def test_only_staff_who_may_view_calls_see_them(client, calls):
    assert client.get(LIST).status_code == 302  # to the login
    staff = AccountFactory(email="staff@example.test", is_staff=True)
    client.force_login(staff)
    assert client.get(LIST).status_code == 403
    staff.user_permissions.add(Permission.objects.get(codename="view_callrecord"))
    assert client.get(LIST).status_code == 200
    assert client.get(f"{LIST}add/").status_code == 403
    assert client.post(f"{LIST}{calls['alice_ok'].pk}/delete/").status_code == 403


def test_a_calls_page_shows_its_guardrails_findings(operator, calls):
    call = calls["alice_ok"]
    call.guard = [{"check": "pii", "entity": "EMAIL_ADDRESS", "action": "redact", "direction": "input", "index": 1,
                   "offset": 9},
                  {"check": "secrets", "entity": "AWS_ACCESS_KEY", "action": "block", "direction": "output",
                   "index": 0, "offset": 120}]
    call.save()
    html = operator.get(f"{LIST}{call.pk}/change/").content.decode()
    [shown] = re.findall(r"<span class='call-guard'[^>]*>(.*?)</span>", html, re.S)
    assert shown.split("\n") == ["pii EMAIL_ADDRESS: redact, input (text 1, at 9)",
                                 "secrets AWS_ACCESS_KEY: block, output (text 0, at 120)"]
    assert "call-guard" not in operator.get(f"{LIST}{calls['bob_old'].pk}/change/").content.decode()  # none found
