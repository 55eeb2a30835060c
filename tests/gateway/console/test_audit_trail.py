"""The console's audit trail (django-auditlog): a staff user's change to a group's quota,
a server's API key and a model's price each leave one entry with the operator and the changed fields, seen
in the audit log's list and on the object's own audit trail page; a server's key never appears in the log
or its pages; keys issued and revoked are entries too; and the API's hot path writes none and makes no
query more than without the audit trail."""

from decimal import Decimal
from html.parser import HTMLParser

import pytest
from auditlog.models import LogEntry
from auditlog.registry import auditlog
from django.conf import settings
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from accounts.keys import api_key_generate
from accounts.models import AccountGroup, ApiKey
from gateway.console import audit_trail
from gateway.models import Model, ModelServer
from tests.factories import (
    AccountFactory,
    AccountGroupFactory,
    ModelFactory,
    ModelServerFactory,
    api_key_for,
    bearer,
    session_for,
)
from tests.servers import wait_for_quiet_database
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture

OLD_KEY = "sk-old-0123456789abcdefghijklmnopqrstuv"
NEW_KEY = "sk-new-zyxwvutsrqponmlkjihgfedcba987654"


class FormFields(HTMLParser):
    """What a browser sends for the form with this id: inputs, checked boxes, selected options, text areas."""

    def __init__(self, form_id):
        super().__init__(convert_charrefs=True)
        self.form_id, self.inside, self.fields = form_id, False, []
        self.select, self.options, self.textarea = None, [], None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form":
            self.inside = a.get("id") == self.form_id
        if not self.inside or "disabled" in a:
            return
        if tag == "input" and a.get("name"):
            kind = a.get("type", "text")
            if kind in ("checkbox", "radio") and "checked" not in a or kind in ("submit", "button", "file", "image"):
                return
            self.fields.append((a["name"], a.get("value", "on" if kind in ("checkbox", "radio") else "")))
        elif tag == "select" and a.get("name"):
            self.select, self.options = (a["name"], "multiple" in a), []
        elif tag == "option" and self.select:
            self.options.append((a.get("value", ""), "selected" in a))
        elif tag == "textarea" and a.get("name"):
            self.textarea = [a["name"], ""]

    def handle_data(self, data):
        if self.textarea is not None:
            self.textarea[1] += data

    def handle_endtag(self, tag):
        if tag == "form":
            self.inside = False
        elif tag == "select" and self.select:
            (name, multiple), chosen = self.select, [value for value, selected in self.options if selected]
            if not chosen and not multiple and self.options:
                chosen = [self.options[0][0]]
            self.fields += [(name, value) for value in chosen]
            self.select = None
        elif tag == "textarea" and self.textarea is not None:
            self.fields.append((self.textarea[0], self.textarea[1].removeprefix("\n")))
            self.textarea = None


def change(client, url, form_id, **changes):
    """Open an object's change page and save it as a browser would, with `changes` typed in."""
    parser = FormFields(form_id)
    page = client.get(url)
    assert page.status_code == 200
    parser.feed(page.content.decode())
    data = {}
    for name, value in parser.fields:
        data.setdefault(name, []).append(value)
    assert data, f"no form {form_id} on {url}"
    for name, value in changes.items():
        data[name] = [value]
    answer = client.post(url, {**{k: v if len(v) > 1 else v[0] for k, v in data.items()}, "_save": "Save"})
    assert answer.status_code == 302, answer.content.decode()[:3000]
    return answer


@pytest.fixture
def operator(db):
    return AccountFactory(email="operator@example.test", is_staff=True, is_superuser=True)


@pytest.fixture
def console(client, operator):
    client.force_login(operator)
    return client


def entries_of(obj):
    return list(LogEntry.objects.get_for_object(obj).order_by("pk"))


def test_a_groups_quota_changed_in_the_console_is_one_entry_with_the_operator_and_the_field(console, operator):
    group = AccountGroupFactory(name="research", daily_tokens=-1)
    before = LogEntry.objects.count()
    change(console, reverse("admin:accounts_accountgroup_change", args=[group.pk]), "accountgroup_form",
           daily_tokens="100000")
    assert AccountGroup.objects.get(pk=group.pk).daily_tokens == 100_000
    assert LogEntry.objects.count() == before + 1
    [entry] = [e for e in entries_of(group) if e.action == LogEntry.Action.UPDATE]
    assert (entry.actor, entry.actor_email) == (operator, "operator@example.test")
    assert entry.changes_dict == {"daily_tokens": [-1, 100000]}
    assert entry.remote_addr == "127.0.0.1"


def test_a_models_price_changed_in_the_console_is_one_entry(console, operator):
    model = ModelFactory(server=ModelServerFactory(name="cloud"), name="gpt", output_price="0.6")
    before = LogEntry.objects.count()
    change(console, reverse("admin:gateway_model_change", args=[model.pk]), "model_form", output_price="1.25")
    assert Model.objects.get(pk=model.pk).output_price == Decimal("1.25")
    assert LogEntry.objects.count() == before + 1
    [entry] = [e for e in entries_of(model) if e.action == LogEntry.Action.UPDATE]
    assert entry.actor == operator
    assert set(entry.changes_dict) == {"output_price"}
    assert [Decimal(v) for v in entry.changes_dict["output_price"]] == [Decimal("0.6"), Decimal("1.25")]


def test_a_servers_new_api_key_is_one_entry_that_says_it_changed_and_never_what_it_is(console, operator):
    server = ModelServerFactory(name="cloud", base_url="http://127.0.0.1:9/v1", api_key=OLD_KEY)
    before = LogEntry.objects.count()
    change(console, reverse("admin:gateway_modelserver_change", args=[server.pk]), "modelserver_form",
           api_key=NEW_KEY)
    assert ModelServer.objects.get(pk=server.pk).api_key == NEW_KEY
    assert LogEntry.objects.count() == before + 1
    [entry] = [e for e in entries_of(server) if e.action == LogEntry.Action.UPDATE]
    assert entry.actor == operator
    assert entry.changes_dict == {"api_key": ["********", "********"]}

    # nowhere in the table (every column of every row) nor on the pages that show it
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {LogEntry._meta.db_table}")
        table = repr(cursor.fetchall())
    pages = [console.get(reverse("admin:auditlog_logentry_changelist")),
             console.get(reverse("admin:auditlog_logentry_change", args=[entry.pk])),
             console.get(reverse("admin:gateway_modelserver_auditlog", args=[server.pk]))]
    assert [p.status_code for p in pages] == [200, 200, 200]
    for text in (table, *(p.content.decode() for p in pages)):
        for secret in (OLD_KEY, NEW_KEY):
            assert secret not in text and secret[len(secret) // 2:] not in text
    trail = pages[2].content.decode()
    assert "operator@example.test" in trail and "API key" in trail and "********" in trail


def test_each_audited_objects_page_links_its_audit_trail(console):
    server = ModelServerFactory(name="cloud")
    group = AccountGroupFactory(name="research")
    for name, obj in (("gateway_modelserver", server), ("accounts_accountgroup", group)):
        trail = reverse(f"admin:{name}_auditlog", args=[obj.pk])
        assert f'href="{trail}"' in console.get(reverse(f"admin:{name}_change", args=[obj.pk])).content.decode()
        page = console.get(trail)
        assert page.status_code == 200 and "Audit trail" in page.content.decode()


def test_the_audit_pages_are_for_staff_only(client, console):
    group = AccountGroupFactory(name="research")
    trail = reverse("admin:accounts_accountgroup_auditlog", args=[group.pk])
    log = reverse("admin:auditlog_logentry_changelist")
    assert console.get(log).status_code == 200
    client.logout()
    client.force_login(AccountFactory(email="member@example.test", is_staff=False))
    for url in (trail, log):
        answer = client.get(url)
        assert answer.status_code == 302 and answer["Location"].startswith("/admin/login/")


def test_a_key_issued_and_revoked_in_the_console_are_entries_with_the_operator_and_no_hash(console, operator):
    account = AccountFactory(email="dev@example.test", group=AccountGroupFactory(name="team", api_access=True))
    old = api_key_generate(account=account)  # issued before, elsewhere: no console user
    old_row = ApiKey.objects.get(account=account)
    url = reverse("admin:accounts_account_key_generate_confirm", args=[account.pk])
    assert console.post(url).status_code == 200  # the page showing the new key once
    new_row = ApiKey.objects.get(account=account)
    assert console.post(reverse("admin:accounts_account_key_revoke_confirm", args=[account.pk])).status_code == 302
    keys = LogEntry.objects.filter(content_type__model="apikey").order_by("pk")
    assert [(e.action, e.object_repr, e.actor) for e in keys] == [
        (LogEntry.Action.CREATE, old_row.preview, None),
        (LogEntry.Action.DELETE, old_row.preview, operator),
        (LogEntry.Action.CREATE, new_row.preview, operator),
        (LogEntry.Action.DELETE, new_row.preview, operator)]
    assert set(keys[2].changes_dict) == {"account", "preview", "created_at", "expires_at"}
    assert keys[2].changes_dict["account"] == [None, "dev@example.test"]
    text = repr(list(LogEntry.objects.values_list()))
    assert old_row.key_hash not in text and new_row.key_hash not in text and old.key not in text


def test_the_hot_path_writes_no_entry_and_makes_no_query_more(transactional_db, client, upstream):  # noqa: F811
    account = AccountFactory(group=AccountGroupFactory(name="team", api_access=True))
    key, session = api_key_for(account), session_for(account)
    ModelFactory(server=ModelServerFactory(name="oa", base_url=f"{upstream.url}/v1"), name="echo-1", is_default=True)
    body = {"model": "oa/echo-1", "messages": [{"role": "user", "content": "hi"}]}

    def call():
        with CaptureQueriesContext(connection) as queries:
            answer = client.post("/v1/chat/completions", body, content_type="application/json", headers=bearer(key))
        assert answer.status_code == 200, answer.content
        return [q["sql"] for q in queries.captured_queries]

    call()  # warm
    before = LogEntry.objects.count()
    with_trail = call()
    assert LogEntry.objects.count() == before
    assert not [sql for sql in with_trail if "auditlog" in sql]
    followed = auditlog.get_models()
    for model in followed:
        auditlog.unregister(model)
    try:
        without_trail = call()
    finally:
        audit_trail.follow(settings.AUDIT_TRAIL_MODELS)
    assert set(auditlog.get_models()) == set(followed)
    assert len(with_trail) == len(without_trail), (with_trail, without_trail)
    assert client.get("/api/v1/auth/verify", headers=bearer(session)).status_code == 200
    wait_for_quiet_database()


SECRET_WORDS = ("key", "secret", "token", "hash", "password", "auth")


def test_every_followed_column_that_could_hold_a_secret_is_left_out_or_masked():
    """A column named like a secret (now or added later) is never written as it is."""
    exposed = []
    for model in auditlog.get_models():
        fields = auditlog.get_model_fields(model)
        for name in fields["include_fields"]:
            field = model._meta.get_field(name)
            secret_like = bool(set(name.split("_")) & set(SECRET_WORDS)) and not field.is_relation
            if secret_like and name not in fields["mask_fields"]:
                exposed.append(f"{model._meta.label}.{name}")
    assert exposed == ["native.McpServer.auth_header_name"]  # the header's name (Authorization), not its value
    assert {m._meta.label for m in auditlog.get_models()} == set(settings.AUDIT_TRAIL_MODELS)


def test_an_entry_holds_the_objects_own_fields_not_the_relations_of_others(console):
    group = AccountGroupFactory(name="research")
    [created] = entries_of(group)
    assert created.action == LogEntry.Action.CREATE and created.actor is None  # made here, not in the console
    assert "accounts" not in created.changes_dict and "id" not in created.changes_dict
    assert created.changes_dict["name"] == [None, "research"]
