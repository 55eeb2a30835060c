"""The console's home (gateway/console/home/): for the last hour, 24 hours and 30 days, the
calls, tokens and spend of the usage records in the span and none outside it, per model and per
account; each model server's state; the accounts nearest a ceiling or a budget; a fixed number of
queries whatever the number of records; figures only for staff who may see them."""

import re
from datetime import datetime, timedelta, timezone

import pytest
import time_machine
from django.contrib.auth.models import Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext

from gateway.console.home.page import rate_text
from gateway.console.home.reads import SPANS, ServerState, home_figures, span_of
from gateway.registry import server_health
from gateway.registry.prices import money_text
from gateway.registry.server_health import Health
from tests.factories import (
    AccountFactory,
    AccountGroupFactory,
    ModelFactory,
    ModelServerFactory,
    metered_call,
)

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 18, 16, 30, tzinfo=timezone.utc)  # a Wednesday, after the quota week began at 14:00


class Id:
    def __init__(self, pk):
        self.id = pk


@pytest.fixture(autouse=True)
def _now():
    with time_machine.travel(NOW, tick=False):
        yield


@pytest.fixture
def operator(client):
    client.force_login(AccountFactory(email="op@example.test", is_staff=True, is_superuser=True))
    return client


@pytest.fixture
def records():
    capped = AccountGroupFactory(name="capped", daily_tokens=1000, daily_budget="0.5")
    alice = AccountFactory(email="alice@example.test", group=capped)
    bob = AccountFactory(email="bob@example.test", group=capped)
    carol = AccountFactory(email="carol@example.test", group=AccountGroupFactory(name="free"))
    made = {
        "r1": metered_call(account=alice, model="srv/a", input_tokens=100, output_tokens=50,
                                 cost_units=1_000_000_000, created_at=NOW - timedelta(minutes=10)),
        "r2": metered_call(account=bob, model="srv/b", input_tokens=30, output_tokens=20, cost_units=5,
                                 created_at=NOW - timedelta(minutes=50)),
        "r3": metered_call(account=alice, model="srv/a", input_tokens=400, output_tokens=100,
                                 created_at=NOW - timedelta(hours=3)),
        "r4": metered_call(account=carol, model="srv/b", input_tokens=1000, output_tokens=0,
                                 cost_units=20_000_000_000, created_at=NOW - timedelta(days=2)),
        "r5": metered_call(account=alice, model="srv/a", input_tokens=7, output_tokens=7,
                                 cost_units=7, created_at=NOW - timedelta(days=40)),  # outside every span
    }
    return made


IN_SPAN = {"hour": ["r1", "r2"], "day": ["r1", "r2", "r3"], "30d": ["r1", "r2", "r3", "r4"]}


def figure(html: str, element_id: str) -> str:
    return re.search(rf'id="{element_id}">([^<]*)<', html).group(1)


@pytest.mark.parametrize("span", ["hour", "day", "30d"])
def test_the_figures_are_those_of_the_records_in_the_span(operator, records, span):
    rows = [records[name] for name in IN_SPAN[span]]
    html = operator.get(f"/admin/?range={span}").content.decode()
    assert figure(html, "home-calls") == str(len(rows))
    assert figure(html, "home-tokens") == f"{sum(r.input_tokens + r.output_tokens for r in rows):,}"
    assert figure(html, "home-input") == f"{sum(r.input_tokens for r in rows):,}"
    assert figure(html, "home-output") == f"{sum(r.output_tokens for r in rows):,}"
    assert figure(html, "home-spend") == money_text(sum(r.cost_units for r in rows), 2)
    assert f'id="span-{span}" href="?range={span}" class="active"' in html


def test_the_hour_is_counted_by_minute_and_the_30_days_by_day(records):
    hour = home_figures(span=SPANS["hour"], now=NOW)
    assert len(hour.buckets) == 60 and hour.buckets[-1].start == NOW.replace(minute=30)
    assert {b.start: b.calls for b in hour.buckets if b.calls} == {
        NOW.replace(minute=20): 1, NOW.replace(hour=15, minute=40): 1}
    assert hour.calls_per_minute == pytest.approx(2 / 59)  # 15:31 to 16:30
    month = home_figures(span=SPANS["30d"], now=NOW)
    assert len(month.buckets) == 30 and month.buckets[0].start == datetime(2026, 10, 20, tzinfo=timezone.utc)
    assert {b.start.day: (b.calls, b.cost_units) for b in month.buckets if b.calls} == {
        16: (1, 20_000_000_000), 18: (3, 1_000_000_005)}


def test_models_and_accounts_are_ranked_with_their_spend(records):
    home = home_figures(span=SPANS["30d"], now=NOW)
    assert [(m.key, m.calls, m.tokens, m.spend) for m in home.models] == [
        ("srv/b", 2, 1050, "2.0000000005"), ("srv/a", 2, 650, "0.10")]
    assert [(a.key, a.group, a.calls, a.tokens, a.spend) for a in home.accounts] == [
        ("carol@example.test", "free", 1, 1000, "2.00"), ("alice@example.test", "capped", 2, 650, "0.10"),
        ("bob@example.test", "capped", 1, 50, "0.0000000005")]


def test_the_accounts_nearest_a_ceiling_or_a_budget_come_first(operator, records):
    html = operator.get("/admin/").content.decode()
    quotas = re.findall(r'<tr data-account="([^"]+)"><td>[^<]*</td><td>(\w+)</td>\s*<td class="num[^"]*">([^<]*)</td>',
                        html.split('id="home-quotas"')[1].split("</table>")[0])
    assert quotas == [("alice@example.test", "day", "650 / 1,000 (65%)"),
                      ("bob@example.test", "day", "50 / 1,000 (5%)")]
    budgets = html.split('id="home-budgets"')[1].split("</table>")[0]
    assert '<td class="num">0.10 / 0.50 (20%)</td>' in budgets


def test_each_server_says_its_state(operator):
    ok = ModelServerFactory(name="ok")
    ModelFactory(server=ok, name="m1")
    ModelFactory(server=ok, name="m2")
    broken = ModelServerFactory(name="broken")
    ModelServerFactory(name="quiet")
    ModelServerFactory(name="off", enabled=False)
    server_health.succeeded(Id(ok.pk))
    server_health.succeeded(Id(broken.pk))
    with time_machine.travel(NOW + timedelta(seconds=5), tick=False):
        server_health.failed(Id(broken.pk), "404 Not Found: POST /chat/completions")
    server_health.flush()
    server_health.forget_all()  # what the home shows comes from the shared record
    html = operator.get("/admin/").content.decode()
    table = html.split('id="home-servers"')[1].split("</table>")[0]
    states = dict(re.findall(r'<tr data-server="([^"]+)">.*?<span class="badge [^"]*">([^<]+)</span>', table, re.S))
    assert states == {"broken": "failing", "ok": "healthy", "quiet": "idle", "off": "disabled"}
    assert list(states) == ["broken", "ok", "quiet", "off"]  # the failing first
    assert "404 Not Found: POST /chat/completions" in table and "(2 models)" in table
    assert figure(html, "home-server-summary") == "1 failing"


def test_a_server_state_reads_its_health():
    at = datetime(2026, 1, 1, tzinfo=timezone.utc)
    later = at + timedelta(minutes=1)

    def state(health, enabled=True):
        return ServerState("s", 1, enabled, 0, health).state

    assert state(Health(at, None, "", None)) == "healthy"
    assert state(Health(at, later, "500", None)) == "failing"
    assert state(Health(later, at, "500", None)) == "healthy"  # answered since its failure
    assert state(Health(None, None, "", datetime.now(timezone.utc) + timedelta(seconds=30))) == "cooling down"
    assert state(Health(None, None, "", None)) == "idle"
    assert state(Health(None, None, "", None, shared=False)) == "unknown"  # the shared state could not be read
    assert state(None) == "unknown"
    assert state(Health(at, later, "500", None), enabled=False) == "disabled"


def test_the_reads_are_a_fixed_number_of_queries_whatever_the_data(records):
    def count(span):
        with CaptureQueriesContext(connection) as queries:
            home_figures(span=SPANS[span], now=NOW)
        return len(queries)

    ModelServerFactory(name="first")  # with no server at all, the shared health is not read
    before = {span: count(span) for span in SPANS}
    group = AccountGroupFactory(name="busy", daily_tokens=10, daily_budget=1)
    for n in range(15):
        account = AccountFactory(email=f"busy{n}@example.test", group=group)
        ModelFactory(server=ModelServerFactory(name=f"server{n}"), name="m")
        for minutes in (1, 70, 60 * 30):
            metered_call(account=account, model=f"server{n}/m", cost_units=n, input_tokens=n + 1,
                         created_at=NOW - timedelta(minutes=minutes))
    assert {span: count(span) for span in SPANS} == before
    assert max(before.values()) <= 12  # the calls per bucket, per model and per account: the calls log's


def test_the_page_s_queries_do_not_grow_with_the_data(operator, records):
    def count():
        with CaptureQueriesContext(connection) as queries:
            assert operator.get("/admin/?range=day").status_code == 200
        return len(queries)

    ModelServerFactory(name="first")  # with no server at all, the shared health is not read
    before = count()
    for n in range(20):
        account = AccountFactory(email=f"more{n}@example.test")
        metered_call(account=account, model=f"srv/m{n}", created_at=NOW - timedelta(minutes=n))
        ModelServerFactory(name=f"more{n}")
    assert count() == before


@pytest.mark.parametrize("value", ["", "week", "HOUR", "\x00", "30d; DROP TABLE", "1" * 500])
def test_an_unknown_range_is_the_last_24_hours(operator, records, value):
    response = operator.get("/admin/", {"range": value})
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="span-day" href="?range=day" class="active"' in html
    assert figure(html, "home-calls") == "3"
    assert span_of(value) == SPANS["day"]


def test_staff_see_only_the_figures_they_may_see(client, records):
    staff = AccountFactory(email="viewer@example.test", is_staff=True)
    client.force_login(staff)
    html = client.get("/admin/").content.decode()
    assert 'id="home-calls"' not in html and 'id="home-servers"' not in html
    staff.user_permissions.add(Permission.objects.get(codename="view_modelserver"))
    html = client.get("/admin/").content.decode()
    assert 'id="home-servers"' in html and 'id="home-calls"' not in html and "alice@example.test" not in html
    staff.user_permissions.add(Permission.objects.get(codename="view_usagerecord"))
    html = client.get("/admin/").content.decode()
    assert figure(html, "home-calls") == "3" and 'href="/admin/gateway/usagerecord/console/"' in html


def test_calls_a_minute_are_written_for_people():
    assert [rate_text(v) for v in (0, 0.002, 0.25, 12.5, 1200.0)] == ["0", "under 0.01", "0.25", "12.5", "1,200"]
