"""The size cap of /v1/files at its boundary (a gateway of its own with FILES_MAX_BYTES=1000: exactly the cap
is stored, one byte more is the 413, whatever the cap of a JSON body), a stored file never left without its row
when the row cannot be written, an account's deletion taking its files' bytes, and the settings that choose the
files storage."""

import openai
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.db import IntegrityError

from gateway.files import store
from gateway.models import StoredFile
from gateway.settings import from_env
from tests.factories import AccountFactory, AccountGroupFactory, api_key_for
from tests.servers import web_process

CAP = 1000


@pytest.fixture(scope="module")
def capped_gateway(django_db_setup, django_db_blocker):
    # a JSON body's cap below the file's: a file is read by the upload handlers, never as a JSON body
    with django_db_blocker.unblock(), web_process(FILES_MAX_BYTES=str(CAP), MAX_REQUEST_BODY_BYTES=str(CAP // 2),
                                                  REGISTRY_TTL_SECONDS="0") as base:
        yield base


@pytest.mark.django_db(transaction=True)
def test_exactly_the_cap_is_stored_and_one_byte_more_is_a_413(capped_gateway):
    account = AccountFactory(group=AccountGroupFactory(name="team", api_access=True))
    client = openai.OpenAI(base_url=f"{capped_gateway}/v1", api_key=api_key_for(account), max_retries=0)

    assert client.files.create(file=("full.jsonl", b"x" * CAP), purpose="batch").bytes == CAP
    with pytest.raises(openai.APIStatusError) as raised:
        client.files.create(file=("over.jsonl", b"x" * (CAP + 1)), purpose="batch")
    assert raised.value.status_code == 413
    assert raised.value.response.json() == {"error": {
        "message": f"The file is larger than {CAP} bytes, the most this gateway stores.",
        "type": "invalid_request_error", "param": "file", "code": "request_too_large"}}
    with pytest.raises(openai.APIStatusError) as raised:  # refused by its announced length, before it is read
        client.files.create(file=("huge.jsonl", b"x" * (CAP + 100_000)), purpose="batch")
    assert raised.value.status_code == 413
    assert list(StoredFile.objects.values_list("filename", flat=True)) == ["full.jsonl"]


@pytest.mark.django_db(transaction=True)
def test_a_row_that_cannot_be_written_takes_its_stored_bytes_away(monkeypatch):
    account = AccountFactory(group=AccountGroupFactory(name="team"))
    saved = []
    real_save = storages["files"].save

    def remembering_save(name, content, **kwargs):
        saved.append(real_save(name, content, **kwargs))
        return saved[-1]

    def refusing_create(**fields):
        raise IntegrityError("the database refused the row")

    monkeypatch.setattr(storages["files"], "save", remembering_save)
    monkeypatch.setattr(StoredFile.objects, "create", refusing_create)
    with pytest.raises(IntegrityError):
        store.save_file(account, ContentFile(b"{}\n"), filename="a.jsonl", purpose="batch", size=3)
    assert len(saved) == 1 and not storages["files"].exists(saved[0])


@pytest.mark.django_db(transaction=True)
def test_deleting_an_account_removes_its_files_bytes():
    account = AccountFactory(group=AccountGroupFactory(name="team"))
    stored = store.save_file(account, ContentFile(b"{}\n"), filename="a.jsonl", purpose="batch", size=3)
    assert storages["files"].exists(stored.storage_name)

    account.delete()
    assert not StoredFile.objects.exists() and not storages["files"].exists(stored.storage_name)


def test_the_files_storage_is_a_folder_under_the_var_dir_unless_s3_is_asked(tmp_path):
    local = from_env({"GATEWAY_VAR_DIR": str(tmp_path)})
    assert local["STORAGES"]["files"] == {"BACKEND": "django.core.files.storage.FileSystemStorage",
                                          "OPTIONS": {"location": str(tmp_path / "files")}}
    assert local["FILES_MAX_BYTES"] == 200 * 1024 * 1024

    s3 = from_env({"GATEWAY_VAR_DIR": str(tmp_path), "FILES_STORAGE": "s3", "FILES_S3_BUCKET": "gw",
                   "FILES_S3_ENDPOINT_URL": "http://127.0.0.1:9000", "FILES_S3_REGION": "eu-west-1"})
    assert s3["STORAGES"]["files"]["BACKEND"] == "storages.backends.s3.S3Storage"
    options = s3["STORAGES"]["files"]["OPTIONS"]
    assert (options["bucket_name"], options["endpoint_url"], options["region_name"], options["location"]) == (
        "gw", "http://127.0.0.1:9000", "eu-west-1", "files")
    assert options["access_key"] is None and options["file_overwrite"] is False
    assert options["max_memory_size"] == 2621440  # a file read back past 2.5 MB is spooled to disk


@pytest.mark.parametrize(("environment", "message"), [
    ({"FILES_STORAGE": "ftp"}, "FILES_STORAGE must be one of local, s3, not 'ftp'."),
    ({"FILES_STORAGE": "s3"}, "FILES_STORAGE=s3 needs FILES_S3_BUCKET."),
])
def test_a_files_storage_that_cannot_work_stops_the_start(tmp_path, environment, message):
    with pytest.raises(ImproperlyConfigured, match=message.replace(".", r"\.")):
        from_env({"GATEWAY_VAR_DIR": str(tmp_path), **environment})
