"""The usage console filtered by a call's tag (`tag=key=value`: OpenAI's `metadata`, kept on the call's usage
records): every figure of the range comes from the records that have it, in the same queries; the CSV export
has the tags in its last column and takes the same filter."""

import csv
import io
import re
from datetime import datetime, timezone

import pytest
import time_machine

from tests.factories import AccountFactory, AccountGroupFactory, metered_call

URL = "/admin/gateway/usagerecord/console/"
CSV_URL = "/admin/gateway/usagerecord/console/csv/"
NOW = datetime(2026, 11, 18, 16, 0, tzinfo=timezone.utc)
BILLING = {"app": "billing"}


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
    """Calls of two apps (and some without tags) by three accounts of two groups, over three days."""
    team, free = AccountGroupFactory(name="team"), AccountGroupFactory(name="free")
    alice = AccountFactory(email="alice@example.test", group=team)
    bob = AccountFactory(email="bob@example.test", group=team)
    carol = AccountFactory(email="carol@example.test", group=free)
    record = metered_call
    record(account=alice, model="srv/a", input_tokens=100, output_tokens=50, cost_units=7, created_at=at(16),
           tags=BILLING, request_id="r1")
    record(account=alice, model="srv/b", input_tokens=10, output_tokens=5, created_at=at(16),
           tags={"app": "search"}, request_id="r2")
    record(account=bob, model="srv/a", input_tokens=200, output_tokens=100, cost_units=11, created_at=at(17, 23),
           tags={"app": "billing", "team": "ops"}, request_id="r3")
    record(account=carol, model="srv/b", input_tokens=1, output_tokens=2, created_at=at(18, 10), request_id="r4")
    record(account=carol, model="srv/b", input_tokens=4, output_tokens=4, created_at=at(18, 11), cached=True,
           tags=BILLING, request_id="r5")
    record(account=bob, model="srv/a", input_tokens=9, output_tokens=9, created_at=datetime(2026, 9, 1,
           tzinfo=timezone.utc), tags=BILLING, request_id="r6")  # out of the range
    return type("World", (), {"team": team, "free": free, "alice": alice, "bob": bob, "carol": carol})


def page(client, **params) -> str:
    response = client.get(URL, params)
    assert response.status_code == 200, response.content[:2000]
    return response.content.decode()


def figure(html: str, element_id: str) -> str:
    return re.search(rf'id="{element_id}">([^<]*)<', html).group(1)


def table_rows(html: str, table_id: str, key: str) -> dict[str, list[str]]:
    table = re.search(rf'<table id="{table_id}">.*?</table>', html, re.S).group(0)
    return {name: re.findall(r"<td[^>]*>(?:<a [^>]*>)?([^<]*)", row)
            for name, row in re.findall(rf'<tr data-{key}="([^"]*)">(.*?)</tr>', table, re.S)}


def read_csv(response) -> list[dict]:
    assert response.status_code == 200
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))


def test_the_figures_of_a_tag_come_from_the_calls_that_have_it(client, operator, world):
    html = page(client, tag="app=billing")
    totals = [figure(html, name) for name in ("total-calls", "total-input", "total-output", "total-tokens",
                                              "total-spend", "total-cache-hits", "total-cache-tokens")]
    assert totals == ["3", "304", "154", "458", "0.0000000018", "1", "8"]
    assert {day: cells[1] for day, cells in table_rows(html, "usage-per-day", "day").items()} == {
        "2026-11-16": "1", "2026-11-17": "1", "2026-11-18": "1"}  # 23:00 on the 17th is the 17th (UTC)
    assert {model: cells[1:6] for model, cells in table_rows(html, "per-model", "model").items()} == {
        "srv/a": ["2", "0", "300", "150", "450"], "srv/b": ["1", "0", "4", "4", "8"]}  # calls, failed, tokens
    assert {email: cells[2] for email, cells in table_rows(html, "top-accounts", "account").items()} == {
        "bob@example.test": "1", "alice@example.test": "1", "carol@example.test": "1"}
    assert {name: cells[1] for name, cells in table_rows(html, "per-group", "group").items()} == {
        "team": "2", "free": "1"}
    assert table_rows(html, "cache-hits", "model") == {"srv/b": ["srv/b", "1", "4", "4", "8"]}
    assert '<span id="tag-filtered">app=billing</span>' in html and 'value="app=billing"' in html
    # the CSV link and the top accounts' links keep the tag
    assert "?from=2026-10-20&amp;to=2026-11-18&amp;tag=app%3Dbilling" in html


@pytest.mark.parametrize("params, calls, tokens", [
    ({"tag": "app=search"}, "1", "15"),
    ({"tag": "team=ops"}, "1", "300"),
    ({"tag": "app=billing", "account": "alice@example.test"}, "1", "150"),
    ({"tag": "app=billing", "group": "free"}, "1", "8"),
    ({"tag": "app=billing", "model": "srv/a"}, "2", "450"),
    ({"tag": "app=billing", "from": "2026-09-01", "to": "2026-09-01"}, "1", "18"),
    ({"tag": "app=bill"}, "0", "0"),  # exact, not a part
    ({"tag": "app=Billing"}, "0", "0"),
    ({"tag": "team=billing"}, "0", "0"),
    ({}, "5", "476"),  # no tag: every call, from the roll-up
])
def test_the_tag_goes_with_the_other_filters(client, operator, world, params, calls, tokens):
    if params.get("group") == "free":
        params = {**params, "group": world.free.pk}
    html = page(client, **params)
    assert (figure(html, "total-calls"), figure(html, "total-tokens")) == (calls, tokens)


def test_the_page_runs_the_same_queries_with_a_tag(client, operator, world, django_assert_num_queries):
    with django_assert_num_queries(16):
        page(client)
    with django_assert_num_queries(16):
        page(client, tag="app=billing")


@pytest.mark.parametrize("tag, message", [
    ("billing", "'tag' must be written key=value, not 'billing'."),
    ("=billing", "'tag' must be written key=value, not '=billing'."),
    ("k" * 65 + "=v", "'tag' is longer than any tag (keys up to 64 characters, values up to 512)."),
    ("app=" + "v" * 513, "'tag' is longer than any tag (keys up to 64 characters, values up to 512)."),
    ("app=bil\x00ling", "'tag' holds control characters."),
])
def test_a_tag_that_cannot_be_read_is_a_400_that_says_why(client, operator, world, tag, message):
    for url in (URL, CSV_URL):
        response = client.get(url, {"tag": tag})
        assert response.status_code == 400
        errors = re.search(r'<ul class="errorlist" id="filter-errors">(.*?)</ul>', response.content.decode(),
                           re.S).group(1)
        assert errors == f"<li>{message.replace(chr(39), '&#x27;')}</li>"


def test_the_csv_export_has_the_tags_after_the_cached_columns_and_filters_by_one(client, operator, world):
    rows = read_csv(client.get(CSV_URL))
    assert list(rows[0]) == ["created_at", "account", "group", "model", "surface", "input_tokens", "output_tokens",
                             "total_tokens", "request_id", "cost", "cached_input_tokens", "cached", "tags",
                             "cache_write_input_tokens", "batch_id"]
    assert [(r["request_id"], r["tags"]) for r in rows] == [
        ("r1", '{"app":"billing"}'), ("r2", '{"app":"search"}'), ("r3", '{"app":"billing","team":"ops"}'),
        ("r4", ""), ("r5", '{"app":"billing"}')]
    rows = read_csv(client.get(CSV_URL, {"tag": "app=billing", "account": "bob@example.test"}))
    assert [(r["request_id"], r["account"], r["total_tokens"], r["tags"]) for r in rows] == [
        ("r3", "bob@example.test", "300", '{"app":"billing","team":"ops"}')]


def test_a_key_of_digits_or_with_quotes_is_a_key(client, operator, world):
    metered_call(account=world.alice, created_at=at(18), tags={"0": "zero", 'say "hi"': "x"}, request_id="r7")
    rows = read_csv(client.get(CSV_URL, {"tag": "0=zero"}))
    assert [r["request_id"] for r in rows] == ["r7"]
    assert [r["request_id"] for r in read_csv(client.get(CSV_URL, {"tag": 'say "hi"=x'}))] == ["r7"]
