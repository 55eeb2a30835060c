"""/v1/batches through a running gateway, read by the openai SDK: a batch made of an uploaded file, validated and
run by the batch queue's tasks (in this process), its output file answering every request once with the very body
a live call gets, on each of the three endpoints a batch may call; a file with bad lines failing whole, naming them,
with nothing sent to the model server."""

import httpx
import pytest
from openai.types import Batch, CreateEmbeddingResponse
from openai.types.chat import ChatCompletion
from openai.types.responses import Response

from batches.models import Batch as BatchRow
from batches.models import BatchLine
from batches.tasks import validate_batch
from tests.compat.batch_support import (
    BATCH_FIELDS,
    CHAT,
    CLAUDE_MODEL,
    DAY,
    auth,
    chat,
    create,
    file_lines,
    jsonl,
    line,
    run,
)
from tests.factories import ModelFactory

pytestmark = pytest.mark.django_db(transaction=True)

TEXTS = ["one apple", "two pears", "three plums"]


def test_a_chat_batch_runs_and_its_output_file_answers_each_request_once(world):
    content = jsonl(*(line(f"req-{n}", chat(text)) for n, text in enumerate(TEXTS)))
    batch = create(world, content, metadata={"job": "nightly"})

    assert isinstance(batch, Batch) and batch.id.startswith("batch_") and len(batch.id) == len("batch_") + 24
    raw = httpx.get(f"{world.base}/v1/batches/{batch.id}", headers=auth(world)).json()
    assert set(raw) == BATCH_FIELDS
    assert raw == {
        "id": batch.id, "object": "batch", "endpoint": CHAT, "errors": None, "input_file_id": batch.input_file_id,
        "completion_window": "24h", "status": "validating", "output_file_id": None, "error_file_id": None,
        "created_at": batch.created_at, "in_progress_at": None, "expires_at": batch.created_at + DAY,
        "finalizing_at": None, "completed_at": None, "failed_at": None, "expired_at": None, "cancelling_at": None,
        "cancelled_at": None, "request_counts": {"total": 0, "completed": 0, "failed": 0},
        "metadata": {"job": "nightly"}}
    assert world.upstream.requests == []  # nothing runs before the batch queue's worker takes it

    assert run(batch.id) == "ended"
    done = world.openai.batches.retrieve(batch.id)
    assert done.status == "completed"
    assert done.request_counts.model_dump() == {"total": 3, "completed": 3, "failed": 0}
    assert batch.created_at <= done.in_progress_at <= done.finalizing_at <= done.completed_at
    assert (done.failed_at, done.cancelling_at, done.cancelled_at, done.expired_at) == (None, None, None, None)
    assert done.error_file_id is None and done.errors is None

    output = world.openai.files.retrieve(done.output_file_id)
    assert (output.purpose, output.filename) == ("batch_output", f"{batch.id}_output.jsonl")
    lines = file_lines(world, done.output_file_id)
    assert [entry["custom_id"] for entry in lines] == ["req-0", "req-1", "req-2"]
    for entry, text in zip(lines, TEXTS):
        assert set(entry) == {"id", "custom_id", "response", "error"} and entry["error"] is None
        assert entry["id"].startswith("batch_req_")
        response = entry["response"]
        assert response["status_code"] == 200 and response["request_id"]
        completion = ChatCompletion.model_validate(response["body"])
        assert completion.choices[0].message.content == f"Echo: {text}"
        assert completion.model == "oa/echo-1"
    assert len({entry["id"] for entry in lines}) == 3
    sent = [request.json["messages"][-1]["content"] for request in world.upstream.requests]
    assert sorted(sent) == sorted(TEXTS) and {r.path for r in world.upstream.requests} == {"/v1/chat/completions"}


def test_an_embeddings_batch_answers_with_the_vectors(world):
    ModelFactory(server=world.oa, name="embed-1", supports_chat=False, supports_embeddings=True)
    content = jsonl(*(line(f"e{n}", {"model": "oa/embed-1", "input": text}, url="/v1/embeddings")
                      for n, text in enumerate(TEXTS)))
    batch = create(world, content, endpoint="/v1/embeddings")

    assert run(batch.id) == "ended"
    done = world.openai.batches.retrieve(batch.id)
    assert (done.status, done.endpoint, done.request_counts.completed) == ("completed", "/v1/embeddings", 3)
    lines = file_lines(world, done.output_file_id)
    assert [entry["custom_id"] for entry in lines] == ["e0", "e1", "e2"]
    for entry in lines:
        embedded = CreateEmbeddingResponse.model_validate(entry["response"]["body"])
        assert len(embedded.data) == 1 and len(embedded.data[0].embedding) == 64
    assert [r.path for r in world.upstream.requests] == ["/v1/embeddings"] * 3


def test_a_responses_batch_answers_with_response_objects(world):
    content = jsonl(*(line(f"r{n}", {"model": "oa/echo-1", "input": text}, url="/v1/responses")
                      for n, text in enumerate(TEXTS)))
    batch = create(world, content, endpoint="/v1/responses")

    assert run(batch.id) == "ended"
    done = world.openai.batches.retrieve(batch.id)
    assert (done.status, done.request_counts.completed) == ("completed", 3)
    lines = file_lines(world, done.output_file_id)
    assert [entry["custom_id"] for entry in lines] == ["r0", "r1", "r2"]
    for entry, text in zip(lines, TEXTS):
        response = Response.model_validate(entry["response"]["body"])
        assert (response.status, response.output_text) == ("completed", f"Echo: {text}")


def test_a_line_the_model_server_refuses_goes_to_the_error_file(world):
    # the line sent to `oa` fails (its model is the default: no fallback); the one to `an` is answered
    world.upstream.configure(fail_status=400, fail_paths=["/v1/chat/completions"])
    batch = create(world, jsonl(line("bad", chat("first")), line("good", chat("second", model=CLAUDE_MODEL))))

    assert run(batch.id) == "ended"
    done = world.openai.batches.retrieve(batch.id)
    assert done.status == "completed"
    assert done.request_counts.model_dump() == {"total": 2, "completed": 1, "failed": 1}
    [good] = file_lines(world, done.output_file_id)
    assert good["custom_id"] == "good" and good["response"]["status_code"] == 200
    [bad] = file_lines(world, done.error_file_id)
    assert bad["custom_id"] == "bad" and bad["error"] is None
    assert bad["response"]["status_code"] == 400
    assert set(bad["response"]["body"]["error"]) == {"message", "type", "param", "code"}
    assert world.openai.files.retrieve(done.error_file_id).filename == f"{batch.id}_error.jsonl"


NUL = "A string here holds the NUL character (\\u0000), which a batch cannot keep."


def test_a_file_with_bad_lines_fails_naming_each_and_runs_nothing(world):
    world.group.all_models = False
    world.group.save()
    world.group.allowed_models.set([world.default])
    content = jsonl(
        line("ok-1", chat("fine")),
        b'{"custom_id": "broken", ',
        line("wrong-url", {"model": "oa/echo-1", "input": "x"}, url="/v1/embeddings"),
        line("ok-1", chat("again")),
        line("forbidden", chat("hi", model=CLAUDE_MODEL)),
        line("get", chat("hi"), method="GET"),
        line("streamed", {**chat("hi"), "stream": True}),
        line("nul", chat("a\x00b")),
    )
    batch = create(world, content)

    assert run(batch.id) == "failed"
    failed = world.openai.batches.retrieve(batch.id)
    assert failed.status == "failed" and failed.failed_at >= batch.created_at
    assert (failed.in_progress_at, failed.output_file_id, failed.error_file_id) == (None, None, None)
    assert failed.request_counts.model_dump() == {"total": 0, "completed": 0, "failed": 0}
    assert failed.errors.object == "list"
    assert [(e.line, e.code, e.param) for e in failed.errors.data] == [
        (2, "invalid_json_line", None),
        (3, "mismatched_endpoint", "url"),
        (4, "duplicate_custom_id", "custom_id"),
        (5, "model_not_found", "body.model"),
        (6, "invalid_method", "method"),
        (7, "invalid_request", "body.stream"),
        (8, "invalid_request", None),
    ]
    assert failed.errors.data[6].message == NUL
    assert failed.errors.data[2].message == "The custom_id 'ok-1' is used by an earlier line."
    assert failed.errors.data[3].message == f"The model '{CLAUDE_MODEL}' is not allowed for your account group."
    assert not BatchLine.objects.filter(batch_id=batch.id).exists()
    assert world.upstream.requests == []


def test_an_empty_file_fails_and_a_deleted_input_file_fails(world):
    empty = create(world, b"\n\n")
    assert run(empty.id) == "failed"
    [error] = world.openai.batches.retrieve(empty.id).errors.data
    assert (error.code, error.message, error.line) == ("empty_file", "The input file holds no requests.", None)

    gone = create(world, jsonl(line("a", chat("x"))))
    world.openai.files.delete(gone.input_file_id)
    assert run(gone.id) == "failed"
    failed = world.openai.batches.retrieve(gone.id)
    assert failed.input_file_id == gone.input_file_id  # the id is kept when the file goes
    [error] = failed.errors.data
    assert (error.code, error.param) == ("invalid_file", "input_file_id")
    assert world.upstream.requests == []


def test_more_lines_than_a_batch_holds_fail_it(world, settings):
    settings.BATCH_MAX_LINES = 2  # read by the validation, which runs in this process
    at_limit = create(world, jsonl(line("a", chat("1")), line("b", chat("2"))))
    over = create(world, jsonl(line("a", chat("1")), line("b", chat("2")), line("c", chat("3"))))

    assert validate_batch(at_limit.id) == "in_progress"
    assert validate_batch(over.id) == "failed"
    [error] = world.openai.batches.retrieve(over.id).errors.data
    assert (error.code, error.line) == ("too_many_requests_in_batch", 3)
    assert BatchRow.objects.get(pk=at_limit.id).lines.count() == 2
