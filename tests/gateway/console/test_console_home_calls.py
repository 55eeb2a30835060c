"""The home's calls panel: per model, from the calls log, the calls of the span, the share
that failed, and the nearest-rank median and 95th percentile of the latency (answered calls) and of
the time to first token, in a fixed number of queries; a failed call counts for the model asked,
the gateway's refusals and the clients that left count for none."""

import re
from datetime import datetime, timedelta, timezone

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext

from gateway.console.home.call_stats import calls_by_model
from gateway.models import CallRecord
from tests.factories import AccountFactory, CallRecordFactory

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 18, 16, 30, tzinfo=timezone.utc)
FAILED, CUT, REFUSED, LEFT = (CallRecord.Outcome.FAILED, CallRecord.Outcome.CUT, CallRecord.Outcome.REFUSED,
                              CallRecord.Outcome.CLIENT_CLOSED)


@pytest.fixture(autouse=True)
def _now():
    with time_machine.travel(NOW, tick=False):
        yield


def nearest_rank(values, percentile):
    ordered = sorted(values)
    return ordered[max(1, -(-percentile * len(ordered) // 100)) - 1]


@pytest.fixture
def calls():
    account = AccountFactory()
    latencies = [float(v) for v in (120, 80, 300, 95, 2000, 110, 130, 90, 100, 105, 115, 99, 101, 140, 160, 170,
                                    180, 190, 210, 250)]
    for n, latency in enumerate(latencies):
        CallRecordFactory(account=account, model="gpu/llama", latency_ms=latency, ttft_ms=latency / 4,
                          created_at=NOW - timedelta(minutes=n))
    CallRecordFactory(account=account, model="", model_requested="gpu/llama", outcome=FAILED, status=503,
                      latency_ms=5000, ttft_ms=None, created_at=NOW - timedelta(minutes=3))
    CallRecordFactory(account=account, model="gpu/llama", outcome=CUT, status=200, latency_ms=900, ttft_ms=50,
                      created_at=NOW - timedelta(minutes=4))
    CallRecordFactory(account=account, model="", model_requested="gpu/llama", outcome=REFUSED, status=403,
                      latency_ms=2, ttft_ms=None, created_at=NOW - timedelta(minutes=5))
    CallRecordFactory(account=account, model="gpu/llama", outcome=LEFT, status=499, latency_ms=7, ttft_ms=3,
                      created_at=NOW - timedelta(minutes=6))
    CallRecordFactory(account=account, model="cloud/gpt", latency_ms=700, ttft_ms=None,
                      created_at=NOW - timedelta(minutes=7))
    CallRecordFactory(account=account, model="gpu/llama", latency_ms=1, ttft_ms=1, created_at=NOW - timedelta(hours=2))
    return latencies


def test_each_model_has_its_calls_error_rate_and_percentiles(calls):
    found = {m.model: m for m in calls_by_model(since=NOW - timedelta(hours=1), until=NOW + timedelta(minutes=1))}
    llama, gpt = found["gpu/llama"], found["cloud/gpt"]
    assert (llama.calls, llama.errors) == (22, 2)  # 20 answered, one failed, one cut; not the refusal, not the left
    assert llama.error_rate == pytest.approx(2 / 22)
    assert llama.latency == {50: nearest_rank(calls, 50), 95: nearest_rank(calls, 95)}
    ttfts = [v / 4 for v in calls] + [50.0]  # the cut call had its first token
    assert llama.ttft == {50: nearest_rank(ttfts, 50), 95: nearest_rank(ttfts, 95)}
    assert (gpt.calls, gpt.errors, gpt.latency, gpt.ttft) == (1, 0, {50: 700.0, 95: 700.0}, {})
    assert list(found) == ["gpu/llama", "cloud/gpt"]  # the most calls first


def test_the_queries_do_not_grow_with_the_calls(calls):
    def count():
        with CaptureQueriesContext(connection) as queries:
            calls_by_model(since=NOW - timedelta(hours=1), until=NOW + timedelta(minutes=1))
        return len(queries)

    before = count()
    account = AccountFactory()
    for n in range(60):
        CallRecordFactory(account=account, model=f"srv/m{n % 12}", latency_ms=n, created_at=NOW - timedelta(seconds=n))
    assert count() == before == 3


def test_the_home_shows_the_calls_panel(client, calls):
    client.force_login(AccountFactory(email="op@example.test", is_staff=True, is_superuser=True))
    html = client.get("/admin/?range=hour").content.decode()
    row = re.search(r'<tr data-model="gpu/llama">(.*?)</tr>', html.split('id="home-calls-log"')[1], re.S).group(1)
    cells = [re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
    ttfts = [v / 4 for v in calls] + [50.0]
    assert cells == ["gpu/llama", "22", "9.1%", *(f"{nearest_rank(values, p):,.0f} ms" for values in (calls, ttfts)
                                                  for p in (50, 95))]
