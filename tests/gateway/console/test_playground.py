"""The console's playground reply (POST /admin/playground/reply) on a running gateway in front of the
reference upstream: staff only, same origin (session and CSRF); refused as an API call of the same
account is refused (its group's models, its quota, its budget), in the same status and body; a reply
streamed as server-sent events, metered once and kept in the calls log as a playground call of the
staff account."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from types import SimpleNamespace

import httpx
import pytest
from django.test import Client

from gateway.limits import ratelimit
from gateway.models import CallRecord, UsageRecord
from gateway.registry.prices import money, money_text
from gateway.state.counters import account_tag
from tests.factories import (
    AccountFactory,
    AccountGroupFactory,
    ModelFactory,
    ModelServerFactory,
    UsageRecordFactory,
    api_key_for,
)
from tests.faults.services import wait_for
from tests.servers import wait_for_quiet_database
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture

REPLY = "/admin/playground/reply"
ASK = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "Say hello."}]
NOT_ALLOWED = {"error": {"message": "The model 'oa/secret-1' is not allowed for your account group.",
                         "type": "permission_error", "param": "model", "code": "permission_denied"}}


@pytest.fixture
def world(transactional_db, live_gateway, upstream):  # noqa: F811
    group = AccountGroupFactory(name="operators", api_access=True, all_models=False)
    staff = AccountFactory(group=group, email="op@example.test", is_staff=True)
    oa = ModelServerFactory(name="oa", kind="openai", base_url=f"{upstream.url}/v1", read_timeout=2.0)
    echo = ModelFactory(server=oa, name="echo-1", is_default=True, input_price=Decimal("2"),
                        output_price=Decimal("8"))
    ModelFactory(server=oa, name="secret-1")
    group.allowed_models.set([echo])
    upstream.configure(reply="Hello from the playground.")
    yield SimpleNamespace(base=live_gateway, upstream=upstream, group=group, staff=staff, echo=echo)
    wait_for_quiet_database()


@contextmanager
def signed_in(base: str, account) -> Iterator[httpx.Client]:
    """An httpx client with the console session of `account` and its CSRF token in `X-CSRFToken`."""
    django = Client()
    django.force_login(account)
    with httpx.Client(base_url=base, timeout=30, cookies={"sessionid": django.cookies["sessionid"].value}) as client:
        client.get("/admin/playground/" if account.is_staff else "/admin/login/")  # a page with a form: the CSRF cookie
        client.headers["X-CSRFToken"] = client.cookies["csrftoken"]
        yield client


def events(answer: httpx.Response) -> list[tuple[str, dict]]:
    """The stream's events, strictly: each an `event:` line and one `data:` line of JSON."""
    found = []
    for frame in answer.text.split("\n\n"):
        if not frame:
            continue
        name, data = frame.split("\n")
        assert name.startswith("event: ") and data.startswith("data: "), frame
        found.append((name[7:], json.loads(data[6:])))
    return found


def api_answer(world, **body) -> httpx.Response:
    """The same call on /v1/chat/completions, with a key of the staff account."""
    key = api_key_for(world.staff)
    return httpx.post(f"{world.base}/v1/chat/completions",
                      headers={"Authorization": f"Bearer {key}", "Accept": "application/json"},
                      json={"messages": ASK, **body}, timeout=30)


def row_of(request_id: str, timeout: float = 10.0) -> CallRecord:
    rows = wait_for(lambda: list(CallRecord.objects.filter(request_id=request_id)), timeout,
                    f"a call recorded for {request_id}", interval=0.02)
    assert len(rows) == 1, rows
    return rows[0]


def test_anonymous_callers_are_sent_to_the_login(world):
    with httpx.Client(base_url=world.base, timeout=30) as client:
        client.get("/admin/login/")
        client.headers["X-CSRFToken"] = client.cookies["csrftoken"]
        refused = client.post(REPLY, json={"model": "oa/echo-1", "messages": ASK})
        page = client.get("/admin/playground/")
    assert refused.status_code == 302
    assert refused.headers["location"] == "/admin/login/?next=/admin/playground/"
    assert page.status_code == 302 and page.headers["location"] == "/admin/login/?next=/admin/playground/"
    assert world.upstream.requests == []


def test_an_account_without_staff_rights_is_refused(world):
    member = AccountFactory(group=world.group, email="member@example.test", is_staff=False)
    with signed_in(world.base, member) as client:
        refused = client.post(REPLY, json={"model": "oa/echo-1", "messages": ASK})
        page = client.get("/admin/playground/")
    assert refused.status_code == 403
    assert refused.json() == {"error": {"message": "The playground is for the console's staff.",
                                        "type": "permission_error", "param": None, "code": "permission_denied"}}
    assert page.status_code == 302 and page.headers["location"].startswith("/admin/login/")
    assert world.upstream.requests == []


def test_a_post_without_the_csrf_token_is_refused(world):
    with signed_in(world.base, world.staff) as client:
        del client.headers["X-CSRFToken"]
        refused = client.post(REPLY, json={"model": "oa/echo-1", "messages": ASK})
    assert refused.status_code == 403
    assert world.upstream.requests == []


def test_a_model_the_staff_group_may_not_use_is_the_apis_refusal(world):
    with signed_in(world.base, world.staff) as client:
        refused = client.post(REPLY, json={"model": "oa/secret-1", "messages": ASK})
    api = api_answer(world, model="oa/secret-1")
    assert (refused.status_code, refused.json()) == (api.status_code, api.json()) == (403, NOT_ALLOWED)
    assert world.upstream.requests == []
    row = row_of(refused.headers["X-Request-Id"])
    assert (row.account_id, row.surface, row.model_requested, row.status, row.outcome) == \
        (world.staff.pk, "playground", "oa/secret-1", 403, "refused")


@pytest.mark.parametrize("limits, used", [
    ({"daily_tokens": 100}, {"input_tokens": 80, "output_tokens": 20}),
    ({"daily_budget": Decimal("0.01")}, {"cost_units": 10**8}),  # 0.01 of the currency spent
], ids=["token-quota", "budget"])
def test_a_used_up_quota_or_budget_is_refused_as_the_api_refuses_it(world, limits, used):
    for name, value in limits.items():
        setattr(world.group, name, value)
    world.group.save()
    UsageRecordFactory(account=world.staff, model="oa/echo-1", **used)
    with signed_in(world.base, world.staff) as client:
        refused = client.post(REPLY, json={"model": "oa/echo-1", "messages": ASK})
    api = api_answer(world, model="oa/echo-1")
    assert refused.status_code == api.status_code == 403
    assert refused.json() == api.json()
    assert refused.json()["error"]["code"] == api.json()["error"]["code"]
    assert world.upstream.requests == []


def test_the_apis_request_ceiling_counts_playground_calls_on_the_accounts_own_counter(world):
    for _ in range(ratelimit.V1.ceiling):  # the account's /v1 ceiling used up, as its API calls would
        ratelimit.limit_hit(ratelimit.V1, subject=f"acct:{account_tag(world.staff.pk)}")
    with signed_in(world.base, world.staff) as client:
        refused = client.post(REPLY, json={"model": "oa/echo-1", "messages": ASK},
                              headers={"Accept": "text/event-stream, application/json"})
    api = api_answer(world, model="oa/echo-1")
    assert (refused.status_code, refused.json()) == (api.status_code, api.json()) == \
        (429, {"message": "Too Many Attempts."})
    assert refused.headers["X-RateLimit-Limit"] == api.headers["X-RateLimit-Limit"] == str(ratelimit.V1.ceiling)
    assert refused.headers["X-RateLimit-Remaining"] == "0"
    assert world.upstream.requests == []


def test_a_field_that_cannot_be_read_is_a_400_naming_it(world):
    with signed_in(world.base, world.staff) as client:
        hot = client.post(REPLY, json={"model": "oa/echo-1", "messages": ASK, "temperature": 3})
        role = client.post(REPLY, json={"model": "oa/echo-1", "messages": [{"role": "tool", "content": "x"}]})
    assert hot.status_code == 400 and hot.json() == {"error": {
        "message": "'temperature' must be between 0 and 2.", "type": "invalid_request_error", "param": "temperature",
        "code": "invalid_request_error"}}
    assert role.status_code == 400 and role.json()["error"]["param"] == "messages[0].role"
    assert world.upstream.requests == []


def test_a_reply_streams_is_metered_once_and_is_a_playground_call_of_the_staff_account(world):
    with signed_in(world.base, world.staff) as client:
        answer = client.post(REPLY, headers={"X-Request-Id": "playground-call-1"},
                             json={"model": "oa/echo-1", "messages": ASK, "temperature": 0.2, "max_tokens": 64})
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/event-stream")
    found = events(answer)
    names = [name for name, _ in found]
    assert names[0] == "meta" and names[-1] == "done" and set(names[1:-1]) == {"delta"}
    assert found[0][1] == {"request_id": "playground-call-1", "model": "oa/echo-1"}
    assert "".join(data["text"] for name, data in found if name == "delta") == "Hello from the playground."
    sent = world.upstream.last.json
    assert (sent["messages"], sent["temperature"], sent["max_tokens"]) == (ASK, 0.2, 64)

    done = found[-1][1]
    row = row_of("playground-call-1")
    record = UsageRecord.objects.get(request_id="playground-call-1")
    wait_for_quiet_database()
    assert UsageRecord.objects.filter(request_id="playground-call-1").count() == 1  # metered once
    usage = done["usage"]
    assert (record.account_id, record.surface, record.model, record.input_tokens, record.output_tokens) == \
        (world.staff.pk, "playground", "oa/echo-1", usage["prompt_tokens"], usage["completion_tokens"])
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    assert money(record.cost_units) == (usage["prompt_tokens"] * 2 + usage["completion_tokens"] * 8) / Decimal(10**6)
    assert (done["cost"], done["currency"], done["model"]) == (money_text(record.cost_units), "USD", "oa/echo-1")
    assert 0 < done["ttft_ms"] <= done["latency_ms"]
    assert (row.account_id, row.group_id, row.surface, row.model_requested, row.model, row.status, row.outcome,
            row.input_tokens, row.output_tokens, row.cost_units) == \
        (world.staff.pk, world.group.pk, "playground", "oa/echo-1", "oa/echo-1", 200, "ok",
         record.input_tokens, record.output_tokens, record.cost_units)


def test_the_cost_shown_prices_the_providers_cache_writes_as_the_record_does(world):
    world.echo.cache_write_price = Decimal("5")
    world.echo.save()
    world.upstream.configure(cache_write_tokens=2)
    with signed_in(world.base, world.staff) as client:
        answer = client.post(REPLY, headers={"X-Request-Id": "playground-writes"},
                             json={"model": "oa/echo-1", "messages": ASK})
    done = events(answer)[-1][1]
    row_of("playground-writes")  # written after the usage record
    record = UsageRecord.objects.get(request_id="playground-writes")
    wait_for_quiet_database()
    usage = done["usage"]
    assert record.cache_write_input_tokens == 2
    assert money(record.cost_units) == ((usage["prompt_tokens"] - 2) * 2 + 2 * 5 + usage["completion_tokens"] * 8) \
        / Decimal(10**6)
    assert done["cost"] == money_text(record.cost_units)


def test_no_model_answering_is_the_apis_answer(world):
    world.upstream.configure(fail_status=500)
    with signed_in(world.base, world.staff) as client:
        failed = client.post(REPLY, json={"model": "oa/echo-1", "messages": ASK})
    api = api_answer(world, model="oa/echo-1")
    unavailable = {"error": {"message": "Every model in the chain is unavailable right now; retry in 10 seconds.",
                             "type": "server_error", "param": None, "code": "service_unavailable"}}
    assert (failed.status_code, failed.json()) == (503, unavailable)
    # the API's call comes a moment later, while the model cools down: its wait may read a second less
    assert api.status_code == 503 and api.json()["error"] == {
        **unavailable["error"], "message": re.sub(r"\d+ seconds", "10 seconds", api.json()["error"]["message"])}
    assert failed.headers["Retry-After"] == "10"
    row = row_of(failed.headers["X-Request-Id"])
    assert (row.surface, row.status, row.outcome, row.model) == ("playground", failed.status_code, "failed", "")


def test_a_reply_cut_midway_ends_with_its_error_and_what_arrived_is_metered(world):
    world.upstream.configure(cut_after_tokens=3)
    with signed_in(world.base, world.staff) as client:
        answer = client.post(REPLY, headers={"X-Request-Id": "playground-cut"},
                             json={"model": "oa/echo-1", "messages": ASK})
    assert answer.status_code == 200
    found = events(answer)
    assert [name for name, _ in found][-2:] == ["error", "done"]
    assert found[-2][1] == {"status": 502, "error": {"message": "The model server closed the connection mid-reply.",
                                                     "type": "server_error", "code": "upstream_disconnected"}}
    arrived = "".join(data["text"] for name, data in found if name == "delta")
    assert arrived and "Hello from the playground.".startswith(arrived) and arrived != "Hello from the playground."
    row = row_of("playground-cut")
    record = UsageRecord.objects.get(request_id="playground-cut")
    assert (row.surface, row.status, row.outcome, row.error_code) == ("playground", 200, "cut", "disconnected")
    assert record.output_tokens == found[-1][1]["usage"]["completion_tokens"] > 0


@pytest.mark.django_db
def test_the_page_without_a_chat_model_says_what_to_do_first(client):
    client.force_login(AccountFactory(email="op@example.test", is_staff=True))
    page = client.get("/admin/playground/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="playground-no-models"' in html and "add a model server first" in html
    assert re.search(r'<select id="playground-model" name="model"[^>]* disabled>\s*<option value="">No chat model yet',
                     html)


def test_a_page_that_goes_away_mid_reply_has_what_arrived_metered(world):
    long = " ".join(["word"] * 40)  # ten seconds at this pace: the page leaves after the first words
    world.upstream.configure(reply=long, tokens_per_second=4)
    with signed_in(world.base, world.staff) as client:
        with client.stream("POST", REPLY, headers={"X-Request-Id": "playground-left"},
                           json={"model": "oa/echo-1", "messages": ASK}) as answer:
            assert answer.status_code == 200
            for line in answer.iter_lines():
                if line.startswith("event: delta"):
                    break
    row = row_of("playground-left")
    record = UsageRecord.objects.get(request_id="playground-left")
    assert (row.surface, row.outcome, row.account_id) == ("playground", "client_closed", world.staff.pk)
    assert (record.surface, record.account_id) == ("playground", world.staff.pk)
    assert 0 < record.output_tokens < 10  # what arrived, not the forty words
