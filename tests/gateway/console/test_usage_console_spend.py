"""Money in the usage console: spend beside tokens (the totals, per day, model, account and group,
the CSV export), exact to the last COST_UNIT; the models without a price say so; the panel of the
accounts closest to a budget in the current windows, own budgets over their group's."""

import csv
import io
import re
from datetime import datetime, timedelta, timezone

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.factories import (
    AccountFactory,
    AccountGroupFactory,
    ModelFactory,
    ModelServerFactory,
    metered_call,
)

URL = "/admin/gateway/usagerecord/console/"
CSV_URL = "/admin/gateway/usagerecord/console/csv/"
NOW = datetime(2026, 11, 18, 16, 0, tzinfo=timezone.utc)  # a Wednesday: the week began at 14:00 today
UNITS = 10**10  # COST_UNITS per unit of the currency


def at(day: int, hour: int = 12) -> datetime:
    return datetime(2026, 11, day, hour, 0, tzinfo=timezone.utc)


def usd(text: str) -> int:
    """An amount written as a decimal, in COST_UNITS."""
    whole, _, part = text.partition(".")
    return int(whole) * UNITS + int((part + "0" * 10)[:10])


@pytest.fixture(autouse=True)
def _now():
    with time_machine.travel(NOW, tick=False):
        yield


@pytest.fixture
def operator(client, db):
    client.force_login(AccountFactory(email="op@example.test", is_staff=True, is_superuser=True))


@pytest.fixture
def world(db):
    """team: budgets of 1 a day and 5 a week (no month's); bob has his own day's of 0.5, dave none
    for the day; carol's group has none, she has her own month's of 2; erin has none at all."""
    srv = ModelServerFactory(name="srv")
    ModelFactory(server=srv, name="a", input_price="0.15", cached_input_price="0.075", cache_write_price="0.1875",
                 output_price="0.6")
    ModelFactory(server=srv, name="b")  # no price
    team = AccountGroupFactory(name="team", daily_budget=1, weekly_budget=5)
    free = AccountGroupFactory(name="free")
    alice = AccountFactory(email="alice@example.test", group=team)
    bob = AccountFactory(email="bob@example.test", group=team, daily_budget="0.5")
    carol = AccountFactory(email="carol@example.test", group=free, monthly_budget=2)
    dave = AccountFactory(email="dave@example.test", group=team, daily_budget=-1)
    erin = AccountFactory(email="erin@example.test", group=free)
    record = metered_call
    record(account=alice, model="srv/a", input_tokens=100, output_tokens=10, cost_units=usd("0.9"),
           cache_write_input_tokens=40, created_at=at(18, 15))
    record(account=alice, model="srv/a", input_tokens=50, output_tokens=5, cost_units=usd("0.3"), created_at=at(16))
    record(account=bob, model="srv/b", input_tokens=10, output_tokens=1, cost_units=usd("0.4"),
           created_at=at(18, 10))  # before the week began
    record(account=carol, model="srv/b", input_tokens=20, output_tokens=2, cost_units=usd("1.5"), created_at=at(17))
    record(account=dave, model="srv/a", input_tokens=1, output_tokens=1, cost_units=25, cached_input_tokens=1,
           created_at=at(18, 15))
    record(account=erin, model="gone/x", input_tokens=5, output_tokens=5, cost_units=usd("0.05"),
           created_at=at(17), cached=True)
    return type("World", (), {"team": team, "free": free, "alice": alice, "bob": bob, "carol": carol,
                              "dave": dave, "erin": erin})


def page(client, **params) -> str:
    response = client.get(URL, params)
    assert response.status_code == 200, response.content[:2000]
    return response.content.decode()


def figure(html: str, element_id: str) -> str:
    return re.search(rf'id="{element_id}">([^<]*)<', html).group(1)


def table_rows(html: str, table_id: str, key: str) -> dict[str, list[str]]:
    """The cells of each row of a table, by the row's data-`key`."""
    table = re.search(rf'<table id="{table_id}">.*?</table>', html, re.S).group(0)
    return {name: re.findall(r"<td[^>]*>(?:<a [^>]*>)?([^<]*)", row)
            for name, row in re.findall(rf'<tr data-{key}="([^"]*)">(.*?)</tr>', table, re.S)}


def test_the_totals_show_the_exact_spend_of_the_range(client, operator, world):
    html = page(client)
    assert "Spend (USD)" in html
    assert figure(html, "total-spend") == "3.1500000025"  # 0.9 + 0.3 + 0.4 + 1.5 + 25 units + 0.05
    assert figure(page(client, **{"from": "2026-11-17", "to": "2026-11-17"}), "total-spend") == "1.55"
    assert figure(page(client, model="srv/a"), "total-spend") == "1.2000000025"


def test_the_spend_is_shown_per_day_model_account_and_group(client, operator, world):
    html = page(client)
    per_day = table_rows(html, "usage-per-day", "day")
    assert {day: cells[-1] for day, cells in per_day.items()} == {
        "2026-11-16": "0.30", "2026-11-17": "1.55", "2026-11-18": "1.3000000025"}
    per_model = table_rows(html, "per-model", "model")
    assert list(per_model) == ["srv/b", "srv/a", "gone/x"]  # most spent first
    assert per_model["srv/a"] == ["srv/a", "3", "0", "151", "16", "167", "1.2000000025",
                                  "in 0.15 · cached 0.075 · write 0.1875 · out 0.6 USD"]
    assert per_model["srv/b"][-2:] == ["1.90", "no price"]
    assert per_model["gone/x"][-2:] == ["0.05", "no longer configured"]
    top = table_rows(html, "top-accounts", "account")
    assert {email: cells[-1] for email, cells in top.items()} == {
        "alice@example.test": "1.20", "bob@example.test": "0.40", "carol@example.test": "1.50",
        "dave@example.test": "0.0000000025", "erin@example.test": "0.05"}
    per_group = table_rows(html, "per-group", "group")
    assert per_group == {"team": ["team", "4", "161", "17", "178", "1.6000000025"],
                         "free": ["free", "2", "25", "7", "32", "1.55"]}
    assert list(per_group) == ["team", "free"]
    assert table_rows(page(client, group=world.free.pk), "per-group", "group") == {
        "free": ["free", "2", "25", "7", "32", "1.55"]}


def test_a_model_without_a_price_says_so_in_the_legend(client, operator, world):
    legend = re.search(r'<ul class="usage-legend".*?</ul>', page(client), re.S).group(0)
    items = dict(re.findall(r'data-series="([^"]+)"><span class="swatch"[^>]*></span>(.*?)</li>', legend))
    no_price = '<span class="no-price">(no price)</span>'
    assert items == {"srv/a": "srv/a", "srv/b": f"srv/b {no_price}",
                     "gone/x": f"gone/x {no_price}"}  # no longer configured: no price now (its calls had one)


def read_csv(content: bytes) -> list[dict]:
    return list(csv.DictReader(io.StringIO(content.decode())))


def test_the_csv_export_has_the_exact_cost_and_the_cached_columns(client, operator, world):
    rows = read_csv(b"".join(client.get(CSV_URL).streaming_content))
    assert list(rows[0])[-7:] == ["request_id", "cost", "cached_input_tokens", "cached", "tags",
                                  "cache_write_input_tokens", "batch_id"]
    assert [(r["account"], r["cost"], r["cached_input_tokens"], r["cached"], r["cache_write_input_tokens"])
            for r in rows] == [
        ("alice@example.test", "0.300000", "0", "false", "0"),
        ("carol@example.test", "1.500000", "0", "false", "0"),
        ("erin@example.test", "0.050000", "0", "true", "0"),
        ("bob@example.test", "0.400000", "0", "false", "0"),
        ("alice@example.test", "0.900000", "0", "false", "40"),
        ("dave@example.test", "0.0000000025", "1", "false", "0")]


def budget_rows(html: str) -> dict[str, list[tuple[str, str]]]:
    table = re.search(r'<table id="budgets">.*?</table>', html, re.S).group(0)
    return {email: re.findall(r'data-period="(\w+)">([^<]*)<', row)
            for email, row in re.findall(r'<tr data-account="([^"]+)">(.*?)</tr>', table, re.S)}


def test_the_accounts_closest_to_a_budget_come_first(client, operator, world):
    html = page(client, model="srv/b", **{"from": "2026-11-01", "to": "2026-11-01"})  # neither applies
    rows = budget_rows(html)
    assert list(rows) == ["alice@example.test", "bob@example.test", "carol@example.test", "dave@example.test"]
    assert rows == {  # erin: no budget of her own nor of her group
        "alice@example.test": [("day", "0.90 / 1.00 (90%)"), ("week", "0.90 / 5.00 (18%)"),
                               ("month", "1.20 (no budget)")],
        "bob@example.test": [("day", "0.40 / 0.50 (80%)"), ("week", "0.00 / 5.00 (0%)"),  # before 14:00
                             ("month", "0.40 (no budget)")],
        "carol@example.test": [("day", "0.00 (no budget)"), ("week", "0.00 (no budget)"),
                               ("month", "1.50 / 2.00 (75%)")],
        "dave@example.test": [("day", "0.0000000025 (no budget)"), ("week", "0.0000000025 / 5.00 (0%)"),
                              ("month", "0.0000000025 (no budget)")]}
    assert 'class="num near-ceiling" data-period="day">0.90 / 1.00 (90%)' in html
    assert 'class="num" data-period="day">0.40 / 0.50 (80%)' in html


def test_a_budget_of_zero_is_reached_and_a_group_filter_applies(client, operator, world):
    world.carol.monthly_budget = 0
    world.carol.save()
    assert list(budget_rows(page(client))) == ["carol@example.test", "alice@example.test", "bob@example.test",
                                               "dave@example.test"]
    assert budget_rows(page(client, group=world.free.pk)) == {
        "carol@example.test": [("day", "0.00 (no budget)"), ("week", "0.00 (no budget)"),
                               ("month", "1.50 / 0.00 (100%)")]}


def test_the_account_filtered_on_is_shown_with_or_without_a_budget(client, operator, world):
    assert budget_rows(page(client, account=world.erin.email)) == {
        "erin@example.test": [("day", "0.00 (no budget)"), ("week", "0.00 (no budget)"),
                              ("month", "0.05 (no budget)")]}
    newcomer = AccountFactory(email="new@example.test", group=world.team, weekly_budget="7.25")
    assert budget_rows(page(client, account=newcomer.pk)) == {
        "new@example.test": [("day", "0.00 / 1.00 (0%)"), ("week", "0.00 / 7.25 (0%)"),
                             ("month", "0.00 (no budget)")]}


def test_without_spend_the_panel_says_so(client, operator, db):
    html = page(client)
    assert budget_rows(html) == {}
    assert "No account with a budget spent anything in the current windows." in html
    assert figure(html, "total-spend") == "0.00"


def test_the_panel_shows_the_ten_closest_in_the_same_queries_however_many(client, operator, world):
    with CaptureQueriesContext(connection) as few:
        page(client)
    group = AccountGroupFactory(name="many", monthly_budget=100)
    for i in range(15):
        metered_call(account=AccountFactory(email=f"m{i:02}@example.test", group=group), model="srv/a",
                           cost_units=usd(str(i + 1)), created_at=NOW - timedelta(hours=1))
    with CaptureQueriesContext(connection) as many:
        html = page(client)
    assert len(many) == len(few)
    rows = budget_rows(html)
    assert list(rows) == ["alice@example.test", "bob@example.test", "carol@example.test",
                          *(f"m{i:02}@example.test" for i in range(14, 7, -1))]
    assert rows["m14@example.test"][2] == ("month", "15.00 / 100.00 (15%)")
    assert "10 of 19 accounts shown." in html
