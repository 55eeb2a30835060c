"""Token quotas (spec 8.4): UTC windows, their exact reset instants, the 403, and /api/v1/usage;
the counters as a cache of the usage records: rebuilt when missing, dropped
when an addition failed."""

from datetime import datetime, timezone
from decimal import Decimal

import pytest
import time_machine

from accounts.models import AccountGroup
from gateway.calls.metering import meter
from gateway.limits.quotas import quota_check, quota_used, windows_at
from gateway.models import UsageRecord
from gateway.state.per_process import flush_all
from gateway.usage.writer import usage_writer
from gateway.web.errors import ApiError
from tests.conftest import TEST_REDIS_URL, clear_counters
from tests.factories import ModelFactory, UsageRecordFactory, api_key_for, bearer


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


def spend(account, tokens, **extra):
    """A call's usage, metered as the surfaces meter it: a record, then the counters."""
    meter(account_id=account.pk, model="oa/echo-1", surface="chat.completions", input_tokens=tokens,
          output_tokens=0, **extra)


def forget_counters():
    """What a Redis restart does to the counters (and, without Redis, a cleared cache)."""
    from django.core.cache import cache

    clear_counters()
    cache.clear()


def test_the_daily_ceiling_refuses_at_the_ceiling_and_resets_at_midnight(owner):
    set_ceilings(owner.group, day=100)
    with time_machine.travel(utc("2026-11-24T23:59:00"), tick=False) as traveller:
        spend(owner, 99)
        quota_check(account=owner)  # 99 of 100: the last call allowed
        spend(owner, 1)
        with pytest.raises(ApiError) as exc:
            quota_check(account=owner)
        assert exc.value.status == 403 and "daily" in exc.value.message
        traveller.move_to(utc("2026-11-24T23:59:59"))
        with pytest.raises(ApiError):
            quota_check(account=owner)
        traveller.move_to(utc("2026-11-25T00:00:00"))
        quota_check(account=owner)


def test_the_weekly_ceiling_resets_on_wednesday_at_1400(owner):
    set_ceilings(owner.group, week=50)
    with time_machine.travel(utc("2026-11-20T10:00:00"), tick=False) as traveller:
        spend(owner, 50)
        traveller.move_to(utc("2026-11-25T13:59:59"))
        with pytest.raises(ApiError) as exc:
            quota_check(account=owner)
        assert "weekly" in exc.value.message
        traveller.move_to(utc("2026-11-25T14:00:00"))
        quota_check(account=owner)


def test_the_monthly_ceiling_resets_on_the_first(owner):
    set_ceilings(owner.group, month=10)
    with time_machine.travel(utc("2026-11-30T23:59:59"), tick=False) as traveller:
        spend(owner, 10)
        with pytest.raises(ApiError):
            quota_check(account=owner)
        traveller.move_to(utc("2026-12-01T00:00:00"))
        quota_check(account=owner)


def test_minus_one_means_no_ceiling(owner):
    spend(owner, 10**9)
    quota_check(account=owner)


def test_quotas_are_per_account(owner, outsider):
    set_ceilings(owner.group, day=5)
    set_ceilings(outsider.group, day=5)
    spend(owner, 5)
    with pytest.raises(ApiError):
        quota_check(account=owner)
    quota_check(account=outsider)


def test_usage_reports_each_window_and_the_months_models(client, owner, outsider):
    set_ceilings(owner.group, day=1000, month=5000)
    owner.group.daily_budget = Decimal("1")
    owner.group.save()
    model = ModelFactory(input_price=Decimal("2.5"), output_price=Decimal("10"))  # per million tokens
    with time_machine.travel(utc("2026-11-24T10:00:00"), tick=False):
        meter(account_id=owner.pk, model=model.public_id, surface="chat.completions", input_tokens=30,
              output_tokens=12)
        meter(account_id=owner.pk, model=model.public_id, surface="messages", input_tokens=8, output_tokens=0)
        meter(account_id=outsider.pk, model=model.public_id, surface="messages", input_tokens=500, output_tokens=1)
        assert flush_all()  # the month's models are read from the records
        r = client.get("/api/v1/usage", headers=bearer(api_key_for(owner)))
    assert r.status_code == 200
    body = r.json()
    # 38 input tokens at 2.5 and 12 output tokens at 10 per million: 0.000095 + 0.00012
    spend = {"spend": "0.000215"}
    assert body["day"] == {"limit": 1000, "used": 50, "remaining": 950, "resets_at": "2026-11-25T00:00:00.000000Z",
                           **spend, "budget": "1.000000", "budget_remaining": "0.999785"}
    assert body["week"] == {"limit": -1, "used": 50, "remaining": None, "resets_at": "2026-11-25T14:00:00.000000Z",
                            **spend, "budget": None, "budget_remaining": None}
    assert body["month"] == {"limit": 5000, "used": 50, "remaining": 4950, "resets_at": "2026-12-01T00:00:00.000000Z",
                             **spend, "budget": None, "budget_remaining": None}
    assert body["currency"] == "USD"
    assert body["month_by_model"] == [{"model": model.public_id, "requests": 2, "input_tokens": 38,
                                       "output_tokens": 12, "total_tokens": 50, "spend": "0.000215"}]
    assert r["X-RateLimit-Limit"] == "300"


# ---- the counters are a cache of the usage records -----------------------------------------------

@pytest.fixture(params=["redis", "cache"])
def backend(request, settings, db):
    """Both counter backends: Redis (Lua), and the Django cache of the embedded default."""
    from django.conf import settings as django_settings

    settings.REDIS_URL = (django_settings.REDIS_URL or TEST_REDIS_URL) if request.param == "redis" else ""
    forget_counters()
    yield request.param
    forget_counters()


@pytest.fixture
def spooling(settings, tmp_path):
    """Records go to a spool of the test's own, and stay there until `usage_writer.flush()` (no drainer
    thread in the tests' process: gateway/state/write_behind.py `background`)."""
    settings.USAGE_SPOOL_DIR = tmp_path / "spool"


def day_used(account):
    return dict((w.period, used) for w, used in quota_used(account_id=account.pk).tokens)["day"]


def test_a_lost_counter_is_rebuilt_from_the_records_before_the_check(backend, owner):
    set_ceilings(owner.group, day=100)
    spend(owner, 60)
    spend(owner, 40)
    forget_counters()  # Redis restarted: the counters are gone, the records are not
    with pytest.raises(ApiError) as exc:
        quota_check(account=owner)
    assert exc.value.status == 403 and "daily" in exc.value.message
    assert day_used(owner) == 100


def test_a_rebuilt_counter_goes_on_counting_without_counting_twice(backend, owner):
    set_ceilings(owner.group, day=100)
    spend(owner, 30)
    forget_counters()
    assert day_used(owner) == 30  # rebuilt: 30
    spend(owner, 20)  # added to the rebuilt counter, once
    assert day_used(owner) == 50
    forget_counters()
    spend(owner, 5)  # no counter: not started at 5, it is rebuilt from all the records
    assert day_used(owner) == 55
    assert flush_all()
    assert sum(r.input_tokens for r in UsageRecord.objects.filter(account=owner)) == 55


def test_a_rebuild_counts_each_window_from_its_own_records(backend, owner):
    set_ceilings(owner.group, day=10, week=100, month=1000)
    with time_machine.travel(utc("2026-11-02T10:00:00"), tick=False) as traveller:
        spend(owner, 400)  # this month, an earlier week
        traveller.move_to(utc("2026-11-23T10:00:00"))
        spend(owner, 50)  # this week (from Wed 18th 14:00), an earlier day
        traveller.move_to(utc("2026-11-24T10:00:00"))
        spend(owner, 7)  # today
        forget_counters()
        used = {w.period: amount for w, amount in quota_used(account_id=owner.pk).tokens}
    assert used == {"day": 7, "week": 57, "month": 457}


def test_the_usage_endpoint_rebuilds_a_lost_counter(backend, client, owner):
    set_ceilings(owner.group, day=1000)
    spend(owner, 42)
    forget_counters()
    body = client.get("/api/v1/usage", headers=bearer(api_key_for(owner))).json()
    assert body["day"]["used"] == 42 and body["day"]["remaining"] == 958


@pytest.mark.django_db(transaction=True)
def test_a_call_after_redis_lost_the_counters_is_still_refused_403(client, settings):
    """Over HTTP: the counter read with the request's ceilings is missing, so it is rebuilt from
    the records before the quota check, and the call is refused before any model is asked."""
    from tests.factories import AccountFactory, AccountGroupFactory

    account = AccountFactory(group=AccountGroupFactory(api_access=True, daily_tokens=100))
    model = ModelFactory(is_default=True)
    spend(account, 100)
    forget_counters()
    r = client.post("/v1/chat/completions", {"model": model.public_id, "messages": [{"role": "user", "content": "hi"}]},
                    content_type="application/json", headers=bearer(api_key_for(account)))
    assert r.status_code == 403, r.content
    assert r.json()["error"]["code"] == "permission_denied" and "daily" in r.json()["error"]["message"]


def test_a_rebuild_counts_the_records_still_in_the_spool_once(backend, spooling, owner):
    from django.utils import timezone

    set_ceilings(owner.group, day=100)
    UsageRecordFactory(account=owner, model="oa/echo-1", surface="messages", input_tokens=10, output_tokens=0,
                       created_at=timezone.now())  # written before records had keys
    spend(owner, 60)  # spooled, not yet in the database
    assert UsageRecord.objects.filter(account=owner).count() == 1
    spend(owner, 30)
    forget_counters()
    with pytest.raises(ApiError):
        quota_check(account=owner)
    assert day_used(owner) == 100
    # written to the database while still in a spool file (a drainer killed between the commit
    # and the unlink): still counted once
    from gateway.usage.writer import insert, record_from_line

    insert([record_from_line(line) for line in usage_writer.spooled()])
    forget_counters()
    assert day_used(owner) == 100
    assert usage_writer.flush(timeout=1)
    assert not usage_writer.spooled()
    forget_counters()
    assert day_used(owner) == 100
    assert UsageRecord.objects.filter(account=owner).count() == 3


@pytest.mark.parametrize("drained", [False, True], ids=["spooled", "written"])
@pytest.mark.parametrize("when", ["before the spool is read", "after the spool is read",
                                  "after the pending additions are read"])
def test_a_call_metered_during_a_rebuild_is_counted_once(backend, owner, spooling, when, drained):
    """A call metered at any point of a counter's rebuild: its record may be read by the rebuild or not,
    and its addition finds no counter. It is counted exactly once (before the additions waited for a
    rebuild, one metered after the spool was read was lost: the counter came out one call short).
    Its record still in the spool, or already drained to the database."""
    from gateway.limits import quotas

    set_ceilings(owner.group, day=1000, month=10_000)
    spend(owner, 30)
    usage_writer.flush(timeout=1)
    spend(owner, 20)
    if drained:
        usage_writer.flush(timeout=1)
    forget_counters()
    spooled, pending, came = usage_writer.spooled, quotas.amounts_pending, []

    def interloper():
        came.append(when)
        spend(owner, 7)  # another request's call, metered now
        if drained:
            usage_writer.flush(timeout=1)

    def reading_the_spool():
        if when == "before the spool is read":
            interloper()
        lines = spooled()
        if when == "after the spool is read":
            interloper()
        return lines

    def reading_the_pending_additions(*args):
        held = pending(*args)
        if when == "after the pending additions are read":
            interloper()
        return held

    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(usage_writer, "spooled", reading_the_spool)
        patched.setattr(quotas, "amounts_pending", reading_the_pending_additions)
        used = {w.period: amount for w, amount in quota_used(account_id=owner.pk).tokens}
    assert came == [when]
    assert used == {"day": 57, "week": 57, "month": 57}
    assert day_used(owner) == 57
    spend(owner, 1)
    assert day_used(owner) == 58
    forget_counters()
    assert day_used(owner) == 58  # the records agree


def test_a_counter_whose_addition_failed_is_dropped_and_rebuilt_exactly(backend, owner, monkeypatch):
    from gateway.state import backend as backend_in_use

    set_ceilings(owner.group, day=1000)
    spend(owner, 30)
    assert day_used(owner) == 30

    def redis_is_down(*args, **kwargs):
        raise ConnectionError("Redis went away")

    with monkeypatch.context() as patched:
        patched.setattr(backend_in_use.current, "amounts_add", redis_is_down)
        spend(owner, 50)  # answered: it must not raise, and its record lands
    assert day_used(owner) == 30  # the counter missed 50
    assert usage_writer.flush(timeout=1)  # what the drainer does when Redis answers again
    assert UsageRecord.objects.filter(account=owner).count() == 2
    assert day_used(owner) == 80


def test_meter_with_redis_unreachable_does_not_raise_and_the_record_lands(owner, settings):
    from gateway.limits.quotas import quota_forget_unsure
    from tests.servers import free_port

    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"  # nothing listens there
    spend(owner, 12, request_id="req-1")
    assert usage_writer.flush(timeout=1)  # the record lands; the unsure counters cannot be dropped yet
    assert UsageRecord.objects.get(account=owner).request_id == "req-1"
    assert not quota_forget_unsure()  # still unreachable: the unsure counters are kept
    settings.REDIS_URL = ""
    assert quota_forget_unsure()


def test_meter_with_one_key_writes_one_record(backend, owner):
    spend(owner, 10, key="run-7")
    spend(owner, 10, key="run-7")
    spend(owner, 10)
    spend(owner, 10)
    assert flush_all()
    assert UsageRecord.objects.filter(account=owner).count() == 3
    assert UsageRecord.objects.filter(key="run-7").count() == 1
