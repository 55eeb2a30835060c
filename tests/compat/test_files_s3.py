"""/v1/files kept in S3-compatible object storage (FILES_STORAGE=s3): a gateway of its own whose FILES_S3_*
settings point at a fake S3 on loopback (moto's server, in this process), driven by the openai SDK, the bucket
read with boto3: each file one object under the configured prefix, its bytes back as sent, gone when deleted;
and a file read back past Django's in-memory upload size is held on disk, not in memory."""

import boto3
import openai
import pytest
from django.conf import global_settings
from django.core.files.base import ContentFile
from moto.server import ThreadedMotoServer
from storages.backends.s3 import S3Storage

from gateway.models import StoredFile
from gateway.settings import from_env
from tests.factories import AccountFactory, AccountGroupFactory, api_key_for
from tests.servers import free_port, web_process

BUCKET = "gateway-files"
PREFIX = "tenant-a/files"
# moto takes any key pair; given explicitly so that nothing of the machine's AWS configuration is looked up
KEYS = {"FILES_S3_ACCESS_KEY_ID": "test-access-key", "FILES_S3_SECRET_ACCESS_KEY": "test-secret-key"}
LINES = b'{"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": {}}\n'


@pytest.fixture(scope="module")
def s3_endpoint():
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture(scope="module")
def bucket(s3_endpoint):
    client = boto3.client("s3", endpoint_url=s3_endpoint, region_name="eu-west-1",
                          aws_access_key_id=KEYS["FILES_S3_ACCESS_KEY_ID"],
                          aws_secret_access_key=KEYS["FILES_S3_SECRET_ACCESS_KEY"])
    client.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    yield client
    # moto keeps its buckets in the process, across servers: emptied and removed, so a later start begins bare
    for key in keys_in(client):
        client.delete_object(Bucket=BUCKET, Key=key)
    client.delete_bucket(Bucket=BUCKET)


@pytest.fixture(scope="module")
def s3_gateway(django_db_setup, django_db_blocker, s3_endpoint, bucket):
    with django_db_blocker.unblock(), web_process(
            FILES_STORAGE="s3", FILES_S3_BUCKET=BUCKET, FILES_S3_ENDPOINT_URL=s3_endpoint, FILES_S3_REGION="eu-west-1",
            FILES_S3_PREFIX=PREFIX, REGISTRY_TTL_SECONDS="0", **KEYS) as base:
        yield base


def keys_in(bucket) -> list[str]:
    return [item["Key"] for item in bucket.list_objects_v2(Bucket=BUCKET).get("Contents", [])]


@pytest.mark.django_db(transaction=True)
def test_a_file_is_one_object_under_the_prefix_read_back_and_deleted_with_its_row(s3_gateway, bucket):
    account = AccountFactory(group=AccountGroupFactory(name="team", api_access=True))
    client = openai.OpenAI(base_url=f"{s3_gateway}/v1", api_key=api_key_for(account), max_retries=0)

    created = client.files.create(file=("input.jsonl", LINES), purpose="batch")
    assert (created.object, created.bytes, created.filename, created.purpose) == (
        "file", len(LINES), "input.jsonl", "batch")
    assert [f.id for f in client.files.list()] == [created.id]
    assert client.files.retrieve(created.id) == created

    stored = StoredFile.objects.get(id=created.id)
    assert stored.storage_name == f"{account.pk}/{created.id}"
    assert keys_in(bucket) == [f"{PREFIX}/{account.pk}/{created.id}"]
    assert bucket.get_object(Bucket=BUCKET, Key=f"{PREFIX}/{stored.storage_name}")["Body"].read() == LINES

    content = client.files.with_raw_response.content(created.id)
    assert content.http_response.content == LINES
    assert content.headers["content-length"] == str(len(LINES))

    deleted = client.files.delete(created.id)
    assert (deleted.id, deleted.deleted) == (created.id, True)
    assert keys_in(bucket) == [] and not StoredFile.objects.exists()
    with pytest.raises(openai.NotFoundError):
        client.files.retrieve(created.id)


def test_a_file_read_back_past_the_in_memory_size_is_spooled_to_disk(tmp_path, s3_endpoint, bucket):
    settings = from_env({"GATEWAY_VAR_DIR": str(tmp_path), "FILES_STORAGE": "s3", "FILES_S3_BUCKET": BUCKET,
                         "FILES_S3_ENDPOINT_URL": s3_endpoint, "FILES_S3_PREFIX": PREFIX, **KEYS})
    storage = S3Storage(**settings["STORAGES"]["files"]["OPTIONS"])
    small, large = b"x" * 10, b"y" * (global_settings.FILE_UPLOAD_MAX_MEMORY_SIZE + 1)
    names = [storage.save("spool/small", ContentFile(small)), storage.save("spool/large", ContentFile(large))]
    try:
        for name, content, on_disk in ((names[0], small, False), (names[1], large, True)):
            with storage.open(name, "rb") as opened:
                assert opened.read() == content
                assert opened.file._rolled is on_disk  # the SpooledTemporaryFile moved to a file on disk
    finally:
        for name in names:
            storage.delete(name)
    assert keys_in(bucket) == []
