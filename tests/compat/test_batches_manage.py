"""/v1/batches beyond a batch's run: what creating one refuses (each a 400 naming its param, a file not the
caller's a 404), the pages of the list, cancelling (before its run, during it, after its end), a batch whose
window closed, and each account seeing only its own batches on every route."""

from datetime import timedelta

import httpx
import openai
import pytest
from django.utils import timezone

from batches.models import Batch as BatchRow
from batches.tasks import run_batch, validate_batch
from tests.compat.batch_support import CHAT, auth, chat, create, file_lines, jsonl, line, upload
from tests.contract import assert_v1_unauthenticated
from tests.factories import AccountFactory, AccountGroupFactory, BatchFactory, api_key_for

pytestmark = pytest.mark.django_db(transaction=True)

LINES = jsonl(line("a", chat("alpha")), line("b", chat("beta")), line("c", chat("gamma")))


def post(world, body: dict, key: str | None = None) -> httpx.Response:
    return httpx.post(f"{world.base}/v1/batches", json=body, headers=auth(world, key))


def error_of(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]


@pytest.fixture
def input_file(world):
    return upload(world, LINES).id


@pytest.fixture
def stranger(world):
    account = AccountFactory(group=AccountGroupFactory(name="others", api_access=True), email="eve@example.test")
    key = api_key_for(account)
    return openai.OpenAI(base_url=f"{world.base}/v1", api_key=key, max_retries=0), key


NUL = "A string here holds the NUL character (\\u0000), which a batch cannot keep."


def valid(input_file: str, **changes) -> dict:
    return {"input_file_id": input_file, "endpoint": CHAT, "completion_window": "24h", **changes}


@pytest.mark.parametrize(("changes", "param", "message"), [
    ({"input_file_id": None}, "input_file_id", "Missing required parameter: 'input_file_id'."),
    ({"endpoint": None}, "endpoint", "Missing required parameter: 'endpoint'."),
    ({"completion_window": None}, "completion_window", "Missing required parameter: 'completion_window'."),
    ({"endpoint": "/v1/completions"}, "endpoint", "'endpoint' '/v1/completions' is not one a batch of this gateway "
                                                  "calls: one of /v1/chat/completions, /v1/responses, /v1/embeddings."),
    ({"completion_window": "48h"}, "completion_window", "'completion_window' must be '24h'."),
    ({"metadata": {f"k{n}": "v" for n in range(17)}}, "metadata", "'metadata' may hold at most 16 pairs; it holds 17."),
    ({"metadata": {"k" * 65: "v"}}, "metadata",
     f"A 'metadata' key may be at most 64 characters; '{'k' * 64}…' has 65."),
    ({"metadata": {"k": "v" * 513}}, "metadata", "A 'metadata' value may be at most 512 characters; that of 'k' has "
                                                 "513."),
    ({"metadata": {"k": 3}}, "metadata", "The 'metadata' value of 'k' must be a string."),
    ({"metadata": ["k"]}, "metadata", "'metadata' must be an object of string keys and string values."),
    ({"input_file_id": 7}, "input_file_id", "'input_file_id' must be the id of a file uploaded with purpose 'batch'."),
    ({"input_file_id": "file-\x00"}, "input_file_id", NUL),
    ({"metadata": {"k": "v\x00"}}, "metadata", NUL),
    ({"output_expires_after": {"anchor": "created_at", "seconds": 3600}}, "output_expires_after",
     "'output_expires_after' is not supported: a batch's output and error files are kept until deleted "
     "(DELETE /v1/files/{id})."),
])
def test_a_create_the_gateway_cannot_run_is_a_400_naming_the_param(world, input_file, changes, param, message):
    error = error_of(post(world, {k: v for k, v in valid(input_file, **changes).items() if v is not None}), 400)
    assert (error["param"], error["message"], error["type"]) == (param, message, "invalid_request_error")
    assert not BatchRow.objects.exists()


def test_metadata_at_its_bounds_is_kept(world, input_file):
    metadata = {f"{n:02d}" + "k" * 62: "v" * 512 for n in range(16)}
    batch = world.openai.batches.create(input_file_id=input_file, endpoint=CHAT, completion_window="24h",
                                        metadata=metadata)
    assert world.openai.batches.retrieve(batch.id).metadata == metadata


def test_an_input_file_of_another_purpose_is_a_400_and_one_not_the_callers_a_404(world, stranger):
    data = upload(world, LINES, purpose="user_data").id
    error = error_of(post(world, valid(data)), 400)
    assert (error["param"], error["message"]) == ("input_file_id", f"The file {data} has purpose 'user_data'; a batch "
                                                                   "reads a file uploaded with purpose 'batch'.")

    theirs = upload(world, LINES, client=stranger[0]).id
    for file_id in (theirs, "file-0000"):
        error = error_of(post(world, valid(file_id)), 404)
        assert (error["param"], error["message"]) == ("input_file_id", f"No such File object: {file_id}")
    with pytest.raises(openai.NotFoundError):
        world.openai.batches.create(input_file_id=theirs, endpoint=CHAT, completion_window="24h")
    assert not BatchRow.objects.exists()


def test_the_list_pages_newest_first_with_after_and_limit(world, input_file):
    start = timezone.now() - timedelta(hours=1)
    rows = [BatchFactory(account=world.account, created_at=start + timedelta(seconds=n // 2)) for n in range(22)]
    BatchFactory(account=world.account, kind=BatchRow.Kind.ANTHROPIC, id="msgbatch_" + "0" * 24)  # not listed here
    BatchFactory(created_at=start)  # another account's
    made = world.openai.batches.create(input_file_id=input_file, endpoint=CHAT, completion_window="24h").id
    # newest first; two made at the same instant by id, the greater first
    newest_first = [made, *(row.id for row in sorted(rows, key=lambda row: (row.created_at, row.id), reverse=True))]

    first = world.openai.batches.list()
    assert [b.id for b in first.data] == newest_first[:20] and first.has_more is True
    rest = world.openai.batches.list(after=first.data[-1].id)
    assert [b.id for b in rest.data] == newest_first[20:] and rest.has_more is False
    assert [b.id for b in world.openai.batches.list(limit=7)] == newest_first  # the SDK follows `after`
    assert [b.id for b in world.openai.batches.list(limit=100).data] == newest_first
    assert rows[21].created_at == rows[20].created_at  # a tie: the cursor on its first member gives the second
    page = world.openai.batches.list(after=newest_first[1], limit=1)
    assert [b.id for b in page.data] == [newest_first[2]] and page.has_more is True

    oldest = newest_first[-1]
    body = httpx.get(f"{world.base}/v1/batches", params={"limit": 1, "after": newest_first[-2]},
                     headers=auth(world)).json()
    assert (body["object"], body["first_id"], body["last_id"], body["has_more"]) == ("list", oldest, oldest, False)
    last = httpx.get(f"{world.base}/v1/batches", params={"after": oldest}, headers=auth(world)).json()
    assert last == {"object": "list", "data": [], "first_id": None, "last_id": None, "has_more": False}


@pytest.mark.parametrize("params", [{"limit": 0}, {"limit": 101}, {"limit": "x"}])
def test_a_limit_outside_1_to_100_is_a_400(world, params):
    response = httpx.get(f"{world.base}/v1/batches", params=params, headers=auth(world))
    assert error_of(response, 400) == {"message": "'limit' must be a whole number from 1 to 100.",
                                       "type": "invalid_request_error", "param": "limit", "code": None}


def test_a_batch_cancelled_while_it_runs_ends_cancelled_with_an_error_file(world):
    batch = create(world, LINES)
    assert validate_batch(batch.id) == "in_progress"

    cancelling = world.openai.batches.cancel(batch.id)
    assert cancelling.status == "cancelling" and cancelling.cancelling_at >= batch.created_at
    assert world.openai.batches.cancel(batch.id).status == "cancelling"  # asked again: as it is
    assert run_batch(batch.id) == "ended"

    done = world.openai.batches.retrieve(batch.id)
    assert (done.status, done.output_file_id) == ("cancelled", None)
    assert done.cancelled_at >= done.cancelling_at and done.completed_at is None
    assert done.request_counts.model_dump() == {"total": 3, "completed": 0, "failed": 3}
    errors = file_lines(world, done.error_file_id)
    assert [e["custom_id"] for e in errors] == ["a", "b", "c"]
    assert all(e["response"] is None and e["error"] == {
        "code": "batch_cancelled", "message": "The batch was cancelled before this request ran."} for e in errors)
    assert world.upstream.requests == []

    with pytest.raises(openai.BadRequestError) as raised:
        world.openai.batches.cancel(batch.id)
    assert raised.value.response.json() == {"error": {
        "message": "Cannot cancel a batch with status 'cancelled': it has ended.", "type": "invalid_request_error",
        "param": "batch_id", "code": "invalid_request_error"}}


def test_a_batch_cancelled_before_its_validation_never_reads_its_file(world):
    batch = create(world, LINES)
    assert world.openai.batches.cancel(batch.id).status == "cancelling"
    assert validate_batch(batch.id) == "cancelled"

    done = world.openai.batches.retrieve(batch.id)
    assert (done.status, done.in_progress_at, done.output_file_id, done.error_file_id) == (
        "cancelled", None, None, None)
    assert done.request_counts.model_dump() == {"total": 0, "completed": 0, "failed": 0}


def test_a_completed_batch_cannot_be_cancelled(world):
    batch = create(world, jsonl(line("only", chat("x"))))
    validate_batch(batch.id)
    run_batch(batch.id)

    response = httpx.post(f"{world.base}/v1/batches/{batch.id}/cancel", headers=auth(world))
    assert error_of(response, 400)["message"] == "Cannot cancel a batch with status 'completed': it has ended."
    assert world.openai.batches.retrieve(batch.id).status == "completed"


def test_a_batch_whose_window_closed_expires_its_waiting_lines(world):
    batch = create(world, LINES)
    validate_batch(batch.id)
    BatchRow.objects.filter(pk=batch.id).update(expires_at=timezone.now() - timedelta(seconds=1))

    assert run_batch(batch.id) == "ended"
    done = world.openai.batches.retrieve(batch.id)
    assert (done.status, done.output_file_id) == ("expired", None) and done.expired_at is not None
    assert done.request_counts.model_dump() == {"total": 3, "completed": 0, "failed": 3}
    assert {e["error"]["code"] for e in file_lines(world, done.error_file_id)} == {"batch_expired"}
    assert world.upstream.requests == []


def test_another_accounts_batch_is_not_found_on_every_route(world, stranger):
    mine = create(world, LINES)
    theirs_client, their_key = stranger

    for call in (theirs_client.batches.retrieve, theirs_client.batches.cancel):
        with pytest.raises(openai.NotFoundError) as raised:
            call(mine.id)
        assert raised.value.response.json() == {"error": {"message": f"No such Batch object: {mine.id}",
                                                          "type": "invalid_request_error", "param": "batch_id",
                                                          "code": None}}
    assert list(theirs_client.batches.list()) == []
    listed = httpx.get(f"{world.base}/v1/batches", params={"after": mine.id}, headers=auth(world, their_key))
    assert error_of(listed, 404)["message"] == f"No such Batch object: {mine.id}"
    assert world.openai.batches.retrieve(mine.id).status == "validating"  # untouched by the stranger's cancel

    message_batch = world.anthropic.messages.batches.create(requests=[{"custom_id": "a", "params": {
        "model": "an/claude-echo", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}}])
    with pytest.raises(openai.NotFoundError):  # a message batch is not one of /v1/batches
        world.openai.batches.retrieve(message_batch.id)
    assert [b.id for b in world.openai.batches.list()] == [mine.id]


@pytest.mark.parametrize(("method", "path"), [("GET", "/v1/batches"), ("POST", "/v1/batches"),
                                              ("GET", "/v1/batches/batch_x"), ("POST", "/v1/batches/batch_x/cancel"),
                                              ("GET", "/v1/messages/batches"), ("POST", "/v1/messages/batches"),
                                              ("DELETE", "/v1/messages/batches/msgbatch_x"),
                                              ("GET", "/v1/messages/batches/msgbatch_x/results")])
def test_every_batch_route_refuses_a_call_without_a_key_as_every_v1_route_does(world, method, path):
    assert_v1_unauthenticated(httpx.request(method, f"{world.base}{path}", headers={"x-api-key": "svc_usr_1_x"}))


def test_a_create_sent_again_with_its_idempotency_key_makes_one_batch(world):
    created = upload(world, jsonl(line("a", chat("hi"))))
    body = {"input_file_id": created.id, "endpoint": "/v1/chat/completions", "completion_window": "24h"}
    first = world.openai.batches.with_raw_response.create(**body, extra_headers={"Idempotency-Key": "once"})
    again = world.openai.batches.with_raw_response.create(**body, extra_headers={"Idempotency-Key": "once"})
    assert again.headers["idempotent-replayed"] == "true"
    assert again.parse().id == first.parse().id
    assert BatchRow.objects.filter(account=world.account).count() == 1


@pytest.mark.parametrize("path", ["/v1/batches/batch_%00", "/v1/batches?after=batch_%00", "/v1/files/file-%00",
                                  "/v1/files?after=file-%00", "/v1/messages/batches/msgbatch_%00",
                                  "/v1/messages/batches?after_id=msgbatch_%00"])
def test_an_id_holding_nul_is_not_found_never_a_server_error(world, path):
    answer = httpx.get(f"{world.base}{path}", headers=auth(world), timeout=10)
    assert answer.status_code == 404, answer.text
