"""/v1/files through a running gateway, read by the openai SDK: OpenAI's file objects, a page of them, the bytes
back as sent, deletion (bytes and row together), each account seeing only its own files, and every refusal in
OpenAI's error shape."""

import httpx
import openai
import pytest
from django.core.files.storage import storages
from openai.types import FileDeleted, FileObject

from gateway.models import StoredFile
from tests.factories import AccountFactory, AccountGroupFactory, api_key_for

pytestmark = pytest.mark.django_db(transaction=True)

LINES = b'{"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": {}}\n'


def upload(world, content: bytes = LINES, name: str = "input.jsonl", purpose: str = "batch") -> FileObject:
    return world.openai.files.create(file=(name, content), purpose=purpose)


def error_of(raised) -> dict:
    return raised.value.response.json()


def test_a_file_is_stored_listed_read_back_and_deleted(world):
    created = upload(world)

    assert isinstance(created, FileObject) and created.id.startswith("file-")
    assert (created.object, created.bytes, created.filename, created.purpose, created.status) == (
        "file", len(LINES), "input.jsonl", "batch", "processed")
    assert created.expires_at is None and created.created_at > 0
    assert world.openai.files.retrieve(created.id) == created
    assert [f.id for f in world.openai.files.list()] == [created.id]

    content = world.openai.files.with_raw_response.content(created.id)
    assert content.http_response.content == LINES
    assert content.headers["content-type"] == "application/jsonl"
    assert content.headers["content-length"] == str(len(LINES))

    row = StoredFile.objects.get(id=created.id)
    assert storages["files"].exists(row.storage_name)
    deleted = world.openai.files.delete(created.id)
    assert deleted == FileDeleted(id=created.id, object="file", deleted=True)
    assert not StoredFile.objects.filter(id=created.id).exists()
    assert not storages["files"].exists(row.storage_name)


def test_a_file_larger_than_django_keeps_in_memory_is_spooled_and_stored_whole(world):
    content = bytes(range(256)) * (3 * 1024 * 4)  # 3 MiB, over FILE_UPLOAD_MAX_MEMORY_SIZE (2.5 MB)
    created = upload(world, content, name="big.bin", purpose="user_data")

    assert created.bytes == len(content)
    assert world.openai.files.content(created.id).content == content


def test_a_user_data_file_keeps_its_purpose_and_type(world):
    created = upload(world, b"name,score\nana,3\n", name="scores.csv", purpose="user_data")

    assert created.purpose == "user_data"
    response = httpx.get(f"{world.base}/v1/files/{created.id}/content",
                         headers={"Authorization": f"Bearer {world.key}"})
    assert response.status_code == 200 and response.content == b"name,score\nana,3\n"
    assert response.headers["content-type"].startswith("text/csv")


def test_the_list_pages_with_after_limit_order_and_purpose(world):
    ids = [upload(world, name=f"{n}.jsonl").id for n in range(3)]
    other = upload(world, b"x", name="x.txt", purpose="user_data").id

    page = world.openai.files.list(limit=2, purpose="batch")
    assert [f.id for f in page.data] == ids[::-1][:2] and page.has_more is True
    rest = world.openai.files.list(limit=2, purpose="batch", after=page.data[-1].id)
    assert [f.id for f in rest.data] == [ids[0]] and rest.has_more is False
    assert [f.id for f in world.openai.files.list(order="asc")] == [*ids, other]  # the SDK follows `after`
    body = httpx.get(f"{world.base}/v1/files", params={"limit": 1, "order": "asc"},
                     headers={"Authorization": f"Bearer {world.key}"}).json()
    assert (body["object"], body["first_id"], body["last_id"], body["has_more"]) == ("list", ids[0], ids[0], True)


@pytest.mark.parametrize(("params", "param"), [({"limit": 0}, "limit"), ({"limit": "x"}, "limit"),
                                               ({"order": "up"}, "order")])
def test_a_wrong_page_parameter_is_a_400_naming_it(world, params, param):
    response = httpx.get(f"{world.base}/v1/files", params=params, headers={"Authorization": f"Bearer {world.key}"})
    assert response.status_code == 400
    assert response.json()["error"]["param"] == param
    assert response.json()["error"]["type"] == "invalid_request_error"


def test_a_purpose_the_gateway_does_not_store_is_a_400(world):
    with pytest.raises(openai.BadRequestError) as raised:
        upload(world, purpose="fine-tune")
    assert error_of(raised) == {"error": {
        "message": "'fine-tune' is not a purpose this gateway stores: one of batch, user_data.",
        "type": "invalid_request_error", "param": "purpose", "code": None}}
    assert not StoredFile.objects.exists()


def test_an_upload_without_a_file_or_a_purpose_is_a_400_naming_it(world):
    auth = {"Authorization": f"Bearer {world.key}"}
    no_file = httpx.post(f"{world.base}/v1/files", data={"purpose": "batch"}, files={"other": ("a", b"x")},
                         headers=auth)
    assert no_file.status_code == 400 and no_file.json()["error"]["param"] == "file"
    no_purpose = httpx.post(f"{world.base}/v1/files", files={"file": ("a.jsonl", LINES)}, headers=auth)
    assert no_purpose.status_code == 400 and no_purpose.json()["error"]["param"] == "purpose"
    not_multipart = httpx.post(f"{world.base}/v1/files", json={"purpose": "batch"}, headers=auth)
    assert not_multipart.status_code == 400
    assert not StoredFile.objects.exists()


def test_over_the_groups_storage_quota_is_a_403_naming_it(world):
    world.group.file_storage_bytes = 2 * len(LINES)
    world.group.save()
    upload(world)
    upload(world)  # exactly the quota

    with pytest.raises(openai.PermissionDeniedError) as raised:
        upload(world, b"{}\n")
    error = error_of(raised)["error"]
    assert error["code"] == "file_storage_quota_exceeded" and error["type"] == "permission_error"
    quota = 2 * len(LINES)
    assert error["message"] == (f"File storage quota exceeded: your group (team) allows {quota} bytes of files per "
                                f"account; {quota} are stored and this file has 3. Delete files to make room.")
    assert StoredFile.objects.count() == 2

    world.openai.files.delete(world.openai.files.list().data[0].id)
    assert upload(world, b"{}\n").bytes == 3  # deleting made room
    world.group.file_storage_bytes = -1
    world.group.save()
    assert upload(world, LINES * 10).bytes == 10 * len(LINES)


def test_another_accounts_file_and_a_deleted_one_are_not_found(world):
    mine = upload(world)
    stranger = AccountFactory(group=AccountGroupFactory(name="others", api_access=True), email="eve@example.test")
    theirs = openai.OpenAI(base_url=f"{world.base}/v1", api_key=api_key_for(stranger), max_retries=0)

    for call in (theirs.files.retrieve, theirs.files.content, theirs.files.delete):
        with pytest.raises(openai.NotFoundError) as raised:
            call(mine.id)
        assert error_of(raised) == {"error": {"message": f"No such File object: {mine.id}",
                                              "type": "invalid_request_error", "param": "id", "code": None}}
    assert list(theirs.files.list()) == []
    with pytest.raises(openai.NotFoundError):
        theirs.files.list(after=mine.id)

    world.openai.files.delete(mine.id)
    for call in (world.openai.files.retrieve, world.openai.files.content, world.openai.files.delete):
        with pytest.raises(openai.NotFoundError):
            call(mine.id)


def test_every_files_route_needs_a_credential(world):
    anonymous = openai.OpenAI(base_url=f"{world.base}/v1", api_key="svc_usr_1_wrong", max_retries=0)
    created = upload(world)
    for call in (lambda: anonymous.files.create(file=("a.jsonl", LINES), purpose="batch"),
                 lambda: anonymous.files.list().data, lambda: anonymous.files.retrieve(created.id),
                 lambda: anonymous.files.content(created.id), lambda: anonymous.files.delete(created.id)):
        with pytest.raises(openai.AuthenticationError) as raised:
            call()
        assert error_of(raised)["error"]["code"] == "invalid_api_key"
    assert StoredFile.objects.count() == 1


def test_a_method_the_route_does_not_take_is_a_405(world):
    response = httpx.put(f"{world.base}/v1/files", headers={"Accept": "application/json"})
    assert response.status_code == 405 and response.headers["Allow"] == "GET, POST"
