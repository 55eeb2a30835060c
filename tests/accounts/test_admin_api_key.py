"""An account's API key in the console. "Generate key" asks first, then shows the
whole key once (the old key dead at once, the new one working over HTTP); "Revoke" asks first; both
are POSTs with the CSRF token, for staff who may change accounts, and land in the admin's history
with the key's preview, never the key."""

import re

import pytest
from django.contrib.admin.models import CHANGE, LogEntry
from django.contrib.auth.models import Permission
from django.test import Client
from django.urls import reverse

from accounts.keys import KEY_PATTERN
from accounts.models import ApiKey
from accounts.secrets import digest
from tests.contract import assert_native_unauthenticated, assert_v1_unauthenticated
from tests.factories import AccountFactory, AccountGroupFactory, api_key_for, bearer

pytestmark = pytest.mark.django_db

VERIFY = "/api/v1/auth/verify"


@pytest.fixture
def operator():
    return AccountFactory(is_staff=True, is_superuser=True, email="operator@example.test")


@pytest.fixture
def admin_client(client, operator):
    client.force_login(operator)
    return client


@pytest.fixture
def holder(group):
    return AccountFactory(group=group, email="holder@example.test")


def change_url(account) -> str:
    return reverse("admin:accounts_account_change", args=[account.pk])


def generate_url(account) -> str:
    return reverse("admin:accounts_account_key_generate", args=[account.pk])


def revoke_url(account) -> str:
    return reverse("admin:accounts_account_key_revoke", args=[account.pk])


def generate_post_url(account) -> str:
    return reverse("admin:accounts_account_key_generate_confirm", args=[account.pk])


def revoke_post_url(account) -> str:
    return reverse("admin:accounts_account_key_revoke_confirm", args=[account.pk])


def shown_key(response) -> str:
    (key,) = re.findall(r'id="api-key" value="([^"]+)"', response.content.decode())
    return key


def test_it_shows_an_account_without_a_key_with_a_generate_link(admin_client, holder):
    page = admin_client.get(change_url(holder)).content.decode()
    assert "No API key." in page
    assert f'id="api-key-generate" href="{generate_url(holder)}"' in page
    assert "api-key-revoke" not in page


def test_generate_asks_first_and_changes_nothing_on_get(admin_client, holder):
    old = api_key_for(holder)
    preview = ApiKey.objects.get(account=holder).preview

    page = admin_client.get(generate_url(holder))

    assert page.status_code == 200
    text = page.content.decode()
    assert f"It replaces the current key {preview} at once" in text
    assert 'id="key-generate-confirm"' in text and 'name="csrfmiddlewaretoken"' in text
    assert f'<form method="post" action="{generate_post_url(holder)}">' in text
    assert admin_client.get(generate_post_url(holder)).status_code == 405  # only a POST makes a key
    assert ApiKey.objects.get(account=holder).key_hash == digest(old)


def test_a_generated_key_is_shown_once_works_and_kills_the_old_one(admin_client, holder):
    old = api_key_for(holder)
    old_preview = ApiKey.objects.get(account=holder).preview
    assert admin_client.get(VERIFY, headers=bearer(old)).status_code == 200  # cached in this process

    response = admin_client.post(generate_post_url(holder))

    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"].split(", ")
    key = shown_key(response)
    assert KEY_PATTERN.match(key) and key.startswith(f"svc_usr_{holder.pk}_")
    row = ApiKey.objects.get(account=holder)
    assert row.key_hash == digest(key) and row.preview == f"{key[:16]}…{key[-8:]}"
    assert f"The key {old_preview} no longer works." in response.content.decode()
    # the new key works, the old one is refused at once, on both surfaces
    verified = admin_client.get(VERIFY, headers=bearer(key))
    assert verified.status_code == 200 and verified.json()["user"]["email"] == "holder@example.test"
    assert_native_unauthenticated(admin_client.get(VERIFY, headers=bearer(old)))
    assert_v1_unauthenticated(admin_client.get("/v1/models", headers=bearer(old)))
    # never shown again: the account's page has the preview only
    page = admin_client.get(change_url(holder)).content.decode()
    assert key not in page and row.preview in page
    # the history says who did it, with the previews only
    entry = LogEntry.objects.get(object_id=str(holder.pk), action_flag=CHANGE)
    assert entry.user.email == "operator@example.test"
    assert entry.get_change_message() == (f"Generated a new API key ({row.preview}); "
                                          f"the key {old_preview} stopped working")
    assert key not in entry.change_message


def test_a_first_key_is_generated_for_an_account_without_one(admin_client, holder):
    key = shown_key(admin_client.post(generate_post_url(holder)))
    assert admin_client.get("/v1/models", headers=bearer(key)).status_code == 200
    assert LogEntry.objects.get(object_id=str(holder.pk)).get_change_message() == (
        f"Generated a new API key ({ApiKey.objects.get(account=holder).preview})")


@pytest.mark.parametrize("change", [{"is_active": False}, {"group_api_access": False}])
def test_no_key_is_generated_for_an_account_whose_key_would_be_refused(admin_client, change):
    group = AccountGroupFactory(name="no-api", api_access=change.get("group_api_access", True))
    account = AccountFactory(group=group, is_active=change.get("is_active", True))

    for response, status in ((admin_client.get(generate_url(account)), 200),
                             (admin_client.post(generate_post_url(account)), 409)):
        assert response.status_code == status
        text = response.content.decode()
        assert 'id="console-confirm-refusal"' in text and 'id="key-generate-confirm"' not in text
    assert not ApiKey.objects.filter(account=account).exists()
    assert not LogEntry.objects.exists()


def test_revoke_asks_first_then_kills_the_key(admin_client, holder):
    key = api_key_for(holder)
    preview = ApiKey.objects.get(account=holder).preview
    assert admin_client.get(VERIFY, headers=bearer(key)).status_code == 200

    asked = admin_client.get(revoke_url(holder))
    assert asked.status_code == 200 and f"The key {preview} stops working at once" in asked.content.decode()
    assert ApiKey.objects.filter(account=holder).exists()

    done = admin_client.post(revoke_post_url(holder), follow=True)

    assert done.redirect_chain == [(change_url(holder), 302)]
    assert [str(m) for m in done.context["messages"]] == [f"The API key {preview} of holder@example.test was revoked."]
    assert not ApiKey.objects.filter(account=holder).exists()
    assert_native_unauthenticated(admin_client.get(VERIFY, headers=bearer(key)))
    assert LogEntry.objects.get(object_id=str(holder.pk)).get_change_message() == f"Revoked the API key ({preview})"


def test_revoking_an_account_without_a_key_says_so(admin_client, holder):
    done = admin_client.post(revoke_post_url(holder), follow=True)
    assert [str(m) for m in done.context["messages"]] == ["holder@example.test has no API key to revoke."]
    assert not LogEntry.objects.exists()


def test_the_actions_need_the_csrf_token(operator, holder):
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    key = api_key_for(holder)

    assert client.post(generate_post_url(holder)).status_code == 403
    assert client.post(revoke_post_url(holder)).status_code == 403

    assert ApiKey.objects.get(account=holder).key_hash == digest(key)
    page = client.get(revoke_url(holder))  # the confirmation's form carries the token
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode()).group(1)
    assert client.post(revoke_post_url(holder), {"csrfmiddlewaretoken": token}).status_code == 302
    assert not ApiKey.objects.filter(account=holder).exists()


def test_only_staff_who_may_change_accounts_reach_the_actions(client, holder):
    key = api_key_for(holder)
    client.force_login(AccountFactory(email="member@example.test"))  # not staff
    for url in (generate_post_url(holder), revoke_post_url(holder)):
        assert client.post(url)["Location"].startswith("/admin/login/")
    for url in (generate_url(holder), revoke_url(holder)):
        assert client.get(url)["Location"].startswith("/admin/login/")
    viewer = AccountFactory(email="viewer@example.test", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_account"))
    client.force_login(viewer)
    for page, action in ((generate_url(holder), generate_post_url(holder)),
                         (revoke_url(holder), revoke_post_url(holder))):
        assert client.get(page).status_code == 403
        assert client.post(action).status_code == 403
    assert ApiKey.objects.get(account=holder).key_hash == digest(key)
    client.force_login(AccountFactory(is_staff=True, is_superuser=True))
    assert client.post(reverse("admin:accounts_account_key_generate_confirm", args=[999999])).status_code == 404


def test_the_page_and_the_list_show_when_the_key_was_last_used(admin_client, holder):
    from datetime import datetime, timezone

    api_key_for(holder)
    ApiKey.objects.filter(account=holder).update(last_used_at=datetime(2026, 3, 4, 5, 6, tzinfo=timezone.utc))
    AccountFactory(email="unused@example.test", group=holder.group)

    page = admin_client.get(change_url(holder)).content.decode()
    assert '<td id="api-key-last-used">2026-03-04 05:06:00 UTC</td>' in page

    listing = admin_client.get(reverse("admin:accounts_account_changelist")).content.decode()
    cells = dict(re.findall(r'<th class="field-email[" ][^>]*><a [^>]+>([^<]+)</a></th>.*?'
                            r'<td class="field-key_last_used[" ][^>]*>([^<]*)</td>', listing, re.S))
    assert cells["holder@example.test"] == "2026-03-04 05:06:00 UTC"
    assert cells["unused@example.test"] == "no key"
