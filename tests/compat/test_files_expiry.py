"""Files that expire: OpenAI's `expires_after` on `POST /v1/files` as the openai SDK sends it (its two form fields,
the seconds taken from 3600 to 2592000 and refused by name outside), the file object's `expires_at`; an expired file
is a 404 before any sweep; the sweep removes rows and bytes, 500 at a time; a batch's output files expire after
FILES_OUTPUT_EXPIRE_SECONDS."""

from datetime import timedelta

import httpx
import openai
import pytest
from django.core.files.storage import storages
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from batches import finish
from batches.models import Batch, BatchLine
from gateway.celery import app, sweep_expired_files
from gateway.files import store
from gateway.models import StoredFile
from tests.factories import BatchFactory, BatchLineFactory

pytestmark = pytest.mark.django_db(transaction=True)

LINES = b'{"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": {}}\n'
SECONDS_ERROR = "'expires_after[seconds]' must be a whole number of seconds from 3600 (an hour) to 2592000 (30 days)."


def upload(world, seconds=None, *, name: str = "input.jsonl", anchor: str = "created_at"):
    expiry = {} if seconds is None else {"expires_after": {"anchor": anchor, "seconds": seconds}}
    return world.openai.files.create(file=(name, LINES), purpose="batch", **expiry)


def post_form(world, fields: dict) -> httpx.Response:
    return httpx.post(f"{world.base}/v1/files", data={"purpose": "batch", **fields},
                      files={"file": ("input.jsonl", LINES)}, headers={"Authorization": f"Bearer {world.key}"})


def refusal(message: str, param: str) -> dict:
    return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": None}}


def expire(file_id: str) -> None:
    StoredFile.objects.filter(id=file_id).update(expires_at=timezone.now() - timedelta(seconds=1))


@pytest.mark.parametrize("seconds", [3600, 2592000])
def test_the_sdks_expires_after_sets_expires_at_that_many_seconds_after_created_at(world, seconds):
    created = upload(world, seconds)

    assert created.expires_at == created.created_at + seconds
    row = StoredFile.objects.get(id=created.id)
    assert row.expires_at - row.created_at == timedelta(seconds=seconds)
    assert world.openai.files.retrieve(created.id).expires_at == created.expires_at
    assert [(f.id, f.expires_at) for f in world.openai.files.list()] == [(created.id, created.expires_at)]


@pytest.mark.parametrize("seconds", [3599, 2592001, 0, -3600])
def test_seconds_outside_an_hour_to_thirty_days_are_a_400_naming_them(world, seconds):
    with pytest.raises(openai.BadRequestError) as raised:
        upload(world, seconds)

    assert raised.value.response.json() == refusal(SECONDS_ERROR, "expires_after[seconds]")
    assert not StoredFile.objects.exists()


def test_an_anchor_other_than_created_at_is_a_400_naming_it(world):
    with pytest.raises(openai.BadRequestError) as raised:
        upload(world, 3600, anchor="last_active_at")

    assert raised.value.response.json() == refusal(
        "'last_active_at' is not an anchor of expires_after: the one anchor is created_at.", "expires_after[anchor]")
    assert not StoredFile.objects.exists()


@pytest.mark.parametrize(("fields", "message", "param"), [
    ({"expires_after[anchor]": "created_at"}, "'expires_after[seconds]' is required with expires_after.",
     "expires_after[seconds]"),
    ({"expires_after[seconds]": "3600"}, "'expires_after[anchor]' is required with expires_after.",
     "expires_after[anchor]"),
    ({"expires_after[anchor]": "created_at", "expires_after[seconds]": "1h"}, SECONDS_ERROR, "expires_after[seconds]"),
    ({"expires_after[anchor]": "created_at", "expires_after[seconds]": "3600.5"}, SECONDS_ERROR,
     "expires_after[seconds]"),
    ({"expires_after[anchor]": "created_at", "expires_after[seconds]": "3600", "expires_after[days]": "1"},
     "'expires_after[days]' is not taken: send expires_after as its two fields, expires_after[anchor] and "
     "expires_after[seconds].", "expires_after[days]"),
    ({"expires_after": '{"anchor": "created_at", "seconds": 3600}'},
     "'expires_after' is not taken: send expires_after as its two fields, expires_after[anchor] and "
     "expires_after[seconds].", "expires_after"),
])
def test_a_wrong_or_missing_field_of_expires_after_is_a_400_naming_it(world, fields, message, param):
    response = post_form(world, fields)

    assert (response.status_code, response.json()) == (400, refusal(message, param))
    assert not StoredFile.objects.exists()


def test_without_expires_after_a_file_never_expires(world):
    created = upload(world)

    assert created.expires_at is None and StoredFile.objects.get(id=created.id).expires_at is None


def test_an_expired_file_not_yet_swept_is_not_found_listed_or_counted(world):
    kept, gone = upload(world, name="kept.jsonl"), upload(world, 3600, name="gone.jsonl")
    expire(gone.id)

    for call in (world.openai.files.retrieve, world.openai.files.content, world.openai.files.delete):
        with pytest.raises(openai.NotFoundError) as raised:
            call(gone.id)
        assert raised.value.response.json() == refusal(f"No such File object: {gone.id}", "id")
    assert [f.id for f in world.openai.files.list()] == [kept.id]
    with pytest.raises(openai.NotFoundError):
        world.openai.files.list(after=gone.id)
    assert store.stored_bytes(world.account) == len(LINES)  # the expired file's bytes no longer count
    row = StoredFile.objects.get(id=gone.id)  # still there until the sweep
    assert storages["files"].exists(row.storage_name)


def test_the_sweep_removes_expired_rows_and_their_bytes_and_nothing_else(world):
    kept, later, gone = upload(world, name="kept.jsonl"), upload(world, 7200, name="later.jsonl"), upload(world, 3600)
    expire(gone.id)
    names = dict(StoredFile.objects.values_list("id", "storage_name"))

    assert sweep_expired_files() == 1

    assert sorted(StoredFile.objects.values_list("id", flat=True)) == sorted([kept.id, later.id])
    assert not storages["files"].exists(names[gone.id])
    assert storages["files"].exists(names[kept.id]) and storages["files"].exists(names[later.id])
    assert sweep_expired_files() == 0
    assert world.openai.files.retrieve(later.id).expires_at == later.expires_at


def test_the_sweep_removes_a_backlog_a_batch_of_rows_at_a_time(world, monkeypatch):
    monkeypatch.setattr(store, "SWEEP_BATCH", 2)
    gone = [upload(world, 3600, name=f"{n}.jsonl").id for n in range(5)]
    names = [StoredFile.objects.get(id=file_id).storage_name for file_id in gone]
    StoredFile.objects.update(expires_at=timezone.now() - timedelta(minutes=1))

    with CaptureQueriesContext(connection) as queries:
        assert store.sweep_expired() == 5

    deletes = [q["sql"] for q in queries.captured_queries if q["sql"].startswith('DELETE FROM "gateway_storedfile"')]
    assert len(deletes) == 3  # 2 + 2 + 1
    assert not StoredFile.objects.exists()
    assert [storages["files"].exists(name) for name in names] == [False] * 5


def test_the_sweep_is_on_beats_schedule_hourly():
    entry = app.conf.beat_schedule["sweep-expired-files"]
    assert entry["task"] == "gateway.sweep_expired_files" and entry["task"] in app.tasks
    assert entry["schedule"].minute == {53} and entry["schedule"].hour == set(range(24))


def test_a_batchs_output_and_error_files_expire_after_files_output_expire_seconds(settings):
    settings.FILES_OUTPUT_EXPIRE_SECONDS = 7200
    batch = BatchFactory(status=Batch.Status.IN_PROGRESS)
    BatchLineFactory(batch=batch, index=0, custom_id="ok", status=BatchLine.Status.SUCCEEDED, status_code=200,
                     result={"id": "chatcmpl-1"}, ended_at=timezone.now())
    BatchLineFactory(batch=batch, index=1, custom_id="bad", status=BatchLine.Status.ERRORED, status_code=400,
                     result={"error": {"message": "no"}}, ended_at=timezone.now())

    finish.finalize(batch.id, end_as=Batch.Status.COMPLETED)

    batch.refresh_from_db()
    assert batch.status == Batch.Status.COMPLETED
    for stored in (batch.output_file, batch.error_file):
        assert stored.purpose == store.BATCH_OUTPUT
        # counted from just before the row was written: at most the milliseconds between the two reads of the clock
        assert timedelta(seconds=7199) < stored.expires_at - stored.created_at <= timedelta(seconds=7200)
    StoredFile.objects.filter(id=batch.output_file_id).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert store.sweep_expired() == 1
    batch.refresh_from_db()
    assert (batch.output_file_id, batch.error_file_id is not None) == (None, True)
