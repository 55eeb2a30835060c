"""The usage console in the admin (gateway/console/usage_reads*.py): figures per day
and model from the daily roll-up, filters, top accounts, quota use, failed model calls, the CSV
export, a fixed number of queries whatever the number of records."""

import asyncio
import csv
import io
import re
import time
from datetime import datetime, timedelta, timezone

import pytest
import time_machine
from asgiref.sync import sync_to_async
from django.db import connection, connections
from django.db.models import Sum
from django.test import AsyncClient
from django.test.utils import CaptureQueriesContext

from gateway.calls.chain import ChainExhausted
from gateway.calls.dispatch import open_reply
from gateway.console import usage_views as usage_console_views
from gateway.models import CallFailureDaily, CallRecord, UsageDaily, UsageRecord
from gateway.registry.snapshot import registry
from gateway.state import write_behind
from gateway.usage import call_failures
from gateway.usage.writer import insert_rows
from gateway.web.errors import ApiError
from gateway.web.output import timestamp
from tests.factories import (
    AccountFactory,
    AccountGroupFactory,
    CallRecordFactory,
    ModelFactory,
    ModelServerFactory,
    metered_call,
)
from tests.servers import wait_for_quiet_database
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture

URL = "/admin/gateway/usagerecord/console/"
CSV_URL = "/admin/gateway/usagerecord/console/csv/"
NOW = datetime(2026, 11, 18, 16, 0, tzinfo=timezone.utc)  # a Wednesday, two hours into the quota week


def at(day: int, hour: int = 12) -> datetime:
    return datetime(2026, 11, day, hour, 0, tzinfo=timezone.utc)


@pytest.fixture(autouse=True)
def _now():
    with time_machine.travel(NOW, tick=False):
        yield


@pytest.fixture
def operator(client, db):
    account = AccountFactory(email="op@example.test", is_staff=True, is_superuser=True)
    client.force_login(account)
    return account


@pytest.fixture
def world(db):
    """Two groups, three accounts, two models, records on three days."""
    capped = AccountGroupFactory(name="capped", daily_tokens=1000, weekly_tokens=5000, monthly_tokens=-1)
    free = AccountGroupFactory(name="free")
    alice = AccountFactory(email="alice@example.test", group=capped)
    bob = AccountFactory(email="bob@example.test", group=capped)
    carol = AccountFactory(email="carol@example.test", group=free)
    metered_call(account=alice, model="srv/a", input_tokens=100, output_tokens=50, created_at=at(16))
    metered_call(account=alice, model="srv/b", input_tokens=10, output_tokens=5, created_at=at(16))
    metered_call(account=bob, model="srv/a", input_tokens=200, output_tokens=100, created_at=at(17))
    metered_call(account=carol, model="srv/b", input_tokens=1, output_tokens=2, created_at=at(18, 10))
    metered_call(account=alice, model="srv/a", input_tokens=600, output_tokens=300, created_at=at(18, 15))
    return type("World", (), {"capped": capped, "free": free, "alice": alice, "bob": bob, "carol": carol})


def page_text(response) -> str:
    assert response.status_code == 200, response.content[:2000]
    return response.content.decode()


def figure(html: str, element_id: str) -> str:
    return re.search(rf'id="{element_id}">([^<]*)<', html).group(1)


def bars(html: str, chart: int) -> list[tuple[str, int, list[tuple[str, int]]]]:
    """(day, total, [(series, value)]) of each bar of the page's `chart`-th chart."""
    svg = re.findall(r"<svg class=\"usage-bars\".*?</svg>", html, re.S)[chart]
    found = []
    for day, total, inner in re.findall(r'<g class="bar" data-day="([^"]+)" data-total="(\d+)">(.*?)</g>', svg, re.S):
        found.append((day, int(total), [(s, int(v)) for s, v in
                                        re.findall(r'data-series="([^"]+)" data-value="(\d+)"', inner)]))
    return found


def test_it_is_for_staff_who_may_view_usage(client, db):
    assert client.get(URL).status_code == 302  # to the login
    member = AccountFactory(email="member@example.test")
    client.force_login(member)
    response = client.get(URL)
    assert response.status_code == 302 and response.headers["Location"].startswith("/admin/login/")
    client.force_login(AccountFactory(email="staff@example.test", is_staff=True))  # no permission on usage
    assert client.get(URL).status_code == 403
    assert client.get(CSV_URL).status_code == 403
    assert "usage-console-link" not in client.get("/admin/").content.decode()


def test_staff_given_the_permission_to_view_usage_records_may_use_it(client, world):
    from django.contrib.auth.models import Permission

    staff = AccountFactory(email="analyst@example.test", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_usagerecord"))
    client.force_login(staff)
    assert figure(page_text(client.get(URL)), "total-tokens") == "1,368"
    assert client.get(CSV_URL).status_code == 200
    assert "usage-console-link" in client.get("/admin/").content.decode()


def test_it_is_linked_first_on_the_admin_index(client, operator):
    html = page_text(client.get("/admin/"))
    assert f'href="{URL}"' in html
    # at the top of the console's home, above its figures; the sidebar links it too
    assert html.index('id="console-home"') < html.index("usage-console-link") < html.index('id="home-calls"')
    assert html.count(f'href="{URL}"') == 2


def test_it_shows_the_last_30_days_totals_and_stacked_bars_per_day(client, operator, world):
    html = page_text(client.get(URL))
    assert 'value="2026-10-20"' in html and 'value="2026-11-18"' in html  # the default range
    assert figure(html, "total-calls") == "5"
    assert figure(html, "total-input") == "911"
    assert figure(html, "total-output") == "457"
    assert figure(html, "total-tokens") == "1,368"
    tokens, calls = bars(html, 0), bars(html, 1)
    assert tokens == [("2026-11-16", 165, [("srv/a", 150), ("srv/b", 15)]),
                      ("2026-11-17", 300, [("srv/a", 300)]),
                      ("2026-11-18", 903, [("srv/a", 900), ("srv/b", 3)])]
    assert calls == [("2026-11-16", 2, [("srv/a", 1), ("srv/b", 1)]), ("2026-11-17", 1, [("srv/a", 1)]),
                     ("2026-11-18", 2, [("srv/a", 1), ("srv/b", 1)])]
    assert re.findall(r'<li class="series" data-series="([^"]+)"', html) == ["srv/a", "srv/b"]


def test_the_tallest_bar_reaches_the_top_of_the_axis_and_the_segments_stack(client, operator, world):
    html = page_text(client.get(URL))
    svg = re.findall(r"<svg class=\"usage-bars\".*?</svg>", html, re.S)[0]
    rects = [dict(re.findall(r'(\w+)="([^"]*)"', r)) for r in re.findall(r"<rect[^>]*>", svg)]
    last_day = [r for r in rects if float(r["x"]) > 860]  # Nov 18, the last of 30 slots
    a, b = last_day
    assert float(a["y"]) + float(a["height"]) == pytest.approx(216)  # the plot's bottom
    assert float(b["y"]) + float(b["height"]) == pytest.approx(float(a["y"]))  # on top of the first
    assert "1k" in svg  # the axis goes to 1,000 tokens, the tallest bar is 903


def test_it_filters_by_range_group_account_and_model(client, operator, world):
    html = page_text(client.get(URL, {"from": "2026-11-17", "to": "2026-11-18"}))
    assert figure(html, "total-tokens") == "1,203"
    html = page_text(client.get(URL, {"group": world.free.pk}))
    assert figure(html, "total-tokens") == "3" and figure(html, "total-calls") == "1"
    html = page_text(client.get(URL, {"account": "ALICE@example.test"}))
    assert figure(html, "total-tokens") == "1,065"
    assert [b[0] for b in bars(html, 0)] == ["2026-11-16", "2026-11-18"]
    html = page_text(client.get(URL, {"account": str(world.bob.pk), "model": "srv/a"}))
    assert figure(html, "total-tokens") == "300"
    html = page_text(client.get(URL, {"model": "srv/b"}))
    assert figure(html, "total-tokens") == "18"
    assert "?from=2026-10-20&amp;to=2026-11-18&amp;model=srv%2Fb" in html  # the CSV link keeps the filters


@pytest.mark.parametrize("params, message", [
    ({"from": "yesterday"}, "'from' must be a date written YYYY-MM-DD, not 'yesterday'."),
    ({"to": "2026-02-30"}, "'to' must be a date written YYYY-MM-DD, not '2026-02-30'."),
    ({"from": "2026-11-18", "to": "2026-11-01"}, "'from' (2026-11-18) is after 'to' (2026-11-01)."),
    ({"from": "2024-01-01", "to": "2026-11-18"}, "The range is 1053 days long; at most 366 days can be shown at once."),
    ({"to": "9999-12-31"}, "'to' must be before 9999-12-31."),
    ({"group": "x1"}, "There is no account group with id 'x1'."),
    ({"account": "nobody@example.test"},
     "There is no account 'nobody@example.test' (give its e-mail address or its id)."),
    ({"account": "99999999999999999999999"}, "There is no account '99999999999999999999999'"),
    ({"model": "m" * 301}, "'model' is longer than any model id (300 characters)."),
    ({"model": "srv/a\x00"}, "'model' holds control characters, which no model id has."),
    ({"account": "a\x00@example.test"}, "'account' holds control characters: give an e-mail address or an id."),
])
def test_a_filter_that_cannot_be_read_is_a_400_that_says_why(client, operator, params, message):
    for url in (URL, CSV_URL):
        response = client.get(url, params)
        assert response.status_code == 400
        html = response.content.decode()
        errors = re.search(r'<ul class="errorlist" id="filter-errors">(.*?)</ul>', html, re.S).group(1)
        assert message.replace("'", "&#x27;") in errors
        assert "<svg class=\"usage-bars\"" not in html


def test_top_accounts_are_the_biggest_users_of_the_range(client, operator, world):
    html = page_text(client.get(URL, {"account": world.bob.email}))  # a link drops the account filtered on
    table = re.search(r'<table id="top-accounts">.*?</table>', html, re.S).group(0)
    assert re.findall(r'href="([^"]+)"', table) == ["?from=2026-10-20&amp;to=2026-11-18&amp;account=bob%40example.test"]
    html = page_text(client.get(URL))
    table = re.search(r'<table id="top-accounts">.*?</table>', html, re.S).group(0)
    assert re.findall(r'data-account="([^"]+)"', table) == ["alice@example.test", "bob@example.test",
                                                           "carol@example.test"]
    assert 'href="?from=2026-10-20&amp;to=2026-11-18&amp;account=alice%40example.test"' in table  # filters on her
    assert "<td>capped</td><td class=\"num\">3</td><td class=\"num\">710</td><td class=\"num\">355</td>" \
           "<td class=\"num\">1,065</td>" in table


def test_quota_use_counts_the_current_windows_closest_to_a_ceiling_first(client, operator, world):
    # the week began today at 14:00: alice's 15:00 record is in it, carol's 10:00 one is before it
    metered_call(account=world.bob, model="srv/a", input_tokens=4000, output_tokens=0, created_at=at(18, 13))
    html = page_text(client.get(URL, {"from": "2026-11-18", "to": "2026-11-18", "model": "srv/b"}))
    table = re.search(r'<table id="ceilings">.*?</table>', html, re.S).group(0)
    rows = re.findall(r'<tr data-account="([^"]+)">(.*?)</tr>', table, re.S)
    assert [email for email, _ in rows] == ["bob@example.test", "alice@example.test"]  # carol's group: no ceiling
    cells = {email: re.findall(r'data-period="(\w+)">([^<]*)<', row) for email, row in rows}
    assert cells["bob@example.test"] == [("day", "4,000 / 1,000 (400%)"), ("week", "0 / 5,000 (0%)"),
                                         ("month", "4,300 (no ceiling)")]
    assert cells["alice@example.test"] == [("day", "900 / 1,000 (90%)"), ("week", "900 / 5,000 (18%)"),
                                           ("month", "1,065 (no ceiling)")]
    assert 'class="num near-ceiling" data-period="day">900 / 1,000' in table


def test_quota_use_shows_the_account_filtered_on_even_without_use(client, operator, world):
    html = page_text(client.get(URL, {"account": "carol@example.test"}))
    table = re.search(r'<table id="ceilings">.*?</table>', html, re.S).group(0)
    assert re.findall(r'data-period="(\w+)">([^<]*)<', table) == [  # her 10:00 record is before the week
        ("day", "3 (no ceiling)"), ("week", "0 (no ceiling)"), ("month", "3 (no ceiling)")]
    newcomer = AccountFactory(email="new@example.test", group=world.capped)
    html = page_text(client.get(URL, {"account": newcomer.pk}))
    table = re.search(r'<table id="ceilings">.*?</table>', html, re.S).group(0)
    assert re.findall(r'data-period="(\w+)">([^<]*)<', table) == [
        ("day", "0 / 1,000 (0%)"), ("week", "0 / 5,000 (0%)"), ("month", "0 (no ceiling)")]


def test_the_page_runs_the_same_queries_for_five_records_or_many(client, operator, world, django_assert_num_queries):
    # the session, the operator; groups, rows per day and model, calls per day and model (the calls log),
    # failures, cache hits, batch lines, top accounts and their calls, quota and budget use (2), account names;
    # the models' prices, per group and its calls
    with django_assert_num_queries(16):
        page_text(client.get(URL))
    groups = [AccountGroupFactory(name=f"g{i}", daily_tokens=10**6) for i in range(3)]
    accounts = [AccountFactory(group=groups[i % 3]) for i in range(12)]
    UsageRecord.objects.bulk_create([
        UsageRecord(account=accounts[i % 12], model=f"srv/m{i % 9}", surface="chat_completions", input_tokens=i,
                    output_tokens=1, created_at=NOW - timedelta(hours=i * 3)) for i in range(400)])
    CallRecord.objects.bulk_create([
        CallRecordFactory.build(key=f"bulk-{i}", account=accounts[i % 12], group=accounts[i % 12].group,
                                model=f"srv/m{i % 9}", created_at=NOW - timedelta(hours=i * 3)) for i in range(400)])
    call_failures.count(model="srv/m1", kind=call_failures.FELL_THROUGH)
    call_failures.flush()
    with django_assert_num_queries(16):
        html = page_text(client.get(URL))
    in_range = sum(1 for i in range(400) if NOW - timedelta(hours=i * 3) >= datetime(2026, 10, 20, tzinfo=timezone.utc))
    assert figure(html, "total-calls") == str(in_range + 5)
    with django_assert_num_queries(17):  # and the account looked up
        page_text(client.get(URL, {"account": world.alice.email, "group": world.capped.pk, "model": "srv/a"}))


def test_the_roll_up_follows_every_write_of_the_records(db, world):
    def rolled(account):
        return sorted(UsageDaily.objects.filter(account=account).values_list("day", "model", "calls", "input_tokens",
                                                                             "output_tokens"))

    row = ("k-1", world.carol.pk, "srv/c", "chat_completions", 7, 3, "req", at(17, 23))
    insert_rows([row, ("k-2", *row[1:])])
    insert_rows([row])  # the usage drainer's replay: already there, not counted again
    assert rolled(world.carol) == [(at(17).date(), "srv/c", 2, 14, 6), (at(18).date(), "srv/b", 1, 1, 2)]
    UsageRecord.objects.filter(key="k-2").update(model="srv/d", created_at=at(18, 1))
    assert rolled(world.carol) == [(at(17).date(), "srv/c", 1, 7, 3), (at(18).date(), "srv/b", 1, 1, 2),
                                       (at(18).date(), "srv/d", 1, 7, 3)]
    UsageRecord.objects.filter(key__in=["k-1", "k-2"]).delete()
    assert rolled(world.carol) == [(at(18).date(), "srv/b", 1, 1, 2)]
    world.carol.delete()
    assert not UsageDaily.objects.filter(account_id=world.carol.pk).exists()
    assert UsageDaily.objects.aggregate(n=Sum("calls"))["n"] == 4  # alice's and bob's


def test_failed_model_calls_are_counted_per_model_and_day(client, operator, upstream, closed_port,  # noqa: F811
                                                          redis_url):
    dead = ModelServerFactory(name="dead", base_url=f"http://127.0.0.1:{closed_port}/v1")
    ModelFactory(server=dead, name="m")
    live = ModelServerFactory(name="live", base_url=f"{upstream.url}/v1")
    ModelFactory(server=live, name="m")
    reg = registry()
    dead_m, live_m = reg.by_public_id["dead/m"], reg.by_public_id["live/m"]
    body = {"messages": [{"role": "user", "content": "hi"}]}

    async def calls():
        await open_reply([dead_m, live_m], body, refusals_fall_through=False)  # dead falls through, live answers
        with pytest.raises(ChainExhausted):
            await open_reply([dead_m], body, refusals_fall_through=False)  # nothing left
        upstream.configure(fail_status=400)
        with pytest.raises(ApiError) as refused:
            await open_reply([live_m], body, refusals_fall_through=False)  # refused, answered at once
        assert refused.value.status == 400

    asyncio.run(calls())
    assert CallFailureDaily.objects.count() == 0  # nothing written on the call's path
    assert call_failures.flush()
    assert sorted(CallFailureDaily.objects.values_list("day", "model", "kind", "count")) == [
        (NOW.date(), "dead/m", "chain_failed", 1), (NOW.date(), "dead/m", "fell_through", 1),
        (NOW.date(), "live/m", "refused", 1)]
    call_failures.count(model="dead/m", kind=call_failures.FELL_THROUGH)
    call_failures.flush()
    html = page_text(client.get(URL))
    assert figure(html, "total-fell-through") == "2" and figure(html, "total-chain-failed") == "1"
    table = re.search(r'<table id="failures">.*?</table>', html, re.S).group(0)
    assert '<tr data-model="dead/m"><td>dead/m</td><td class="num">2</td><td class="num">1</td>' \
           '<td class="num">0</td></tr>' in table
    html = page_text(client.get(URL, {"model": "live/m"}))
    assert figure(html, "total-fell-through") == "0"
    assert '<option value="dead/m">dead/m</option>' in html  # a model that only failed can be chosen


@pytest.mark.django_db(transaction=True)
def test_a_process_writes_its_failure_counts_a_moment_later_from_a_thread(settings, monkeypatch):
    monkeypatch.setattr(write_behind, "background", True)  # as in a server process
    settings.USAGE_FLUSH_SECONDS = 0.05
    for _ in range(3):
        call_failures.count(model="x/m", kind=call_failures.FELL_THROUGH)
    assert not CallFailureDaily.objects.exists()  # not on the caller's path
    deadline = time.monotonic() + 5
    while not CallFailureDaily.objects.filter(model="x/m", count=3).exists():
        assert time.monotonic() < deadline, "the counts were not written"
        time.sleep(0.02)
    wait_for_quiet_database()


def test_failure_counts_wait_for_the_database_when_it_refuses(db, monkeypatch):
    call_failures.count(model="x/m", kind=call_failures.CHAIN_FAILED)

    def refuse(counts):
        raise RuntimeError("database down")

    monkeypatch.setattr(call_failures, "_write", refuse)
    assert call_failures.flush() is False
    monkeypatch.undo()
    assert call_failures.flush() is True
    assert CallFailureDaily.objects.get(model="x/m").count == 1


def read_csv(content: bytes) -> list[dict]:
    return list(csv.DictReader(io.StringIO(content.decode())))


def test_the_csv_export_streams_the_filtered_records(client, operator, world):
    metered_call(account=world.alice, model="srv/a", created_at=at(1), request_id="=HYPERLINK(1)")
    response = client.get(CSV_URL, {"account": world.alice.email, "model": "srv/a", "from": "2026-11-16"})
    assert response.status_code == 200 and response.streaming
    assert response.headers["Content-Type"] == "text/csv; charset=utf-8"
    assert response.headers["Content-Disposition"] == 'attachment; filename="usage_2026-11-16_2026-11-18.csv"'
    rows = read_csv(b"".join(response.streaming_content))
    assert rows == [
        {"created_at": "2026-11-16T12:00:00.000000Z", "account": "alice@example.test", "group": "capped",
         "model": "srv/a", "surface": "chat_completions", "input_tokens": "100", "output_tokens": "50",
         "total_tokens": "150", "request_id": "", "cost": "0.000000", "cached_input_tokens": "0",
         "cached": "false", "tags": "", "cache_write_input_tokens": "0", "batch_id": ""},
        {"created_at": "2026-11-18T15:00:00.000000Z", "account": "alice@example.test", "group": "capped",
         "model": "srv/a", "surface": "chat_completions", "input_tokens": "600", "output_tokens": "300",
         "total_tokens": "900", "request_id": "", "cost": "0.000000", "cached_input_tokens": "0",
         "cached": "false", "tags": "", "cache_write_input_tokens": "0", "batch_id": ""}]
    rows = read_csv(b"".join(client.get(CSV_URL, {"from": "2026-11-01"}).streaming_content))
    assert len(rows) == 6 and rows[0]["request_id"] == "'=HYPERLINK(1)"  # not a formula in a spreadsheet


def test_the_csv_export_goes_chunk_by_chunk_in_order(client, operator, world, monkeypatch):
    monkeypatch.setattr(usage_console_views, "CSV_CHUNK", 2)
    same_time = at(17, 6)
    for i in range(4):  # 9 records in all: chunks of 2, 2, 2, 2 and 1
        metered_call(account=world.carol, created_at=same_time, input_tokens=i)
    expected = sorted(UsageRecord.objects.all(), key=lambda r: (r.created_at, r.pk))
    with CaptureQueriesContext(connection) as queries:
        rows = read_csv(b"".join(client.get(CSV_URL).streaming_content))
    assert [(r["created_at"], r["account"], r["input_tokens"]) for r in rows] == [
        (timestamp(r.created_at), r.account.email, str(r.input_tokens)) for r in expected]
    assert len([q for q in queries if "gateway_usagerecord" in q["sql"]]) == 5


@pytest.mark.django_db(transaction=True)
def test_the_csv_export_streams_asynchronously_under_asgi(world):
    operator = AccountFactory(email="op@example.test", is_staff=True, is_superuser=True)

    async def download():
        client = AsyncClient()
        await client.aforce_login(operator)
        response = await client.get(CSV_URL, {"group": world.capped.pk})
        assert response.status_code == 200
        assert response.is_async
        content = b"".join([part async for part in response.streaming_content])
        # what the server does when the response is closed; the test client leaves it undone
        await sync_to_async(connections.close_all)()
        return content

    rows = read_csv(asyncio.run(download()))
    assert [r["account"] for r in rows] == ["alice@example.test", "alice@example.test", "bob@example.test",
                                            "alice@example.test"]

