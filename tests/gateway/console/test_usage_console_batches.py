"""Batch lines in the usage console: beside the totals, the batch lines' calls and their spend at the batch
price, and per model; the batch filter (`batch=only`: the batch lines alone, `batch=none`: the live calls
alone) takes every usage figure from the records that pass it, the calls counted from the records too (the
calls log does not tell a batch line apart), under the other filters; the CSV export has each record's batch
and takes the filter."""

import csv
import io
import re
from datetime import datetime, timezone

import pytest
import time_machine

from tests.factories import AccountFactory, AccountGroupFactory, CallRecordFactory, metered_call

URL = "/admin/gateway/usagerecord/console/"
CSV_URL = "/admin/gateway/usagerecord/console/csv/"
NOW = datetime(2026, 11, 18, 16, 0, tzinfo=timezone.utc)
B1, B2 = "batch_" + "1" * 24, "msgbatch_" + "2" * 24


def at(day: int, hour: int = 12) -> datetime:
    return datetime(2026, 11, day, hour, 0, tzinfo=timezone.utc)


@pytest.fixture(autouse=True)
def _now():
    with time_machine.travel(NOW, tick=False):
        yield


@pytest.fixture
def operator(client, db):
    client.force_login(AccountFactory(email="op@example.test", is_staff=True, is_superuser=True))


@pytest.fixture
def world(db):
    """alice (team) calls live and in a batch; bob (free) in another batch (one line answered from the response
    cache) and live; a failed live call; a batch line of September, out of the range."""
    team, free = AccountGroupFactory(name="team"), AccountGroupFactory(name="free")
    alice = AccountFactory(email="alice@example.test", group=team)
    bob = AccountFactory(email="bob@example.test", group=free)
    metered_call(account=alice, model="srv/a", input_tokens=100, output_tokens=50, cost_units=1_000,
                 created_at=at(16), request_id="live-1")
    metered_call(account=alice, model="srv/a", input_tokens=200, output_tokens=100, cost_units=500,
                 created_at=at(17), batch_id=B1, key="batch-line-1", request_id="line-1")
    metered_call(account=bob, model="srv/b", input_tokens=10, output_tokens=5, cost_units=30, created_at=at(18, 10),
                 batch_id=B2, key="batch-line-2", request_id="line-2")
    metered_call(account=bob, model="srv/b", input_tokens=4, output_tokens=4, created_at=at(18, 11), cached=True,
                 batch_id=B2, key="batch-line-3", request_id="line-3")
    metered_call(account=bob, model="srv/b", input_tokens=1, output_tokens=2, cost_units=7, created_at=at(18, 12),
                 request_id="live-2")
    metered_call(account=bob, model="srv/b", input_tokens=9, output_tokens=9, cost_units=99,
                 created_at=datetime(2026, 9, 1, tzinfo=timezone.utc), batch_id=B2, key="batch-line-4")
    CallRecordFactory(account=alice, model="", created_at=at(17, 13), status=502, outcome="failed")
    return type("World", (), {"team": team, "free": free, "alice": alice, "bob": bob})


def page(client, **params) -> str:
    response = client.get(URL, params)
    assert response.status_code == 200, response.content[:2000]
    return response.content.decode()


def figure(html: str, element_id: str) -> str:
    return re.search(rf'id="{element_id}">([^<]*)<', html).group(1)


def totals(html: str) -> list[str]:
    return [figure(html, name) for name in ("total-calls", "total-failed", "total-input", "total-output",
                                            "total-spend", "total-cache-hits")]


def table_rows(html: str, table_id: str, key: str) -> dict[str, list[str]]:
    table = re.search(rf'<table id="{table_id}">.*?</table>', html, re.S).group(0)
    return {name: re.findall(r"<td[^>]*>(?:<a [^>]*>)?([^<]*)", row)
            for name, row in re.findall(rf'<tr data-{key}="([^"]*)">(.*?)</tr>', table, re.S)}


def test_beside_the_totals_the_batch_lines_and_their_spend(client, operator, world):
    html = page(client)
    assert totals(html) == ["6", "1", "315", "161", "0.0000001537", "1"]  # calls: the calls log's, with the failed
    assert (figure(html, "total-batch-calls"), figure(html, "total-batch-spend")) == ("3", "0.000000053")
    assert table_rows(html, "batch-lines", "model") == {
        "srv/a": ["srv/a", "1", "200", "100", "300", "0.00000005"],
        "srv/b": ["srv/b", "2", "14", "9", "23", "0.000000003"]}
    assert 'id="batch-filtered"' not in html
    assert '<option value="" selected>Live and batch</option>' in html
    # the other filters apply to the batch figures too
    html = page(client, account=world.bob.email)
    assert (figure(html, "total-batch-calls"), figure(html, "total-batch-spend")) == ("2", "0.000000003")
    html = page(client, model="srv/a")
    assert (figure(html, "total-batch-calls"), figure(html, "total-batch-spend")) == ("1", "0.00000005")
    html = page(client, **{"from": "2026-09-01", "to": "2026-09-01"})
    assert (figure(html, "total-batch-calls"), figure(html, "total-batch-spend")) == ("1", "0.0000000099")


def test_batch_only_shows_the_batch_lines_numbers_alone(client, operator, world):
    html = page(client, batch="only")
    assert totals(html) == ["3", "&mdash;", "214", "109", "0.000000053", "1"]  # calls: the records'
    assert (figure(html, "total-batch-calls"), figure(html, "total-batch-spend")) == ("3", "0.000000053")
    assert {day: cells[:3] for day, cells in table_rows(html, "usage-per-day", "day").items()} == {
        "2026-11-17": ["2026-11-17", "1", "&mdash;"], "2026-11-18": ["2026-11-18", "2", "&mdash;"]}
    assert {model: cells[1:7] for model, cells in table_rows(html, "per-model", "model").items()} == {
        "srv/a": ["1", "&mdash;", "200", "100", "300", "0.00000005"],
        "srv/b": ["2", "&mdash;", "14", "9", "23", "0.000000003"]}
    assert {email: cells[2:] for email, cells in table_rows(html, "top-accounts", "account").items()} == {
        "alice@example.test": ["1", "200", "100", "300", "0.00000005"],
        "bob@example.test": ["2", "14", "9", "23", "0.000000003"]}
    assert {name: cells[1:] for name, cells in table_rows(html, "per-group", "group").items()} == {
        "team": ["1", "200", "100", "300", "0.00000005"], "free": ["2", "14", "9", "23", "0.000000003"]}
    assert table_rows(html, "cache-hits", "model") == {"srv/b": ["srv/b", "1", "4", "4", "8"]}
    assert '<span id="batch-filtered">batch lines only</span>' in html
    assert '<option value="only" selected>Batch lines only</option>' in html
    assert f'href="{CSV_URL}?from=2026-10-20&amp;to=2026-11-18&amp;batch=only"' in html  # the export keeps it
    assert 'id="total-calls" href' not in html  # not a link: the Calls list does not tell batch lines apart


def test_live_only_leaves_every_batch_line_out(client, operator, world):
    html = page(client, batch="none")
    assert totals(html) == ["2", "&mdash;", "101", "52", "0.0000001007", "0"]
    assert {model: cells[1:7] for model, cells in table_rows(html, "per-model", "model").items()} == {
        "srv/a": ["1", "&mdash;", "100", "50", "150", "0.0000001"],
        "srv/b": ["1", "&mdash;", "1", "2", "3", "0.0000000007"]}
    assert {email: cells[2] for email, cells in table_rows(html, "top-accounts", "account").items()} == {
        "alice@example.test": "1", "bob@example.test": "1"}
    assert table_rows(html, "cache-hits", "model") == {}
    assert 'id="total-batch-calls"' not in html and 'id="batch-lines"' not in html
    assert '<span id="batch-filtered">live calls only</span>' in html


@pytest.mark.parametrize("params, calls, tokens, spend", [
    ({"batch": "only", "account": "alice@example.test"}, "1", "300", "0.00000005"),
    ({"batch": "only", "group": "free"}, "2", "23", "0.000000003"),
    ({"batch": "only", "model": "srv/b"}, "2", "23", "0.000000003"),
    ({"batch": "only", "from": "2026-09-01", "to": "2026-09-01"}, "1", "18", "0.0000000099"),
    ({"batch": "none", "group": "free"}, "1", "3", "0.0000000007"),
    ({"batch": "none", "from": "2026-09-01", "to": "2026-09-01"}, "0", "0", "0.00"),
    ({"batch": "only", "tag": "app=x"}, "0", "0", "0.00"),
])
def test_the_batch_filter_goes_with_the_other_filters(client, operator, world, params, calls, tokens, spend):
    if params.get("group") == "free":
        params = {**params, "group": world.free.pk}
    html = page(client, **params)
    assert (figure(html, "total-calls"), figure(html, "total-tokens"), figure(html, "total-spend")) == (
        calls, tokens, spend)


def test_a_batch_filter_that_cannot_be_read_is_a_400_that_says_why(client, operator, world):
    for url in (URL, CSV_URL):
        response = client.get(url, {"batch": "yes"})
        assert response.status_code == 400
        errors = re.search(r'<ul class="errorlist" id="filter-errors">(.*?)</ul>', response.content.decode(),
                           re.S).group(1)
        assert errors == ("<li>&#x27;batch&#x27; must be only (batch lines only) or none (live calls only), or "
                          "empty for both, not &#x27;yes&#x27;.</li>")


def read_csv(response) -> list[dict]:
    assert response.status_code == 200
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))


def test_the_csv_export_has_each_records_batch_and_takes_the_filter(client, operator, world):
    rows = read_csv(client.get(CSV_URL))
    assert [(r["request_id"], r["batch_id"]) for r in rows] == [
        ("live-1", ""), ("line-1", B1), ("line-2", B2), ("line-3", B2), ("live-2", "")]
    assert [r["request_id"] for r in read_csv(client.get(CSV_URL, {"batch": "only"}))] == [
        "line-1", "line-2", "line-3"]
    assert [r["request_id"] for r in read_csv(client.get(CSV_URL, {"batch": "none", "account": "bob@example.test"}))] \
        == ["live-2"]


def test_the_page_runs_a_fixed_number_of_queries_with_the_batch_filter(client, operator, world,
                                                                      django_assert_num_queries):
    # both: 16, as without (tests/gateway/console/test_usage_console.py); batch lines only: the calls are the
    # records' (no calls log: three fewer); live calls only: no batch lines to read either
    for params, queries in (({}, 16), ({"batch": "only"}, 13), ({"batch": "none"}, 12)):
        with django_assert_num_queries(queries):
            page(client, **params)
    for i in range(30):
        metered_call(account=world.bob, model=f"srv/m{i % 4}", created_at=at(17, i % 24), batch_id=B2,
                     key=f"more-{i}")
    for params, queries in (({}, 16), ({"batch": "only"}, 13), ({"batch": "none"}, 12)):
        with django_assert_num_queries(queries):
            page(client, **params)
