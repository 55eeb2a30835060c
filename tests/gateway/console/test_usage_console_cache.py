"""The usage console shows the response cache's hits: per model, the calls answered from
the cache and the tokens they saved, in the range, group, account and model filtered on; the hits
are in the page's calls and tokens too."""

import re
from datetime import datetime, timezone

import pytest
import time_machine

from tests.factories import AccountFactory, AccountGroupFactory, metered_call

URL = "/admin/gateway/usagerecord/console/"
NOW = datetime(2026, 11, 18, 16, 0, tzinfo=timezone.utc)


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
    """Two groups; made and cached calls of two models on two days, one cached call out of range."""
    team, others = AccountGroupFactory(name="team"), AccountGroupFactory(name="others")
    alice, bob = AccountFactory(email="alice@example.test", group=team), AccountFactory(group=others)
    metered_call(account=alice, model="srv/a", input_tokens=10, output_tokens=20, created_at=at(16))
    metered_call(account=alice, model="srv/a", input_tokens=10, output_tokens=20, created_at=at(16, 13),
                       cached=True)
    metered_call(account=alice, model="srv/a", input_tokens=10, output_tokens=20, created_at=at(17),
                       cached=True)
    metered_call(account=bob, model="srv/b", input_tokens=1, output_tokens=2, created_at=at(18, 10),
                       cached=True)
    metered_call(account=bob, model="srv/b", input_tokens=1000, output_tokens=1000,
                       created_at=datetime(2026, 9, 1, tzinfo=timezone.utc), cached=True)
    return type("World", (), {"team": team, "others": others, "alice": alice, "bob": bob})


def page(client, **params) -> str:
    response = client.get(URL, params)
    assert response.status_code == 200, response.content[:2000]
    return response.content.decode()


def figure(html: str, element_id: str) -> str:
    return re.search(rf'id="{element_id}">([^<]*)<', html).group(1)


def hit_rows(html: str) -> list[tuple[str, ...]]:
    table = re.search(r'<table id="cache-hits">.*?</table>', html, re.S).group(0)
    return [tuple(re.findall(r"<td[^>]*>([^<]*)</td>", row)) for row in re.findall(r"<tr data-model.*?</tr>", table)]


def test_it_shows_the_hits_and_the_tokens_they_saved_per_model(client, operator, world):
    html = page(client)
    assert hit_rows(html) == [("srv/a", "2", "20", "40", "60"), ("srv/b", "1", "1", "2", "3")]
    assert (figure(html, "total-cache-hits"), figure(html, "total-cache-tokens")) == ("3", "63")
    assert figure(html, "total-calls") == "4"  # the hits are calls too


def test_the_filters_apply_to_the_hits(client, operator, world):
    assert hit_rows(page(client, group=world.others.pk)) == [("srv/b", "1", "1", "2", "3")]
    assert hit_rows(page(client, account=world.alice.email)) == [("srv/a", "2", "20", "40", "60")]
    assert hit_rows(page(client, model="srv/b")) == [("srv/b", "1", "1", "2", "3")]
    assert hit_rows(page(client, **{"from": "2026-11-17", "to": "2026-11-17"})) == [("srv/a", "1", "10", "20", "30")]
    html = page(client, **{"from": "2026-09-01", "to": "2026-09-01"})
    assert hit_rows(html) == [("srv/b", "1", "1,000", "1,000", "2,000")]


def test_without_hits_it_says_so(client, operator, db):
    html = page(client)
    assert hit_rows(html) == []
    assert "No call answered from the response cache in this range." in html
    assert figure(html, "total-cache-hits") == "0"
