"""The console's Files page: every account's files (the operator's, another's), newest first, with their size
written for people and their expiry; filtered by purpose, searched by id, name or e-mail; a file's page is read
only; deleting (the page's Delete, the list's action) goes as the API deletes, bytes with the row; staff need the
model's permissions, as on every console page."""

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import Permission
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.test import Client

from gateway.files import store
from gateway.models import StoredFile
from tests.console_html import list_headers, list_rows, readonly, submit_buttons, text
from tests.factories import AccountFactory, StoredFileFactory

pytestmark = pytest.mark.django_db

LIST = "/admin/gateway/storedfile/"
CREATED = datetime(2026, 11, 20, 9, 30, tzinfo=UTC)


@pytest.fixture
def console(client):
    client.force_login(AccountFactory(email="op@example.test", is_staff=True, is_superuser=True))
    return client


@pytest.fixture
def files():
    ana, bob = AccountFactory(email="ana@example.test"), AccountFactory(email="bob@example.test")
    return {
        "input": StoredFileFactory(id="file-" + "a" * 24, account=ana, filename="input.jsonl", bytes=1536,
                                   created_at=CREATED),
        "output": StoredFileFactory(id="file-" + "b" * 24, account=ana, filename="batch_x_output.jsonl",
                                    purpose="batch_output", bytes=2621440, created_at=CREATED + timedelta(hours=1),
                                    expires_at=datetime(2026, 12, 20, 10, 30, tzinfo=UTC)),
        "theirs": StoredFileFactory(id="file-" + "c" * 24, account=bob, filename="scores.csv", purpose="user_data",
                                    bytes=100, created_at=CREATED + timedelta(hours=2),
                                    expires_at=datetime(2026, 1, 1, tzinfo=UTC)),
    }


def test_the_list_shows_every_accounts_files_newest_first_sized_for_people(console, files):
    page = console.get(LIST).content.decode()

    assert list_headers(page) == ["id", "account", "filename", "purpose", "size", "created_at", "expiry"]
    assert list_rows(page) == [
        {"id": "file-" + "c" * 24, "account": "bob@example.test", "filename": "scores.csv", "purpose": "user_data",
         "size": "100 bytes", "created_at": "2026-11-20 11:30:00 UTC",
         "expiry": "2026-01-01 00:00:00 UTC (expired: removed at the next sweep)"},
        {"id": "file-" + "b" * 24, "account": "ana@example.test", "filename": "batch_x_output.jsonl",
         "purpose": "batch_output", "size": "2.5 MB", "created_at": "2026-11-20 10:30:00 UTC",
         "expiry": "2026-12-20 10:30:00 UTC"},
        {"id": "file-" + "a" * 24, "account": "ana@example.test", "filename": "input.jsonl", "purpose": "batch",
         "size": "1.5 KB", "created_at": "2026-11-20 09:30:00 UTC", "expiry": "Never (kept until deleted)"},
    ]
    assert '<span class="file-size whitespace-nowrap" title="1,536 bytes">1.5\xa0KB</span>' in page
    assert 'href="/admin/gateway/storedfile/add/"' not in page


def test_the_list_is_filtered_by_purpose_and_searched_by_id_name_or_email(console, files):
    def ids(query: str) -> list[str]:
        return [row["id"] for row in list_rows(console.get(LIST + query).content.decode())]

    assert ids("?purpose=batch_output") == [files["output"].id]
    assert ids("?purpose=batch") == [files["input"].id]
    assert ids(f"?q={files['input'].id}") == [files["input"].id]
    assert ids("?q=file-aaaa") == []  # an id is looked up whole
    assert ids("?q=scores") == [files["theirs"].id]
    assert ids("?q=ana@example") == [files["output"].id, files["input"].id]


def test_a_files_page_is_read_only(console, files):
    page = console.get(f"{LIST}{files['output'].id}/change/").content.decode()

    assert readonly(page) == {
        "Id": files["output"].id, "Account": "ana@example.test", "Filename": "batch_x_output.jsonl",
        "Purpose": "batch_output", "Size": "2.5 MB", "Bytes": "2621440", "Created at": "2026-11-20 10:30:00 UTC",
        "Expires": "2026-12-20 10:30:00 UTC", "Storage name": f"{files['output'].account_id}/{files['output'].id}"}
    assert submit_buttons(page) == set()
    assert 'name="filename"' not in page


def stored(account, name: str, content: bytes) -> StoredFile:
    return store.save_file(account, ContentFile(content), filename=name, purpose="batch", size=len(content))


@pytest.mark.django_db(transaction=True)
def test_deleting_from_the_page_removes_the_row_and_its_bytes(console):
    owner = AccountFactory(email="ana@example.test")
    kept, gone = stored(owner, "kept.jsonl", b"{}\n"), stored(owner, "gone.jsonl", b"{}\n{}\n")

    confirm = console.get(f"{LIST}{gone.id}/delete/")
    assert confirm.status_code == 200 and "gone.jsonl" in text(confirm.content.decode())
    response = console.post(f"{LIST}{gone.id}/delete/", {"post": "yes"}, follow=True)

    assert response.status_code == 200
    assert [str(m) for m in response.context["messages"]] == [f"The file “{gone}” was deleted successfully."]
    assert list(StoredFile.objects.values_list("id", flat=True)) == [kept.id]
    assert not storages["files"].exists(gone.storage_name) and storages["files"].exists(kept.storage_name)


@pytest.mark.django_db(transaction=True)
def test_the_lists_delete_action_removes_the_rows_and_their_bytes(console):
    owner, other = AccountFactory(email="ana@example.test"), AccountFactory(email="bob@example.test")
    first, second, kept = stored(owner, "a.jsonl", b"a\n"), stored(other, "b.jsonl", b"b\n"), stored(owner, "c", b"c")

    chosen = {"action": "delete_selected", "_selected_action": [first.id, second.id]}
    assert "Are you sure" in console.post(LIST, chosen).content.decode()
    response = console.post(LIST, {**chosen, "post": "yes"}, follow=True)

    assert [str(m) for m in response.context["messages"]] == ["Successfully deleted 2 files."]
    assert list(StoredFile.objects.values_list("id", flat=True)) == [kept.id]
    assert [storages["files"].exists(f.storage_name) for f in (first, second, kept)] == [False, False, True]


def test_staff_need_the_permission_to_view_and_to_delete_files(files):
    staff = AccountFactory(email="staff@example.test", is_staff=True)
    client = Client()
    client.force_login(staff)
    assert client.get(LIST).status_code == 403

    staff.user_permissions.add(Permission.objects.get(codename="view_storedfile"))
    page = client.get(LIST).content.decode()
    assert [row["id"] for row in list_rows(page)] == [files["theirs"].id, files["output"].id, files["input"].id]
    assert 'value="delete_selected"' not in page
    assert client.post(f"{LIST}{files['input'].id}/delete/", {"post": "yes"}).status_code == 403
    assert StoredFile.objects.count() == 3
