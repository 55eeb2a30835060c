"""Budgets in money and the spend counters behind them, on both counter backends: a
budget refuses at its amount and resets with its window; an account's own budget replaces its group's
(-1: none); spend counters are a cache of the usage records' cost, rebuilt when lost (a Redis restart)
from the database and the spool, never counted twice, and dropped when an addition failed."""

from datetime import datetime, timezone
from decimal import Decimal

import pytest
import time_machine

from accounts.models import Account, AccountGroup
from gateway.calls.metering import meter
from gateway.limits.budgets import budget_text, budgets_of
from gateway.limits.quotas import quota_check, quota_used
from gateway.models import UsageRecord
from gateway.registry.prices import Price, money
from gateway.usage.writer import insert, record_from_line, usage_writer
from gateway.web.errors import ApiError
from tests.gateway.limits.test_quotas import backend, forget_counters, spooling  # noqa: F401 — fixtures

CENT = Price(input=10**4)  # 1 per million input tokens: 10,000 tokens cost one cent


def utc(text):
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc)


def set_budgets(group, **amounts):
    AccountGroup.objects.filter(pk=group.pk).update(**{f"{p}_budget": Decimal(a) for p, a in amounts.items()})
    group.refresh_from_db()


def pay(account, cents):
    """A call costing `cents` cents, metered as the surfaces meter it: a record, then the counters."""
    meter(account_id=account.pk, model="oa/echo-1", surface="chat.completions", input_tokens=10_000 * cents,
          output_tokens=0, price=CENT)


def day_spend(account) -> Decimal:
    return money(dict((w.period, n) for w, n in quota_used(account_id=account.pk).spend)["day"])


def test_budgets_are_the_accounts_own_else_its_groups(owner):
    set_budgets(owner.group, daily="5", weekly="20", monthly="-1")
    assert budgets_of(owner) == {"day": 5 * 10**10, "week": 20 * 10**10, "month": -1}
    Account.objects.filter(pk=owner.pk).update(daily_budget=Decimal("-1"), monthly_budget=Decimal("0.25"))
    owner.refresh_from_db()
    assert budgets_of(owner) == {"day": -1, "week": 20 * 10**10, "month": Decimal("0.25") * 10**10}


def test_the_daily_budget_refuses_at_its_amount_and_resets_at_midnight(backend, owner):  # noqa: F811
    set_budgets(owner.group, daily="0.05")
    with time_machine.travel(utc("2026-11-24T23:59:00"), tick=False) as traveller:
        pay(owner, 4)
        quota_check(account=owner)  # 0.04 of 0.05: the last call allowed
        pay(owner, 1)
        with pytest.raises(ApiError) as exc:
            quota_check(account=owner)
        assert exc.value.status == 403 and exc.value.code == "permission_denied"
        assert exc.value.message == ("Budget reached: the daily budget of 0.05 USD is spent until "
                                     "2026-11-25T00:00:00.000000Z.")
        traveller.move_to(utc("2026-11-25T00:00:00"))
        quota_check(account=owner)  # a new day


def test_the_weekly_budget_resets_on_wednesday_at_14(backend, owner):  # noqa: F811
    set_budgets(owner.group, weekly="0.01")
    with time_machine.travel(utc("2026-11-25T13:59:00"), tick=False) as traveller:
        pay(owner, 1)
        with pytest.raises(ApiError) as exc:
            quota_check(account=owner)
        assert "weekly budget of 0.01 USD is spent until 2026-11-25T14:00:00.000000Z" in exc.value.message
        traveller.move_to(utc("2026-11-25T14:00:00"))
        quota_check(account=owner)


def test_an_account_without_a_budget_is_never_refused_and_others_are_untouched(backend, owner, outsider):  # noqa: F811
    set_budgets(owner.group, monthly="0.01")
    Account.objects.filter(pk=outsider.pk).update(group=owner.group, monthly_budget=Decimal("-1"))
    outsider.refresh_from_db()
    pay(owner, 1)
    pay(outsider, 50)
    with pytest.raises(ApiError):
        quota_check(account=owner)
    quota_check(account=outsider)


def test_a_lost_spend_counter_is_rebuilt_from_the_records_and_goes_on_without_counting_twice(backend, owner):  # noqa: F811
    set_budgets(owner.group, daily="1")
    pay(owner, 30)
    forget_counters()  # Redis restarted: the counters are gone, the records are not
    assert day_spend(owner) == Decimal("0.30")
    pay(owner, 20)  # added to the rebuilt counter, once
    assert day_spend(owner) == Decimal("0.50")
    forget_counters()
    pay(owner, 50)  # no counter: not started at 0.50, it is rebuilt from all the records
    assert day_spend(owner) == Decimal("1.00")
    with pytest.raises(ApiError):
        quota_check(account=owner)
    assert usage_writer.flush(timeout=1)
    assert money(sum(r.cost_units for r in UsageRecord.objects.filter(account=owner))) == Decimal("1.00")


def test_a_rebuild_counts_the_cost_still_in_the_spool_once(backend, spooling, owner):  # noqa: F811
    set_budgets(owner.group, daily="1")
    pay(owner, 60)  # spooled, not yet in the database
    assert not UsageRecord.objects.filter(account=owner).exists()
    forget_counters()
    assert day_spend(owner) == Decimal("0.60")
    insert([record_from_line(line) for line in usage_writer.spooled()])  # written, the spool file not yet gone
    forget_counters()
    assert day_spend(owner) == Decimal("0.60")
    assert usage_writer.flush(timeout=1)
    forget_counters()
    assert day_spend(owner) == Decimal("0.60")


def test_a_spend_counter_whose_addition_failed_is_dropped_and_rebuilt_exactly(backend, owner, monkeypatch):  # noqa: F811
    from gateway.state import backend as backend_in_use

    set_budgets(owner.group, daily="1")
    pay(owner, 30)
    assert day_spend(owner) == Decimal("0.30")

    def redis_is_down(*args, **kwargs):
        raise ConnectionError("Redis went away")

    with monkeypatch.context() as patched:
        patched.setattr(backend_in_use.current, "amounts_add", redis_is_down)
        pay(owner, 50)  # answered: it must not raise, and its record lands with its cost
    assert day_spend(owner) == Decimal("0.30")  # the counter missed 0.50
    assert usage_writer.flush(timeout=1)  # what the drainer does when Redis answers again
    assert day_spend(owner) == Decimal("0.80")


@pytest.mark.parametrize("units, text", [(0, "0.00 USD"), (10**10, "1.00 USD"), (12_345 * 10**6, "1.2345 USD"),
                                         (5, "0.0000000005 USD")])
def test_a_budget_is_named_with_its_currency_and_every_decimal_it_has(units, text):
    assert budget_text(units) == text
