"""The operator console (/admin/): pages answer, secrets stay hidden, locks and write-only keys work,
budgets are set per group and per account."""

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.admin.models import LogEntry
from django.urls import reverse
from django.utils import timezone

from accounts.keys import api_key_generate
from accounts.models import ApiKey
from tests.console_html import labels, list_cells, section, section_titles
from tests.factories import AccountFactory, AccountGroupFactory, ModelFactory, ModelServerFactory

pytestmark = pytest.mark.django_db

SERVER_KEY = "sk-stored-upstream-secret-0123456789"


@pytest.fixture
def operator():
    return AccountFactory(is_staff=True, is_superuser=True, email="operator@example.test")


@pytest.fixture
def admin_client(client, operator):
    client.force_login(operator)
    return client


def server_form_data(page_html: str, server, **overrides) -> dict:
    """The whole model-server change form as the browser would send it, management form included."""
    prefix = re.search(r'name="([\w-]+)-TOTAL_FORMS"', page_html).group(1)
    data = {
        "name": server.name,
        "kind": server.kind,
        "base_url": server.base_url,
        "api_key": "",
        "is_remote": "on" if server.is_remote else "",
        "enabled": "on" if server.enabled else "",
        "connect_timeout": str(server.connect_timeout),
        "read_timeout": str(server.read_timeout),
        "drop_unsupported_fields": "on" if server.drop_unsupported_fields else "",
        "structured_output": server.structured_output,
        f"{prefix}-TOTAL_FORMS": "0",
        f"{prefix}-INITIAL_FORMS": "0",
        f"{prefix}-MIN_NUM_FORMS": "0",
        f"{prefix}-MAX_NUM_FORMS": "1000",
        "_save": "Save",
    }
    data.update(overrides)
    return {key: value for key, value in data.items() if value != ""}


def test_it_answers_the_changelists_of_accounts_groups_servers_and_models(admin_client):
    group = AccountGroupFactory(name="research")
    account = AccountFactory(group=group, email="listed@example.test")
    model = ModelFactory(name="llama-listed", server=ModelServerFactory(name="gpu-box", api_key=SERVER_KEY))

    pages = {
        "admin:accounts_account_changelist": account.email,
        "admin:accounts_accountgroup_changelist": group.name,
        "admin:gateway_modelserver_changelist": model.server.name,
        "admin:gateway_model_changelist": model.public_id,
    }
    for url_name, shown in pages.items():
        response = admin_client.get(reverse(url_name))
        assert response.status_code == 200, url_name
        assert shown in response.content.decode(), url_name
    assert SERVER_KEY not in admin_client.get(reverse("admin:gateway_modelserver_changelist")).content.decode()


def test_it_shows_the_api_key_preview_but_never_the_key_or_its_hash(admin_client):
    account = AccountFactory(email="keyholder@example.test")
    issued = api_key_generate(account=account)
    row = ApiKey.objects.get(account=account)

    response = admin_client.get(reverse("admin:accounts_account_change", args=[account.pk]))

    assert response.status_code == 200
    html = response.content.decode()
    assert row.preview in html
    assert issued.key not in html
    assert issued.key[16:-8] not in html  # the part the preview leaves out
    assert row.key_hash not in html


def test_it_filters_the_accounts_locked_now(admin_client):
    locked = AccountFactory(email="locked@example.test", locked_until=timezone.now() + timedelta(minutes=20),
                            failed_logins=5)
    expired = AccountFactory(email="expired-lock@example.test", locked_until=timezone.now() - timedelta(minutes=1))
    free = AccountFactory(email="free@example.test")
    url = reverse("admin:accounts_account_changelist")

    unfiltered = admin_client.get(url).content.decode()
    assert locked.email in unfiltered and free.email in unfiltered and expired.email in unfiltered

    response = admin_client.get(url, {"locked": "yes"})
    assert response.status_code == 200
    html = response.content.decode()
    assert locked.email in html
    assert free.email not in html
    assert expired.email not in html


def test_it_unlocks_the_selected_accounts(admin_client):
    locked = AccountFactory(locked_until=timezone.now() + timedelta(minutes=20), failed_logins=5)
    other = AccountFactory(locked_until=timezone.now() + timedelta(minutes=20), failed_logins=5)

    response = admin_client.post(
        reverse("admin:accounts_account_changelist"),
        {"action": "unlock_accounts", "_selected_action": [locked.pk]},
    )

    assert response.status_code == 302
    locked.refresh_from_db()
    other.refresh_from_db()
    assert locked.locked_until is None
    assert locked.failed_logins == 0
    assert not locked.is_locked()
    assert other.is_locked() and other.failed_logins == 5  # not selected, left alone
    follow = admin_client.get(response["Location"]).content.decode()
    assert "Unlocked 1 account(s)." in follow


def test_it_never_renders_the_stored_server_api_key(admin_client):
    server = ModelServerFactory(name="cloud", api_key=SERVER_KEY, is_remote=True)
    ModelFactory(server=server, name="gpt-x")

    response = admin_client.get(reverse("admin:gateway_modelserver_change", args=[server.pk]))

    assert response.status_code == 200
    html = response.content.decode()
    assert 'name="api_key"' in html
    assert 'name="clear_api_key"' in html
    assert SERVER_KEY not in html


def test_it_keeps_the_stored_server_key_when_the_field_is_left_empty(admin_client):
    server = ModelServerFactory(name="cloud", api_key=SERVER_KEY, read_timeout=120.0)
    url = reverse("admin:gateway_modelserver_change", args=[server.pk])
    page = admin_client.get(url).content.decode()
    assert 'name="models-TOTAL_FORMS"' in page

    response = admin_client.post(url, server_form_data(page, server, read_timeout="45"))

    assert response.status_code == 302, response.content.decode()[:2000]
    server.refresh_from_db()
    assert server.read_timeout == 45.0  # the form was saved
    assert server.api_key == SERVER_KEY
    history = LogEntry.objects.get(object_id=str(server.pk)).get_change_message()
    assert history == "Changed Read timeout."


@pytest.mark.parametrize(
    "entered, stored",
    [({"api_key": "sk-new-key"}, "sk-new-key"), ({"clear_api_key": "on"}, "")],
    ids=["replaces-with-a-new-key", "clears-when-asked"],
)
def test_it_changes_the_stored_server_key_only_on_purpose(admin_client, entered, stored):
    server = ModelServerFactory(name="cloud", api_key=SERVER_KEY)
    url = reverse("admin:gateway_modelserver_change", args=[server.pk])
    page = admin_client.get(url).content.decode()

    response = admin_client.post(url, server_form_data(page, server, **entered))

    assert response.status_code == 302, response.content.decode()[:2000]
    server.refresh_from_db()
    assert server.api_key == stored


def test_it_redirects_a_non_staff_account_to_the_admin_login(client):
    client.force_login(AccountFactory(is_staff=False))

    for url in [reverse("admin:index"), reverse("admin:accounts_account_changelist")]:
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith(reverse("admin:login")), url
        assert "next=" in response["Location"], url


def test_usage_is_listed_and_read_only(admin_client):
    from gateway.calls.metering import meter
    from gateway.state.per_process import flush_all

    account = AccountFactory(email="metered@example.test")
    meter(account_id=account.pk, model="oa/echo-1", surface="messages", input_tokens=5, output_tokens=7)
    assert flush_all()
    listing = admin_client.get(reverse("admin:gateway_usagerecord_changelist"))
    assert listing.status_code == 200
    assert "metered@example.test" in listing.content.decode()
    assert admin_client.get(reverse("admin:gateway_usagerecord_add")).status_code == 403


def group_form(group, **budgets) -> dict:
    data = {"name": group.name, "api_access": "on", "all_models": "on", "daily_tokens": -1, "weekly_tokens": -1,
            "monthly_tokens": -1, "daily_budget": -1, "weekly_budget": -1, "monthly_budget": -1,
            "remote_servers_allowed": "on", "attachments_per_message": 10, "response_cache_ttl": 0}
    return {**data, **budgets}


def test_a_groups_budgets_are_set_beside_its_token_quotas_in_the_currency(admin_client, settings):
    settings.CURRENCY = "EUR"
    group = AccountGroupFactory(name="research", weekly_budget="12.5")
    url = reverse("admin:accounts_accountgroup_change", args=[group.pk])
    html = admin_client.get(url).content.decode()
    quotas = section(html, "Token quotas and budgets (EUR)")
    assert re.findall(r'name="(\w+)"', quotas) == ["daily_tokens", "weekly_tokens", "monthly_tokens",
                                                   "daily_budget", "weekly_budget", "monthly_budget"]
    assert labels(quotas)["id_weekly_budget"] == "Weekly budget (EUR)"
    assert 'name="weekly_budget" value="12.5"' in quotas and 'name="daily_budget" value="no limit"' in quotas

    response = admin_client.post(url, group_form(group, daily_budget="2.75", monthly_budget="100"))

    assert response.status_code == 302, response.content.decode()[:2000]
    group.refresh_from_db()
    assert (group.daily_budget, group.weekly_budget, group.monthly_budget) == (
        Decimal("2.75"), Decimal("-1"), Decimal("100"))
    listing = admin_client.get(reverse("admin:accounts_accountgroup_changelist")).content.decode()
    assert "day 2.75 · month 100 EUR" in list_cells(listing, "budgets")


def test_a_groups_file_storage_quota_is_a_number_of_bytes_or_no_limit(admin_client):
    group = AccountGroupFactory(name="research")
    url = reverse("admin:accounts_accountgroup_change", args=[group.pk])
    assert 'name="file_storage_bytes" value="10737418240"' in admin_client.get(url).content.decode()

    response = admin_client.post(url, group_form(group, file_storage_bytes="1000"))
    assert response.status_code == 302, response.content.decode()[:2000]
    group.refresh_from_db()
    assert group.file_storage_bytes == 1000
    admin_client.post(url, group_form(group, file_storage_bytes="no limit"))
    group.refresh_from_db()
    assert group.file_storage_bytes == -1
    assert 'name="file_storage_bytes" value="no limit"' in admin_client.get(url).content.decode()


def test_no_limit_is_written_and_shown_as_words_and_stored_as_minus_one(admin_client):
    group = AccountGroupFactory(name="research", daily_tokens=1000)
    url = reverse("admin:accounts_accountgroup_change", args=[group.pk])
    quotas = section(admin_client.get(url).content.decode(), "Token quotas and budgets (USD)")
    assert 'name="daily_tokens" value="1000"' in quotas and 'name="weekly_tokens" value="no limit"' in quotas
    assert "-1" not in re.findall(r'value="([^"]*)"', quotas)

    response = admin_client.post(url, group_form(group, daily_tokens="No Limit", weekly_tokens="", monthly_tokens="-1",
                                                 daily_budget="no limit", weekly_budget="", monthly_budget="3"))

    assert response.status_code == 302, response.content.decode()[:2000]
    group.refresh_from_db()
    assert (group.daily_tokens, group.weekly_tokens, group.monthly_tokens) == (-1, -1, -1)
    assert (group.daily_budget, group.weekly_budget, group.monthly_budget) == (Decimal(-1), Decimal(-1), Decimal(3))
    listing = admin_client.get(reverse("admin:accounts_accountgroup_changelist")).content.decode()
    row = list_cells(listing, "name").index("research")  # the admin's own account has a group too
    assert list_cells(listing, "daily_ceiling")[row] == "no limit"
    assert list_cells(listing, "budgets")[row] == "month 3 USD"
    response = admin_client.post(url, group_form(group, daily_tokens="lots"))
    assert response.status_code == 200 and "A whole number, or “no limit”." in response.content.decode()


def test_a_budget_below_zero_other_than_minus_one_is_refused(admin_client):
    group = AccountGroupFactory(name="research")
    response = admin_client.post(reverse("admin:accounts_accountgroup_change", args=[group.pk]),
                                 group_form(group, weekly_budget="-2"))
    assert response.status_code == 200
    assert "A budget is “no limit” or an amount of at least 0." in response.content.decode()
    group.refresh_from_db()
    assert group.weekly_budget == -1


def test_an_accounts_own_budgets_override_its_groups(admin_client):
    group = AccountGroupFactory(name="<b>research</b>", daily_budget=5, monthly_budget="99.5")
    account = AccountFactory(email="own@example.test", group=group)
    url = reverse("admin:accounts_account_change", args=[account.pk])
    html = admin_client.get(url).content.decode()
    assert "Budgets (USD)" in section_titles(html)
    assert "Empty: the group's (&lt;b&gt;research&lt;/b&gt;: day 5, week no limit, month 99.5)" in html
    own = re.search(r'<input[^>]*name="weekly_budget"[^>]*>', html).group(0)  # empty: the group's, not no limit
    assert 'placeholder="the group&#x27;s"' in own and "value=" not in own
    data = {"email": account.email, "full_name": account.full_name, "group": group.pk, "role": account.role,
            "is_active": "on", "daily_budget": "0.5", "weekly_budget": "", "monthly_budget": "-1"}

    response = admin_client.post(url, data)

    assert response.status_code == 302, response.content.decode()[:2000]
    account.refresh_from_db()
    assert (account.daily_budget, account.weekly_budget, account.monthly_budget) == (
        Decimal("0.5"), None, Decimal("-1"))
    response = admin_client.post(url, {**data, "daily_budget": "-0.5"})
    assert "A budget is “no limit” or an amount of at least 0." in response.content.decode()
