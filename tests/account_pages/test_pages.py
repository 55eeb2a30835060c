"""The account pages through HTTP: usage and spend against the group's quotas and budgets with the
chart, the key generated with the password and shown once, revoked, the last calls, the routines with
their runs and the inbox; two accounts with rows of each kind each see only their own, and an id of
the other's row is a 404."""

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from accounts.keys import KEY_PATTERN
from accounts.models import ApiKey
from accounts.secrets import digest
from gateway.models import UsageRecord
from routines.models import Run
from tests.factories import (
    PASSWORD,
    AccountFactory,
    AccountGroupFactory,
    ApiKeyFactory,
    CallRecordFactory,
    InboxMessageFactory,
    RoutineFactory,
    RunFactory,
    UsageRecordFactory,
    api_key_for,
    bearer,
    metered_call,
)

pytestmark = pytest.mark.django_db
COST_UNITS_PER_CURRENCY = 10**10


def text(response) -> str:
    return response.content.decode()


def refused(response) -> int:
    """The status the API gives the same key request, on the key page's error (the page answers 200)."""
    assert response.status_code == 200
    return int(re.search(r'id="key-error" role="alert" data-refusal="(\d+)"', text(response)).group(1))


def row(page: str, attribute: str, value) -> str:
    """The <tr> of `page` whose `attribute` is `value`."""
    match = re.search(rf'<tr {attribute}="{value}"[^>]*>(.*?)</tr>', page, re.S)
    assert match, f"no row {attribute}={value}"
    return match.group(1)


@pytest.fixture
def signed_in(client, owner):
    client.force_login(owner)
    return client


@pytest.fixture
def two_accounts(owner, outsider):
    """The owner's and the outsider's rows of every kind, made apart so that each page can be checked
    for the other's."""
    rows = {}
    for account, tag in ((owner, "xenon"), (outsider, "krypton")):
        key = ApiKeyFactory(account=account)
        call = CallRecordFactory(account=account, request_id=f"req-{tag}", model=f"srv/{tag}-model",
                                 model_requested=f"srv/{tag}-model")
        routine = RoutineFactory(account=account, name=f"{tag}'s digest")
        run = RunFactory(routine=routine, status=Run.Status.SUCCEEDED, output=f"{tag} run output")
        message = InboxMessageFactory(account=account, title=f"{tag}'s result", body=f"{tag} body", routine=routine,
                                      run=run)
        rows[tag] = {"preview": key.preview, "call": call, "routine": routine, "run": run, "message": message}
    return rows


def test_the_overview_shows_the_windows_against_the_groups_quotas_and_budgets(client, owner):
    group = owner.group
    group.daily_tokens, group.weekly_tokens, group.monthly_tokens = 1000, -1, 100_000
    group.daily_budget, group.monthly_budget = Decimal("2.00"), Decimal("10.00")
    group.save()
    metered_call(account=owner, input_tokens=600, output_tokens=300, cost_units=COST_UNITS_PER_CURRENCY)
    metered_call(account=AccountFactory(group=group), input_tokens=5000, output_tokens=0)  # another's
    CallRecordFactory(account=owner, group=group, outcome="refused", model="")  # a call no model answered
    client.force_login(owner)
    page = text(client.get("/account/"))
    day = row(page, "data-period", "day")
    assert '<td class="num tokens-used">900</td>' in day
    assert "90% of 1,000" in day and "near-ceiling" in day
    assert '<td class="num spend">1.00 / 2.00 (50%)</td>' in day
    week = row(page, "data-period", "week")
    assert "no quota" in week and "no budget" in week
    assert '<td class="num spend">1.00</td>' in week
    month = row(page, "data-period", "month")
    assert "0% of 100,000" in month and "1.00 / 10.00 (10%)" in month
    # the last 30 days, and the chart of them, the console home's: calls as the console counts them (the
    # calls log, the refused one too), tokens and spend as metered
    assert '<span class="figure" id="days-calls">2</span>' in page
    assert '<span class="figure" id="days-tokens">900</span>' in page
    assert '<span class="figure" id="days-spend">1.00</span>' in page
    bars = re.findall(r'<rect class="bar" data-start="([^"]+)" data-value="(\d+)"', page)
    today = timezone.now().date().isoformat()
    assert [(start[:10], value) for start, value in bars] == [(today, "2"), (today, "900")]


def test_the_overview_reads_the_same_numbers_as_the_apis_usage_endpoint(client, owner):
    owner.group.daily_tokens = 500
    owner.group.save()
    UsageRecordFactory(account=owner, input_tokens=40, output_tokens=2)
    api = client.get("/api/v1/usage", headers=bearer(api_key_for(owner))).json()
    client.force_login(owner)
    day = row(text(client.get("/account/")), "data-period", "day")
    assert api["day"]["used"] == 42 and api["day"]["limit"] == 500
    assert f'<td class="num tokens-used">{api["day"]["used"]}</td>' in day and "8% of 500" in day


def test_a_key_is_generated_with_the_password_shown_once_and_works(signed_in, owner):
    page = text(signed_in.get("/account/key/"))
    assert 'id="no-key"' in page and 'id="key-generate-form"' in page
    r = signed_in.post("/account/key/generate/", {"password": PASSWORD})
    assert r.status_code == 200
    assert "no-store" in r["Cache-Control"]
    key = re.search(r'<code id="new-key" class="account-key">([^<]+)</code>', text(r)).group(1)
    assert KEY_PATTERN.match(key) and key.startswith(f"svc_usr_{owner.pk}_")
    row_ = ApiKey.objects.get(account=owner)
    assert row_.key_hash == digest(key)
    assert (row_.expires_at - timezone.now()).days == 364
    assert signed_in.get("/api/v1/auth/verify", headers=bearer(key)).status_code == 200
    # never shown again: the key's page has its preview alone
    after = text(signed_in.get("/account/key/"))
    assert key not in after
    assert f'<code id="key-preview">{key[:16]}…{key[-8:]}</code>' in after
    assert 'id="key-last-used">never<' in after


def test_a_new_key_replaces_the_old_one_at_once(signed_in, owner):
    old = api_key_for(owner)
    r = signed_in.post("/account/key/generate/", {"password": PASSWORD})
    new = re.search(r'id="new-key" class="account-key">([^<]+)<', text(r)).group(1)
    assert new != old
    assert signed_in.get("/api/v1/auth/verify", headers=bearer(old)).status_code == 401
    assert signed_in.get("/api/v1/auth/verify", headers=bearer(new)).status_code == 200


def test_a_wrong_password_is_refused_and_counts_toward_the_lock(signed_in, owner):
    for _ in range(4):
        r = signed_in.post("/account/key/generate/", {"password": "wrong"})
        assert refused(r) == 422
        assert "The password is incorrect." in text(r)
    assert not ApiKey.objects.filter(account=owner).exists()
    r = signed_in.post("/account/key/generate/", {"password": "wrong"})
    assert refused(r) == 423
    assert "The account is locked" in text(r)
    assert refused(signed_in.post("/account/key/generate/", {"password": PASSWORD})) == 423
    assert not ApiKey.objects.filter(account=owner).exists()


def test_no_password_is_a_clear_refusal(signed_in, owner):
    r = signed_in.post("/account/key/generate/", {})
    assert refused(r) == 422
    assert "Give your password to generate a key." in text(r)
    owner.refresh_from_db()
    assert owner.failed_logins == 0


def test_a_group_without_api_access_gets_no_key(client):
    member = AccountFactory(group=AccountGroupFactory(name="no-api", api_access=False))
    client.force_login(member)
    page = text(client.get("/account/key/"))
    assert 'id="key-refusal"' in page and "has no API access" in page and 'id="key-generate-form"' not in page
    r = client.post("/account/key/generate/", {"password": PASSWORD})
    assert refused(r) == 403 and "has no API access" in text(r)
    assert not ApiKey.objects.filter(account=member).exists()


def test_revoking_stops_the_key_at_once(signed_in, owner):
    key = api_key_for(owner)
    r = signed_in.post("/account/key/revoke/")
    assert r.status_code == 302 and r["Location"] == "/account/key/"
    page = text(signed_in.get("/account/key/"))
    assert "API key revoked: it stops working at once." in page and 'id="no-key"' in page
    assert signed_in.get("/api/v1/auth/verify", headers=bearer(key)).status_code == 401
    signed_in.post("/account/key/revoke/")
    assert "There is no API key to revoke." in text(signed_in.get("/account/key/"))


def test_the_key_page_shows_expiry_and_last_use(signed_in, owner):
    used = timezone.now().replace(microsecond=0) - timedelta(hours=2)
    ApiKeyFactory(account=owner, last_used_at=used)
    page = text(signed_in.get("/account/key/"))
    assert f'id="key-last-used">{used:%Y-%m-%d %H:%M} UTC<' in page
    assert 'id="key-expires">' in page and 'id="key-revoke"' in page


@pytest.mark.parametrize("path", ["/account/", "/account/key/", "/account/calls/", "/account/routines/",
                                  "/account/inbox/"])
def test_each_page_shows_the_accounts_own_rows_only(client, owner, outsider, two_accounts, path):
    for account, mine, theirs in ((owner, "xenon", "krypton"), (outsider, "krypton", "xenon")):
        client.force_login(account)
        r = client.get(path)
        assert r.status_code == 200
        page = text(r)
        assert f'<span id="account-email">{account.email}</span>' in page
        assert theirs not in page.lower() and two_accounts[theirs]["preview"] not in page
        if path in ("/account/", "/account/key/"):
            assert two_accounts[mine]["preview"] in page
        else:
            assert mine in page.lower()


def test_the_calls_list_shows_the_last_calls(signed_in, owner, two_accounts):
    CallRecordFactory(account=owner, status=429, outcome="refused", model="", model_requested="srv/xenon-model",
                      error_code="rate_limit_exceeded", cost_units=0)
    page = text(signed_in.get("/account/calls/"))
    rows = re.findall(r'<tr data-call="(\d+)"', page)
    assert len(rows) == 2 and int(rows[1]) == two_accounts["xenon"]["call"].pk  # newest first
    refused = row(page, "data-call", rows[0])
    assert "429" in refused and "refused" in refused and "rate_limit_exceeded" in refused
    assert "asked: srv/xenon-model" in refused


def test_a_call_routine_and_message_of_the_account_open(signed_in, two_accounts):
    mine = two_accounts["xenon"]
    call = text(signed_in.get(f"/account/calls/{mine['call'].pk}/"))
    assert '<code id="call-request-id">req-xenon</code>' in call
    routine = text(signed_in.get(f"/account/routines/{mine['routine'].pk}/"))
    assert "xenon&#x27;s digest" in routine
    assert "xenon run output" in row(routine, "data-run", mine["run"].pk)
    message = text(signed_in.get(f"/account/inbox/{mine['message'].pk}/"))
    assert '<div class="account-text" id="message-body">xenon body</div>' in message


@pytest.mark.parametrize("kind, path", [("call", "/account/calls/{}/"), ("routine", "/account/routines/{}/"),
                                        ("message", "/account/inbox/{}/")])
def test_an_id_of_the_other_accounts_row_is_a_404(signed_in, two_accounts, kind, path):
    theirs = two_accounts["krypton"][kind].pk
    r = signed_in.get(path.format(theirs))
    assert r.status_code == 404
    assert "krypton" not in text(r)
    assert '<div class="panel" id="not-yours" data-status="404">' in text(r)
    assert signed_in.get(path.format(theirs + 1000)).status_code == 404


def test_another_accounts_message_cannot_be_marked_read(signed_in, two_accounts):
    theirs = two_accounts["krypton"]["message"]
    assert signed_in.post(f"/account/inbox/{theirs.pk}/read/").status_code == 404
    theirs.refresh_from_db()
    assert theirs.read_at is None


def test_a_message_is_marked_read(signed_in, owner, two_accounts):
    mine = two_accounts["xenon"]["message"]
    assert '<span class="badge" id="unread-count">1</span>' in text(signed_in.get("/account/inbox/"))
    r = signed_in.post(f"/account/inbox/{mine.pk}/read/")
    assert r.status_code == 302 and r["Location"] == "/account/inbox/"
    mine.refresh_from_db()
    assert mine.read_at is not None
    page = text(signed_in.get("/account/inbox/"))
    assert 'id="unread-count"' not in page and "unread" not in row(page, "data-message", mine.pk)
    assert f'<a class="link" href="/account/routines/{mine.routine_id}/">xenon&#x27;s digest</a>' in page


def test_the_routines_list_shows_each_last_run(signed_in, owner, two_accounts):
    routine = two_accounts["xenon"]["routine"]
    RunFactory(routine=routine, status=Run.Status.FAILED, error="No model named")
    idle = RoutineFactory(account=owner, name="idle one", uses_ai=False, is_enabled=False)
    page = text(signed_in.get("/account/routines/"))
    assert '<span class="badge run-failed">failed</span>' in row(page, "data-routine", routine.pk)
    quiet = row(page, "data-routine", idle.pk)
    assert "never run" in quiet and "disabled" in quiet and "no model" in quiet


def test_the_pages_ask_no_cache_to_keep_them(signed_in):
    for path in ("/account/", "/account/key/", "/account/calls/", "/account/routines/", "/account/inbox/"):
        assert "no-store" in signed_in.get(path)["Cache-Control"]


def test_no_usage_record_of_another_account_is_counted(client, owner, outsider):
    UsageRecordFactory(account=outsider, input_tokens=777, output_tokens=0)
    client.force_login(owner)
    page = text(client.get("/account/"))
    assert '<span class="figure" id="days-tokens">0</span>' in page
    assert UsageRecord.objects.count() == 1
