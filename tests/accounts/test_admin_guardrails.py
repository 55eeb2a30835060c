"""The group page's guardrails: written as YAML or JSON, checked by the guard's parser with every mistake shown
at its place, and a webhook's secret write-only (never on a page, kept when an edit leaves it out, masked in
the audit trail)."""

import html
import json
import re

import pytest
from auditlog.models import LogEntry
from django.db import connection
from django.urls import reverse

from accounts.models import AccountGroup
from tests.console_html import list_cells
from tests.factories import AccountFactory, AccountGroupFactory

pytestmark = pytest.mark.django_db

SECRET = "whsec-0123456789-typed-once"
NEW_SECRET = "whsec-9876543210-rotated"
HOOK = {"check": "webhook", "on": "both", "url": "https://guard.internal/check", "fail": "open", "timeout": 1}


@pytest.fixture
def admin_client(client):
    client.force_login(AccountFactory(is_staff=True, is_superuser=True, email="operator@example.test"))
    return client


def group_form(group, guardrails: str) -> dict:
    return {"name": group.name, "api_access": "on", "all_models": "on", "daily_tokens": -1, "weekly_tokens": -1,
            "monthly_tokens": -1, "daily_budget": -1, "weekly_budget": -1, "monthly_budget": -1,
            "remote_servers_allowed": "on", "attachments_per_message": 10, "response_cache_ttl": 0,
            "guardrails": guardrails, "_save": "Save"}


def textarea(page: str) -> str:
    found = re.search(r'<textarea[^>]*name="guardrails"[^>]*>(.*?)</textarea>', page, re.S)
    assert found, "no guardrails field on the page"
    return html.unescape(found.group(1)).removeprefix("\n")


def stored(group) -> list:
    return AccountGroup.objects.get(pk=group.pk).guardrails


def test_the_list_is_written_in_yaml_stored_as_a_list_and_shown_again_without_the_webhooks_secret(admin_client):
    group = AccountGroupFactory(name="careful")
    url = reverse("admin:accounts_accountgroup_change", args=[group.pk])
    assert textarea(admin_client.get(url).content.decode()) == ""
    text = ("- {check: pii, on: input, action: redact, restore: true, entities: [email, card]}\n"
            "- {check: secrets, on: both, action: block}\n"
            f'- {{check: webhook, on: both, url: "https://guard.internal/check", secret: {SECRET}, fail: open, '
            "timeout: 1}\n")

    answer = admin_client.post(url, group_form(group, text))

    assert answer.status_code == 302, answer.content.decode()[:3000]
    assert stored(group) == [
        {"check": "pii", "on": "input", "action": "redact", "restore": True, "entities": ["email", "card"]},
        {"check": "secrets", "on": "both", "action": "block"}, {**HOOK, "secret": SECRET}]
    page = admin_client.get(url).content.decode()
    assert SECRET not in page
    shown = textarea(page)
    assert shown == ("- {check: pii, 'on': input, action: redact, restore: true, entities: [email, card]}\n"
                     "- {check: secrets, 'on': both, action: block}\n"
                     "- {check: webhook, 'on': both, url: 'https://guard.internal/check', fail: open, timeout: 1}\n")
    listing = admin_client.get(reverse("admin:accounts_accountgroup_changelist")).content.decode()
    assert list_cells(listing, "guardrails_checks")[list_cells(listing, "name").index("careful")] == (
        "pii, secrets, webhook")

    # saved again as shown: the secret stays; a new one replaces it; an empty one clears it
    assert admin_client.post(url, group_form(group, shown)).status_code == 302
    assert stored(group)[2] == {**HOOK, "secret": SECRET}
    retyped = shown.replace("fail: open,", f"fail: open, secret: {NEW_SECRET},")
    assert admin_client.post(url, group_form(group, retyped)).status_code == 302
    assert stored(group)[2] == {**HOOK, "secret": NEW_SECRET}
    cleared = shown.replace("fail: open,", 'fail: open, secret: "",')
    assert admin_client.post(url, group_form(group, cleared)).status_code == 302
    assert stored(group)[2] == HOOK


def test_json_is_read_too_and_an_empty_field_is_no_guardrails(admin_client):
    group = AccountGroupFactory(name="careful", guardrails=[{"check": "secrets"}])
    url = reverse("admin:accounts_accountgroup_change", args=[group.pk])

    text = json.dumps([{"check": "words", "on": "both", "action": "redact", "words": ["ProjectX"]}])
    assert admin_client.post(url, group_form(group, text)).status_code == 302
    assert stored(group) == [{"check": "words", "on": "both", "action": "redact", "words": ["ProjectX"]}]

    assert admin_client.post(url, group_form(group, "  \n")).status_code == 302
    assert stored(group) == []


def test_every_mistake_is_shown_at_its_place_nothing_is_saved_and_the_typed_secret_is_not_shown_back(admin_client):
    group = AccountGroupFactory(name="careful", guardrails=[{"check": "secrets"}])
    url = reverse("admin:accounts_accountgroup_change", args=[group.pk])
    text = ("- {check: injection, on: input, action: redact}\n"
            f"- {{check: webhook, url: 'https://guard.internal/check', secret: {SECRET}, fail: sometimes}}\n")

    answer = admin_client.post(url, group_form(group, text))

    page = answer.content.decode()
    assert answer.status_code == 200
    assert "guardrails[0].action: must be one of block, log" in html.unescape(page)
    assert "guardrails[1].fail: must be one of open, closed" in html.unescape(page)
    assert SECRET not in page
    assert "fail: sometimes" in textarea(page)
    assert stored(group) == [{"check": "secrets"}]

    for text, message in (("- {check: secrets\n", "not YAML or JSON"), ("check: secrets", "guardrails: must be a list"),
                          ("- [secrets]", "guardrails[0]: must be a mapping")):
        page = html.unescape(admin_client.post(url, group_form(group, text)).content.decode())
        assert message in page, text
    broken = f"- {{check: webhook, secret: {SECRET}, url: 'x'\n"
    page = admin_client.post(url, group_form(group, broken)).content.decode()
    assert "not YAML or JSON" in html.unescape(page) and SECRET not in page
    assert stored(group) == [{"check": "secrets"}]


def test_the_audit_trail_masks_the_webhooks_secret_and_keeps_the_rest(admin_client):
    group = AccountGroupFactory(name="careful")
    url = reverse("admin:accounts_accountgroup_change", args=[group.pk])
    text = f"- {{check: webhook, on: both, url: 'https://guard.internal/check', secret: {SECRET}, timeout: 1}}\n"

    assert admin_client.post(url, group_form(group, text)).status_code == 302
    assert admin_client.post(url, group_form(group, text.replace(SECRET, NEW_SECRET))).status_code == 302

    entries = [e for e in LogEntry.objects.get_for_object(group).order_by("pk") if e.action == LogEntry.Action.UPDATE]
    assert [json.loads(after) for _, after in (e.changes_dict["guardrails"] for e in entries)] == [
        [{"check": "webhook", "on": "both", "url": "https://guard.internal/check", "secret": "********",
          "timeout": 1}]] * 2
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {LogEntry._meta.db_table}")
        table = repr(cursor.fetchall())
    trail = admin_client.get(reverse("admin:accounts_accountgroup_auditlog", args=[group.pk]))
    assert trail.status_code == 200 and "guard.internal" in trail.content.decode()
    for text in (table, trail.content.decode()):
        for secret in (SECRET, NEW_SECRET):
            assert secret not in text and secret[len(secret) // 2:] not in text


def test_a_new_group_is_made_with_its_guardrails(admin_client):
    url = reverse("admin:accounts_accountgroup_add")
    assert 'name="guardrails"' in admin_client.get(url).content.decode()
    data = group_form(AccountGroup(name="fresh"), f"- {{check: webhook, url: 'https://g.test/', secret: {SECRET}}}")

    assert admin_client.post(url, data).status_code == 302

    assert AccountGroup.objects.get(name="fresh").guardrails == [
        {"check": "webhook", "url": "https://g.test/", "secret": SECRET}]


def test_staff_who_may_only_view_groups_see_the_checks_without_the_secret(client):
    from django.contrib.auth.models import Permission

    viewer = AccountFactory(is_staff=True, email="viewer@example.test")
    viewer.user_permissions.add(Permission.objects.get(codename="view_accountgroup"))
    client.force_login(viewer)
    group = AccountGroupFactory(name="careful", guardrails=[{**HOOK, "secret": SECRET}, {"check": "secrets"}])

    page = client.get(reverse("admin:accounts_accountgroup_change", args=[group.pk]))

    assert page.status_code == 200
    text = page.content.decode()
    assert SECRET not in text and 'name="guardrails"' not in text
    assert "guard.internal/check" in html.unescape(text) and "check: secrets" in html.unescape(text)
