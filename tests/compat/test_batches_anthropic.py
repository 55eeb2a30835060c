"""/v1/messages/batches through a running gateway, driven by the anthropic SDK: a message batch made, run by the
batch queue's task (in this process), its results read as the SDK reads them, then deleted; cancelled; its window
closed; every refusal in Anthropic's error shape."""

import json
from datetime import timedelta

import anthropic
import httpx
import pytest
from anthropic.types import Message
from anthropic.types.messages import DeletedMessageBatch, MessageBatch
from django.utils import timezone

from batches.models import Batch, BatchLine
from batches.tasks import run_batch
from compat.message_batches import result_line, results_url
from tests.compat.batch_support import CHAT_MODEL, CLAUDE_MODEL, MESSAGE_BATCH_FIELDS
from tests.factories import AccountFactory, AccountGroupFactory, BatchFactory, api_key_for

pytestmark = pytest.mark.django_db(transaction=True)


def params(text: str, model: str = CLAUDE_MODEL, **more) -> dict:
    return {"model": model, "max_tokens": 64, "messages": [{"role": "user", "content": text}], **more}


REQUESTS = [{"custom_id": "first", "params": params("one apple")},
            {"custom_id": "second", "params": params("two pears", model=CHAT_MODEL)},
            {"custom_id": "third", "params": params("three plums")}]


def url(world, path: str = "") -> str:
    return f"{world.base}/v1/messages/batches{path}"


def headers(world, key: str | None = None) -> dict[str, str]:
    return {"x-api-key": key or world.key, "anthropic-version": "2023-06-01"}


def anthropic_error(response: httpx.Response, status: int, kind: str, message: str) -> None:
    assert response.status_code == status, response.text
    assert response.json() == {"type": "error", "error": {"type": kind, "message": message},
                               "request_id": response.headers["X-Request-Id"]}


def test_a_message_batch_runs_its_results_are_read_and_it_is_deleted(world):
    batch = world.anthropic.messages.batches.create(requests=REQUESTS)
    assert isinstance(batch, MessageBatch) and batch.id.startswith("msgbatch_") and len(batch.id) == 9 + 24
    raw = httpx.get(url(world, f"/{batch.id}"), headers=headers(world)).json()
    assert set(raw) == MESSAGE_BATCH_FIELDS
    assert raw == {"id": batch.id, "type": "message_batch", "processing_status": "in_progress",
                   "request_counts": {"processing": 3, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0},
                   "ended_at": None, "created_at": raw["created_at"], "expires_at": raw["expires_at"],
                   "cancel_initiated_at": None, "archived_at": None, "results_url": None}
    assert batch.expires_at - batch.created_at == timedelta(hours=24)
    assert raw["created_at"].endswith("Z") and len(raw["created_at"]) == len("2026-11-24T06:33:44.120000Z")

    with pytest.raises(anthropic.AnthropicError, match="Has it finished processing"):  # the SDK's own check
        world.anthropic.messages.batches.results(batch.id)
    anthropic_error(httpx.get(url(world, f"/{batch.id}/results"), headers=headers(world)), 400,
                    "invalid_request_error", f"Message batch {batch.id} has processing_status 'in_progress': "
                                             "its results can be read once it has ended.")
    with pytest.raises(anthropic.BadRequestError) as raised:
        world.anthropic.messages.batches.delete(batch.id)
    assert raised.value.body["error"]["message"] == (
        f"Message batch {batch.id} has processing_status 'in_progress': a batch can be deleted only once it has "
        "ended; cancel it first.")
    assert world.upstream.requests == []

    assert run_batch(batch.id) == "ended"
    ended = world.anthropic.messages.batches.retrieve(batch.id)
    assert ended.processing_status == "ended" and ended.ended_at >= ended.created_at
    assert ended.request_counts.model_dump() == {"processing": 0, "succeeded": 3, "errored": 0, "canceled": 0,
                                                 "expired": 0}
    assert ended.results_url == url(world, f"/{batch.id}/results")

    results = list(world.anthropic.messages.batches.results(batch.id))
    assert [r.custom_id for r in results] == ["first", "second", "third"]
    for result, text in zip(results, ["one apple", "two pears", "three plums"]):
        assert result.result.type == "succeeded"
        message = Message.model_validate(result.result.message.model_dump())
        assert message.content[0].text == f"Echo: {text}"
    assert sorted(r.path for r in world.upstream.requests) == ["/v1/chat/completions", "/v1/messages",
                                                               "/v1/messages"]
    raw_results = httpx.get(ended.results_url, headers=headers(world))
    assert raw_results.headers["content-type"] == "application/x-jsonl"
    assert raw_results.headers["content-disposition"] == f'attachment; filename="{batch.id}_results.jsonl"'
    assert len(raw_results.content.splitlines()) == 3 and raw_results.content.endswith(b"\n")
    assert [b.id for b in world.anthropic.messages.batches.list()] == [batch.id]

    deleted = world.anthropic.messages.batches.delete(batch.id)
    assert deleted == DeletedMessageBatch(id=batch.id, type="message_batch_deleted")
    assert not Batch.objects.filter(pk=batch.id).exists() and not BatchLine.objects.exists()
    with pytest.raises(anthropic.NotFoundError):
        world.anthropic.messages.batches.retrieve(batch.id)


def test_an_errored_request_carries_anthropics_error_body(world):
    world.upstream.configure(fail_status=400, fail_paths=["/v1/chat/completions"])  # the request sent to `oa`
    batch = world.anthropic.messages.batches.create(requests=REQUESTS[:2])
    assert run_batch(batch.id) == "ended"

    counts = world.anthropic.messages.batches.retrieve(batch.id).request_counts
    assert (counts.succeeded, counts.errored) == (1, 1)
    succeeded, errored = list(world.anthropic.messages.batches.results(batch.id))
    assert (succeeded.custom_id, succeeded.result.type) == ("first", "succeeded")
    assert (errored.custom_id, errored.result.type) == ("second", "errored")
    line = BatchLine.objects.get(custom_id="second")
    assert line.status_code == 400
    raw = httpx.get(url(world, f"/{batch.id}/results"), headers=headers(world)).content.splitlines()[1]
    assert json.loads(raw) == {"custom_id": "second", "result": {"type": "errored", "error": {
        "type": "error", "error": {"type": "invalid_request_error", "message": line.result["error"]["message"]},
        "request_id": line.request_id}}}
    assert "injected by the test upstream" in line.result["error"]["message"]


def test_a_cancelled_message_batch_ends_with_every_request_canceled(world):
    batch = world.anthropic.messages.batches.create(requests=REQUESTS)
    canceling = world.anthropic.messages.batches.cancel(batch.id)
    assert canceling.processing_status == "canceling" and canceling.cancel_initiated_at >= batch.created_at
    assert world.anthropic.messages.batches.cancel(batch.id).processing_status == "canceling"

    assert run_batch(batch.id) == "ended"
    ended = world.anthropic.messages.batches.retrieve(batch.id)
    assert ended.processing_status == "ended" and ended.ended_at >= ended.cancel_initiated_at
    assert ended.request_counts.model_dump() == {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 3,
                                                 "expired": 0}
    results = list(world.anthropic.messages.batches.results(batch.id))
    assert [(r.custom_id, r.result.type) for r in results] == [("first", "canceled"), ("second", "canceled"),
                                                              ("third", "canceled")]
    assert world.upstream.requests == []
    anthropic_error(httpx.post(url(world, f"/{batch.id}/cancel"), headers=headers(world)), 400,
                    "invalid_request_error", f"Message batch {batch.id} has processing_status 'ended': it has "
                                             "ended and can no longer be canceled.")


def test_requests_left_when_the_window_closes_expire(world):
    batch = world.anthropic.messages.batches.create(requests=REQUESTS[:2])
    Batch.objects.filter(pk=batch.id).update(expires_at=timezone.now() - timedelta(seconds=1))

    assert run_batch(batch.id) == "ended"
    assert world.anthropic.messages.batches.retrieve(batch.id).request_counts.expired == 2
    assert [r.result.type for r in world.anthropic.messages.batches.results(batch.id)] == ["expired", "expired"]
    assert world.upstream.requests == []


def refused(changes: dict | None = None, index: int = 1, **request) -> list:
    """REQUESTS with the request at `index` changed: its params by `changes`, the request itself by `request`; a
    field changed to None is left out."""
    changed = [dict(r) for r in REQUESTS]
    params_changed = {**changed[index]["params"], **(changes or {})}
    whole = {**changed[index], "params": params_changed, **request}
    changed[index] = {key: value for key, value in whole.items() if value is not None}
    return changed


@pytest.mark.parametrize(("requests", "message"), [
    (None, "requests: Field required."),
    ({"custom_id": "a"}, "requests: Input should be a list of requests."),
    ([], "requests: A message batch holds at least 1 request."),
    ([REQUESTS[0], "x"], "requests.1: Input should be an object with 'custom_id' and 'params'."),
    (refused(custom_id=None), "requests.1.custom_id: Field required."),
    (refused(custom_id="a" * 65), "requests.1.custom_id: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'."),
    (refused(custom_id="with space"), "requests.1.custom_id: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'."),
    (refused(custom_id="first"), "requests.1.custom_id: The custom_id 'first' is already used by requests.0; each "
                                 "must be unique."),
    (refused(params=None), "requests.1.params: Field required."),
    (refused(params="hi"), "requests.1.params: Input should be an object: the body of a Messages request."),
    (refused({"max_tokens": 0}), "requests.1.params.max_tokens: Input should be a whole number of at least 1."),
    (refused({"messages": "hi"}), "requests.1.params.messages: Input should be a list of messages."),
    (refused({"stream": True}), "requests.1.params.stream: A batch request cannot be streamed: leave 'stream' out."),
    (refused({"model": "an/none"}, index=2), "requests.2.params.model: The model 'an/none' does not exist on server "
                                             "'an'."),
    (refused({"model": 7}, index=2), "requests.2.params.model: The request body has no 'model'."),
    (refused({"system": "a\x00b"}), "requests.1.params: A string here holds the NUL character (\\u0000), which a "
                                     "batch cannot keep."),
])
def test_a_request_that_cannot_run_is_a_400_naming_it_and_no_batch_is_made(world, requests, message):
    body = {} if requests is None else {"requests": requests}
    anthropic_error(httpx.post(url(world), json=body, headers=headers(world)), 400, "invalid_request_error", message)
    assert not Batch.objects.exists()


@pytest.mark.parametrize("field", ["model", "max_tokens", "messages"])
def test_each_required_param_is_named_when_missing(world, field):
    requests = [dict(r) for r in REQUESTS]
    requests[0] = {"custom_id": "first", "params": {k: v for k, v in params("x").items() if k != field}}
    anthropic_error(httpx.post(url(world), json={"requests": requests}, headers=headers(world)), 400,
                    "invalid_request_error", f"requests.0.params.{field}: Field required.")


def test_a_model_the_group_may_not_use_and_too_many_requests_are_refused(world, settings):
    world.group.all_models = False
    world.group.save()
    world.group.allowed_models.set([world.default])
    anthropic_error(httpx.post(url(world), json={"requests": REQUESTS}, headers=headers(world)), 400,
                    "invalid_request_error",
                    f"requests.0.params.model: The model '{CLAUDE_MODEL}' is not allowed for your account group.")

    limit = settings.BATCH_MAX_LINES  # the gateway process's: the default
    many = [{"custom_id": f"r{n}", "params": {}} for n in range(limit + 1)]
    anthropic_error(httpx.post(url(world), json={"requests": many}, headers=headers(world), timeout=60), 400,
                    "invalid_request_error",
                    f"requests: A message batch holds at most {limit} requests; this one has {limit + 1}.")
    assert not Batch.objects.exists()


def test_a_custom_id_of_64_allowed_characters_is_taken(world):
    custom_id = ("aZ09_-" * 11)[:64]
    batch = world.anthropic.messages.batches.create(requests=[{"custom_id": custom_id, "params": params("x")}])
    assert BatchLine.objects.get(batch_id=batch.id).custom_id == custom_id


def test_another_accounts_message_batch_is_not_found_on_every_route(world):
    mine = world.anthropic.messages.batches.create(requests=REQUESTS[:1])
    stranger = AccountFactory(group=AccountGroupFactory(name="others", api_access=True), email="eve@example.test")
    their_key = api_key_for(stranger)
    theirs = anthropic.Anthropic(base_url=world.base, api_key=their_key, max_retries=0)

    message = f"No message batch with id '{mine.id}'."
    for method, path in (("GET", ""), ("POST", "/cancel"), ("DELETE", ""), ("GET", "/results")):
        response = httpx.request(method, url(world, f"/{mine.id}{path}"), headers=headers(world, their_key))
        anthropic_error(response, 404, "not_found_error", message)
    assert list(theirs.messages.batches.list()) == []
    anthropic_error(httpx.get(url(world), params={"after_id": mine.id}, headers=headers(world, their_key)), 404,
                    "not_found_error", message)
    assert world.anthropic.messages.batches.retrieve(mine.id).processing_status == "in_progress"

    openai_batch = world.openai.batches.create(
        input_file_id=world.openai.files.create(file=("in.jsonl", b"{}\n"), purpose="batch").id,
        endpoint="/v1/chat/completions", completion_window="24h")
    anthropic_error(httpx.get(url(world, f"/{openai_batch.id}"), headers=headers(world)), 404, "not_found_error",
                    f"No message batch with id '{openai_batch.id}'.")


def test_an_error_the_gateway_gave_in_openais_shape_is_said_in_anthropics():
    """A line the runner gave up on keeps the gateway's own (OpenAI-shaped) refusal; its result is Anthropic's."""
    given_up = BatchLine(custom_id="late", status=BatchLine.Status.ERRORED, status_code=500, request_id="",
                         result={"error": {"message": "The gateway could not make this request.",
                                           "type": "server_error", "code": "internal_error"}})
    assert result_line(given_up) == {"custom_id": "late", "result": {"type": "errored", "error": {
        "type": "error", "error": {"type": "api_error", "message": "The gateway could not make this request."},
        "request_id": None}}}
    refused = BatchLine(custom_id="big", status=BatchLine.Status.ERRORED, status_code=413, request_id="r1",
                        result=None)
    assert result_line(refused)["result"]["error"] == {
        "type": "error", "error": {"type": "request_too_large", "message": "The request failed."}, "request_id": "r1"}


def test_the_list_pages_newest_first_around_before_id_and_after_id(world):
    start = timezone.now() - timedelta(hours=1)
    for n in range(24):
        BatchFactory(account=world.account, kind=Batch.Kind.ANTHROPIC, id=f"msgbatch_{n:024x}",
                     created_at=start + timedelta(seconds=n))
    BatchFactory(account=world.account, created_at=start + timedelta(minutes=30))  # an OpenAI batch: not listed
    made = world.anthropic.messages.batches.create(requests=REQUESTS[:1]).id
    newest_first = [made, *(f"msgbatch_{n:024x}" for n in reversed(range(24)))]
    batches = world.anthropic.messages.batches

    first = batches.list()
    assert [b.id for b in first.data] == newest_first[:20]
    assert (first.has_more, first.first_id, first.last_id) == (True, newest_first[0], newest_first[19])
    rest = batches.list(after_id=first.last_id)
    assert [b.id for b in rest.data] == newest_first[20:] and rest.has_more is False
    newer = batches.list(before_id=newest_first[20], limit=5)  # the five just newer, still newest first
    assert [b.id for b in newer.data] == newest_first[15:20] and newer.has_more is True
    newest = batches.list(before_id=newest_first[3], limit=5)
    assert [b.id for b in newest.data] == newest_first[:3] and newest.has_more is False
    assert [b.id for b in batches.list(limit=7)] == newest_first  # the SDK follows `last_id`
    toward_newer = [b.id for b in batches.list(before_id=newest_first[20], limit=7)]  # the SDK follows `first_id`
    assert toward_newer == newest_first[13:20] + newest_first[6:13] + newest_first[:6]
    assert [b.id for b in batches.list(limit=1000).data] == newest_first

    for limit in (0, 1001):
        anthropic_error(httpx.get(url(world), params={"limit": limit}, headers=headers(world)), 400,
                        "invalid_request_error", "limit: Input should be a whole number from 1 to 1000.")
    both = httpx.get(url(world), params={"before_id": made, "after_id": made}, headers=headers(world))
    anthropic_error(both, 400, "invalid_request_error", "Give before_id or after_id, not both.")


def test_the_results_url_is_on_the_public_address_when_one_is_set(settings, rf):
    ended = Batch(id="msgbatch_x", status=Batch.Status.COMPLETED)
    settings.PUBLIC_BASE_URL = "https://gateway.example.test/"
    assert results_url(rf.get("/"), ended) == "https://gateway.example.test/v1/messages/batches/msgbatch_x/results"
    settings.PUBLIC_BASE_URL = ""
    assert results_url(rf.get("/"), ended) == "http://testserver/v1/messages/batches/msgbatch_x/results"
    assert results_url(rf.get("/"), Batch(id="msgbatch_y", status=Batch.Status.CANCELLING)) is None
