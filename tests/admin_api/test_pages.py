"""Cursor pagination: `{data, next}`, the limit's boundary, the next cursor, the last page's null, and a bad
cursor or limit answered 422 naming it (never a 500)."""

import pytest

from admin_api.pages import MAX_LIMIT
from tests.factories import AccountGroupFactory


def test_pages_follow_the_cursor_to_a_last_page_whose_next_is_null(api, db):
    for index in range(5):
        AccountGroupFactory(name=f"g{index:03}")
    first = api.get("/groups", limit=2).json()
    everything = [row["id"] for row in api.get("/groups", limit=MAX_LIMIT).json()["data"]]
    assert len(first["data"]) == 2 and first["next"]
    seen, page = [row["id"] for row in first["data"]], first
    while page["next"]:
        page = api.get("/groups", limit=2, cursor=page["next"]).json()
        seen += [row["id"] for row in page["data"]]
    assert page["next"] is None
    assert len(everything) == 6 and seen == everything  # every group once, in order (the operator's own too)


def test_a_page_exactly_full_at_the_end_has_no_next(api, db):
    for index in range(3):
        AccountGroupFactory(name=f"full{index}")
    total = len(api.get("/groups", limit=MAX_LIMIT).json()["data"])
    assert api.get("/groups", limit=total).json()["next"] is None
    assert api.get("/groups", limit=total - 1).json()["next"] is not None


def test_the_largest_limit_is_taken_and_one_more_refused(api, db):
    assert api.get("/usage", limit=MAX_LIMIT).status_code == 200
    response = api.get("/usage", limit=MAX_LIMIT + 1)
    assert response.status_code == 422
    assert response.json() == {"message": "A whole number from 1 to 200.",
                               "errors": {"limit": ["A whole number from 1 to 200."]}}


@pytest.mark.parametrize("limit", ["0", "-1", "ten", "1.5", ""])
def test_a_bad_limit_is_422(api, limit):
    response = api.get("/accounts", limit=limit)
    assert response.status_code == 422
    assert list(response.json()["errors"]) == ["limit"]


@pytest.mark.parametrize("cursor", ["nonsense", "aWQ6eA", "!!!", "", "aWQ6OTk5OTk5OTk5OTk5OTk5OTk5OTk5"])
def test_a_bad_cursor_is_422(api, cursor):
    response = api.get("/accounts", cursor=cursor)
    assert response.status_code == 422
    assert response.json() == {"message": "Not a cursor of this API: pass the `next` of a page as it is.",
                               "errors": {"cursor": ["Not a cursor of this API: pass the `next` of a page as it is."]}}


def test_an_unknown_query_parameter_is_refused_by_name(api):
    response = api.get("/accounts", grup="1")
    assert response.status_code == 422
    assert response.json() == {"message": "Unknown query parameter.", "errors": {"grup": ["Unknown query parameter."]}}
