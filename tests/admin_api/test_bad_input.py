"""Input no database can hold is a 422 naming the field, never a 500: ids past 64 bits, times that leave
the calendar in UTC, ceilings past their column."""

import pytest

from tests.factories import AccountFactory

TOO_BIG = 10 ** 30


@pytest.mark.parametrize(("path", "body", "field"), [
    ("/accounts", {"email": "a@example.test", "group": TOO_BIG}, "group"),
    ("/groups", {"name": "g", "allowed_models": [TOO_BIG]}, "allowed_models"),
    ("/groups", {"name": "g", "daily_tokens": TOO_BIG}, "daily_tokens"),
    ("/groups", {"name": "g", "attachments_per_message": TOO_BIG}, "attachments_per_message"),
    ("/aliases", {"name": "a", "fallbacks": [TOO_BIG]}, "fallbacks"),
    ("/aliases", {"name": "a", "deployments": [{"model": TOO_BIG}]}, "deployments.0.model"),
])
def test_numbers_past_the_columns_are_422(api, db, path, body, field):
    response = api.post(path, body)
    assert response.status_code == 422, response.content
    assert list(response.json()["errors"]) == [field]


@pytest.mark.parametrize("moment", ["9999-12-31T23:59:59-05:00", "0001-01-01T00:00:00+01:00", "2030-13-01T00:00:00Z"])
def test_times_outside_the_calendar_in_utc_are_422(api, db, moment):
    account = AccountFactory()
    assert list(api.patch(f"/accounts/{account.pk}", {"locked_until": moment}).json()["errors"]) == ["locked_until"]
    assert list(api.get("/usage", since=moment).json()["errors"]) == ["since"]
    assert list(api.get("/calls", until=moment).json()["errors"]) == ["until"]


def test_a_lock_time_without_offset_is_422(api, owner):
    response = api.patch(f"/accounts/{owner.pk}", {"locked_until": "2030-01-01T00:00:00"})
    assert list(response.json()["errors"]) == ["locked_until"]


def test_a_body_that_is_not_an_object_is_400(api, owner):
    response = api.client.patch(f"/api/v1/admin/accounts/{owner.pk}", "[1]", content_type="application/json",
                                headers=api.headers)
    assert response.status_code == 400
    assert response.json() == {"detail": "The request body must be a JSON object."}
