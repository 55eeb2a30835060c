"""The console says what things are: the gateway's name and no "Django
administration", readable section names and labels, one "Groups" entry (the account groups: Django's
permission groups are not offered), objects titled for what they are, one way to write a moment."""

from datetime import datetime, timezone

import pytest

from tests.console_html import labels, list_cells, readonly, text, title
from tests.factories import (
    AccountFactory,
    AccountGroupFactory,
    DeliveryFactory,
    EventFactory,
    InboxMessageFactory,
    LinkedChannelFactory,
    RoutineFactory,
    RunFactory,
    UsageRecordFactory,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def operator(client):
    client.force_login(AccountFactory(email="op@example.test", is_staff=True, is_superuser=True))
    return client


def test_the_console_is_the_gateway_s_with_readable_sections(operator):
    html = operator.get("/admin/").content.decode()
    assert title(html) == "Home | Model gateway"
    for gone in ("Django administration", "Django site admin", "Site administration", ">Native<", "NATIVE"):
        assert gone not in html, gone
    for section in ("Models and usage", "Chat and agents", "Access", "Automation"):
        assert f"\n                            {section}\n" in html or f">{section}<" in html, section
    assert html.count("Account groups") == 1 and ">Groups<" not in html
    assert operator.get("/admin/auth/group/").status_code == 404  # permission groups: not offered


def test_labels_spell_their_acronyms(operator):
    assert {k: v for k, v in labels(operator.get("/admin/gateway/modelserver/add/").content.decode()).items()
            if k in ("id_base_url", "id_api_key")} == {"id_base_url": "Base URL", "id_api_key": "API key"}
    group = AccountGroupFactory(name="research")
    found = labels(operator.get(f"/admin/accounts/accountgroup/{group.pk}/change/").content.decode())
    assert (found["id_api_access"], found["id_response_cache_ttl"]) == ("API access", "Response cache TTL")
    routine = RoutineFactory(name="Digest")
    assert labels(operator.get(f"/admin/routines/routine/{routine.pk}/change/").content.decode())["id_uses_ai"] == \
        "Answered by a model"


def test_objects_are_titled_for_what_they_are(operator):
    routine = RoutineFactory(name="Digest")
    event = EventFactory(routine=routine, event_id="evt-42", source="webhook")
    run = RunFactory(routine=routine, source_event=event, status="failed")
    DeliveryFactory(run=run, target="inapp", status="failed")
    page = operator.get(f"/admin/routines/run/{run.pk}/change/").content.decode()
    assert "evt-42" in readonly(page)["Source event"] and "object" not in readonly(page)["Source event"]
    assert "Delivery to inapp (failed)" in page and "object (" not in page
    message = InboxMessageFactory(title="Your digest is ready")
    assert title(operator.get(f"/admin/routines/inboxmessage/{message.pk}/change/").content.decode()).startswith(
        "Your digest is ready |")
    channel = LinkedChannelFactory(kind="telegram", address="12345")
    assert title(operator.get(f"/admin/routines/linkedchannel/{channel.pk}/change/").content.decode()).startswith(
        "Telegram 12345 |")


def test_a_moment_is_written_one_way(operator):
    UsageRecordFactory(created_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc))
    html = operator.get("/admin/gateway/usagerecord/").content.decode()
    assert list_cells(html, "created_at") == ["2026-01-02 03:04:05 UTC"]


def test_an_object_is_named_as_written_in_the_page_s_header(operator):
    account = AccountFactory(email="alice@example.test")
    html = operator.get(f"/admin/accounts/account/{account.pk}/change/").content.decode()
    header = html.split("<h1", 1)[1].split(">", 1)[1].split("</h1>", 1)[0]
    assert [text(part) for part in header.split("chevron_right")] == ["Access", "Accounts", "alice@example.test"]
    routine = RoutineFactory(name="Digest")
    html = operator.get(f"/admin/routines/routine/{routine.pk}/change/").content.decode()
    header = html.split("<h1", 1)[1].split(">", 1)[1].split("</h1>", 1)[0]
    assert [text(part) for part in header.split("chevron_right")] == ["Automation", "Routines", "Digest"]
