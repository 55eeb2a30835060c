"""Token quotas (spec 8.4): UTC windows, their exact reset instants, the 403, and /api/v1/usage."""

from datetime import datetime, timezone

import pytest
import time_machine

from accounts.models import AccountGroup
from gateway.errors import ApiError
from gateway.metering import meter
from gateway.quotas import quota_add, quota_check, windows_at
from tests.factories import ModelFactory, api_key_for, bearer


def utc(text):
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc)


@pytest.mark.parametrize(
    "now, day, week, month",
    [
        ("2026-11-25T13:59:59", "2026-11-26T00:00:00", "2026-11-25T14:00:00", "2026-12-01T00:00:00"),
        ("2026-11-25T14:00:00", "2026-11-26T00:00:00", "2026-12-02T14:00:00", "2026-12-01T00:00:00"),
        ("2026-11-24T23:59:59", "2026-11-25T00:00:00", "2026-11-25T14:00:00", "2026-12-01T00:00:00"),
        ("2026-12-31T23:59:59", "2027-01-01T00:00:00", "2027-01-06T14:00:00", "2027-01-01T00:00:00"),
        ("2028-02-29T12:00:00", "2028-03-01T00:00:00", "2028-03-01T14:00:00", "2028-03-01T00:00:00"),
    ],
)
def test_windows_reset_at_midnight_wednesday_1400_and_the_first(now, day, week, month):
    resets = {w.period: w.resets_at for w in windows_at(utc(now))}
    assert resets == {"day": utc(day), "week": utc(week), "month": utc(month)}


def set_ceilings(group, day=-1, week=-1, month=-1):
    AccountGroup.objects.filter(pk=group.pk).update(daily_tokens=day, weekly_tokens=week, monthly_tokens=month)
    group.refresh_from_db()


def test_the_daily_ceiling_refuses_at_the_ceiling_and_resets_at_midnight(owner):
    set_ceilings(owner.group, day=100)
    with time_machine.travel(utc("2026-11-24T23:59:00"), tick=False) as traveller:
        quota_add(account_id=owner.pk, tokens=99)
        quota_check(account_id=owner.pk, group=owner.group)  # 99 of 100: the last call allowed
        quota_add(account_id=owner.pk, tokens=1)
        with pytest.raises(ApiError) as exc:
            quota_check(account_id=owner.pk, group=owner.group)
        assert exc.value.status == 403 and "daily" in exc.value.message
        traveller.move_to(utc("2026-11-24T23:59:59"))
        with pytest.raises(ApiError):
            quota_check(account_id=owner.pk, group=owner.group)
        traveller.move_to(utc("2026-11-25T00:00:00"))
        quota_check(account_id=owner.pk, group=owner.group)


def test_the_weekly_ceiling_resets_on_wednesday_at_1400(owner):
    set_ceilings(owner.group, week=50)
    with time_machine.travel(utc("2026-11-20T10:00:00"), tick=False) as traveller:
        quota_add(account_id=owner.pk, tokens=50)
        traveller.move_to(utc("2026-11-25T13:59:59"))
        with pytest.raises(ApiError) as exc:
            quota_check(account_id=owner.pk, group=owner.group)
        assert "weekly" in exc.value.message
        traveller.move_to(utc("2026-11-25T14:00:00"))
        quota_check(account_id=owner.pk, group=owner.group)


def test_the_monthly_ceiling_resets_on_the_first(owner):
    set_ceilings(owner.group, month=10)
    with time_machine.travel(utc("2026-11-30T23:59:59"), tick=False) as traveller:
        quota_add(account_id=owner.pk, tokens=10)
        with pytest.raises(ApiError):
            quota_check(account_id=owner.pk, group=owner.group)
        traveller.move_to(utc("2026-12-01T00:00:00"))
        quota_check(account_id=owner.pk, group=owner.group)


def test_minus_one_means_no_ceiling(owner):
    quota_add(account_id=owner.pk, tokens=10**9)
    quota_check(account_id=owner.pk, group=owner.group)


def test_quotas_are_per_account(owner, outsider):
    set_ceilings(owner.group, day=5)
    set_ceilings(outsider.group, day=5)
    quota_add(account_id=owner.pk, tokens=5)
    with pytest.raises(ApiError):
        quota_check(account_id=owner.pk, group=owner.group)
    quota_check(account_id=outsider.pk, group=outsider.group)


def test_usage_reports_each_window_and_the_months_models(client, owner, outsider):
    set_ceilings(owner.group, day=1000, month=5000)
    model = ModelFactory()
    with time_machine.travel(utc("2026-11-24T10:00:00"), tick=False):
        meter(account_id=owner.pk, model=model.public_id, surface="chat.completions", input_tokens=30,
              output_tokens=12)
        meter(account_id=owner.pk, model=model.public_id, surface="messages", input_tokens=8, output_tokens=0)
        meter(account_id=outsider.pk, model=model.public_id, surface="messages", input_tokens=500, output_tokens=1)
        r = client.get("/api/v1/usage", headers=bearer(api_key_for(owner)))
    assert r.status_code == 200
    body = r.json()
    assert body["day"] == {"limit": 1000, "used": 50, "remaining": 950, "resets_at": "2026-11-25T00:00:00Z"}
    assert body["week"] == {"limit": -1, "used": 50, "remaining": None, "resets_at": "2026-11-25T14:00:00Z"}
    assert body["month"] == {"limit": 5000, "used": 50, "remaining": 4950, "resets_at": "2026-12-01T00:00:00Z"}
    assert body["month_by_model"] == [{"model": model.public_id, "requests": 2, "input_tokens": 38,
                                       "output_tokens": 12, "total_tokens": 50}]
    assert r["X-RateLimit-Limit"] == "300"
