"""Budgets in money on the /v1 surfaces, through a running gateway and the reference
upstream: the last call a budget allows and the first it refuses, refused in each surface's shape as a
used-up token quota is (spec 8.4's table), the message naming the budget; an account's own budget in
place of its group's; other accounts untouched; two processes racing past a budget."""

import threading
import time
from decimal import Decimal

import anthropic
import httpx
import openai
import pytest

from accounts.models import Account, AccountGroup
from gateway.models import UsageRecord
from gateway.registry.prices import money
from tests.factories import AccountFactory, api_key_for
from tests.servers import web_process

HELLO = [{"role": "user", "content": "one two three"}]
CALL = Decimal("0.0475")  # what one HELLO to oa/echo-1 costs at 2,500 in and 10,000 out per million: 3 in, 4 out


def priced(world):
    world.default.input_price, world.default.output_price = Decimal("2500"), Decimal("10000")
    world.default.save()


def budget(group, **amounts):
    """Saved (not a queryset update): the save's signal is what every process's credential cache follows."""
    group = AccountGroup.objects.get(pk=group.pk)
    for period, amount in amounts.items():
        setattr(group, f"{period}_budget", Decimal(amount))
    group.save()


def own_budget(account, amount):
    account = Account.objects.get(pk=account.pk)
    account.daily_budget = Decimal(amount)
    account.save()


def spent(world, *, key=None) -> Decimal:
    r = httpx.get(f"{world.base}/api/v1/usage", headers={"Authorization": f"Bearer {key or world.key}"})
    return Decimal(r.json()["day"]["spend"])


def wait_spent(world, amount: Decimal, timeout=5.0, key=None) -> None:
    """Until the account's day has `amount` spent (the metering follows the reply)."""
    deadline = time.monotonic() + timeout
    while (now := spent(world, key=key)) < amount:
        assert time.monotonic() < deadline, f"spend is {now}, expected {amount}"
        time.sleep(0.05)


def call(world, **headers):
    return world.openai.chat.completions.create(model="oa/echo-1", messages=HELLO, extra_headers=headers)


def test_the_last_call_a_budget_allows_and_the_first_it_refuses(world):
    priced(world)
    budget(world.group, daily=2 * CALL)  # two calls' worth: the third is refused
    call(world)
    wait_spent(world, CALL)
    call(world)  # CALL spent of 2 × CALL: still allowed
    wait_spent(world, 2 * CALL)
    with pytest.raises(openai.PermissionDeniedError) as exc:
        call(world)
    assert exc.value.status_code == 403 and exc.value.code == "permission_denied"
    assert exc.value.body["message"].startswith("Budget reached: the daily budget of 0.095 USD is spent until ")
    assert sum(1 for r in world.upstream.requests if r.path == "/v1/chat/completions") == 2


def test_one_unit_below_the_spend_still_allows_a_call(world):
    priced(world)
    budget(world.group, weekly=CALL + Decimal("0.0001"))
    call(world)
    wait_spent(world, CALL)
    call(world)  # CALL spent of CALL + 0.0001: allowed, and past it after
    wait_spent(world, 2 * CALL)
    with pytest.raises(openai.PermissionDeniedError) as exc:
        call(world)
    assert "the weekly budget of 0.0476 USD" in exc.value.message


def test_a_spent_budget_is_refused_in_each_surfaces_shape(world):
    priced(world)
    budget(world.group, monthly=CALL)
    call(world)
    wait_spent(world, CALL)
    with pytest.raises(openai.PermissionDeniedError) as exc:
        world.openai.responses.create(model="oa/echo-1", input="x")
    assert exc.value.code == "permission_denied" and "monthly budget" in exc.value.message
    r = httpx.post(f"{world.base}/v1/chat/completions", json={"model": "oa/echo-1", "messages": HELLO},
                   headers={"Authorization": f"Bearer {world.key}"})
    assert r.status_code == 403
    assert set(r.json()) == {"error"} and set(r.json()["error"]) == {"message", "type", "param", "code"}
    assert r.json()["error"]["code"] == "permission_denied"
    with pytest.raises(anthropic.PermissionDeniedError) as exc:
        world.anthropic.messages.create(model="oa/echo-1", max_tokens=5, messages=HELLO)
    assert exc.value.body["type"] == "error" and exc.value.body["error"]["type"] == "permission_error"
    assert "monthly budget of 0.0475 USD" in exc.value.body["error"]["message"]
    assert sum(1 for r in world.upstream.requests if r.method == "POST") == 1  # refused before any model call


def test_an_accounts_own_budget_replaces_its_groups_and_others_are_untouched(world):
    priced(world)
    budget(world.group, daily=0)  # nothing may be spent in the group...
    with pytest.raises(openai.PermissionDeniedError):
        call(world)
    own_budget(world.account, -1)  # ...but this account has none
    call(world)
    teammate = AccountFactory(group=world.group, email="mate@example.test")
    mate = openai.OpenAI(base_url=f"{world.base}/v1", api_key=api_key_for(teammate), max_retries=0)
    with pytest.raises(openai.PermissionDeniedError):
        mate.chat.completions.create(model="oa/echo-1", messages=HELLO)
    own_budget(teammate, CALL)  # its own: one call's worth
    mate.chat.completions.create(model="oa/echo-1", messages=HELLO)
    wait_spent(world, CALL, key=mate.api_key)
    with pytest.raises(openai.PermissionDeniedError):
        mate.chat.completions.create(model="oa/echo-1", messages=HELLO)
    call(world)  # the first account's spend is its own


def test_calls_to_a_model_without_a_price_spend_nothing_of_a_budget(world):
    budget(world.group, daily=0)
    with pytest.raises(openai.PermissionDeniedError):
        call(world)  # a budget of 0 refuses every call, priced or not: nothing more may be spent
    budget(world.group, daily=Decimal("0.01"))
    for _ in range(3):
        call(world)
    assert spent(world) == 0


RACERS = 4  # concurrent clients per process
CALLS_ALLOWED = 6  # the budget, in calls


def test_two_processes_racing_past_a_budget_overshoot_by_the_calls_in_flight_at_most(world, redis_url):
    """Both processes read and add to the same spend counters: the budget is not multiplied. A call
    is checked before its cost is known, so the calls in flight when the budget is reached go
    through: at most one per concurrent client (here 2 × RACERS) beyond the budget's last call."""
    priced(world)
    budget(world.group, daily=CALLS_ALLOWED * CALL)
    answers: list[int] = []
    lock = threading.Lock()
    ceilings = {"REDIS_URL": redis_url, "REGISTRY_TTL_SECONDS": "0", "RATE_LIMIT_V1": "1000"}  # no 429 in the race
    with web_process(**ceilings) as first, web_process(**ceilings) as second:
        def racer(base: str) -> None:
            with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {world.key}"}, timeout=30) as http:
                for _ in range(6):  # bounded: 2 × RACERS × 6 calls at most
                    status = http.post("/v1/chat/completions", json={"model": "oa/echo-1", "messages": HELLO},
                                       ).status_code
                    with lock:
                        answers.append(status)
                    if status == 403:
                        return

        threads = [threading.Thread(target=racer, args=(base,)) for base in (first, second) for _ in range(RACERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    answered = answers.count(200)
    assert set(answers) <= {200, 403} and answers.count(403) == 2 * RACERS  # every racer was stopped
    assert CALLS_ALLOWED <= answered <= CALLS_ALLOWED + 2 * RACERS
    deadline = time.monotonic() + 10
    while UsageRecord.objects.filter(account=world.account).count() < answered:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    records = list(UsageRecord.objects.filter(account=world.account))
    assert len(records) == answered  # each answered call metered once
    assert money(sum(r.cost_units for r in records)) == answered * CALL
