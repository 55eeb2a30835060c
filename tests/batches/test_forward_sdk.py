"""The official SDKs as the oracle of the clouds' batch APIs: the requests the gateway makes of a cloud when it
forwards a batch (batches/clouds.py) are the ones `openai.OpenAI` and `anthropic.Anthropic` make for the same
steps (method, path, credential headers, multipart field names, JSON keys), and the SDKs read the reference
upstream's answers (tests/upstream/batch_wire.py) as the clouds' own."""

import json
import re

import anthropic
import openai
import pytest

from batches import finish, forward, tasks
from tests.batches.forwarding import (
    KEY,
    anthropic_batch,
    anthropic_cloud,
    chat,
    form_of,
    openai_batch,
    openai_cloud,
    queued,
)
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture

pytestmark = pytest.mark.django_db(transaction=True)
_ = queued  # the fixture
IDS = re.compile(r"(msgbatch_|batch_|file-)[0-9a-f]+")


def shape(value):
    """A JSON value's keys, all the way down (the values' types only)."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shape(item) for item in value]
    return type(value).__name__


def requests_of(upstream) -> list[tuple]:  # noqa: F811
    """Each request: its method, its path with the ids made general, the key it carried (as `x-api-key` or as a
    bearer token: Anthropic's API takes either), and the shape of its body (a multipart form's field names)."""
    found = []
    for request in upstream.requests:
        if request.headers.get("content-type", "").startswith("multipart/"):
            body = sorted(form_of(request))
        else:
            body = shape(request.json) if request.body else None
        key = request.headers.get("x-api-key") or request.headers.get("authorization", "").removeprefix("Bearer ")
        found.append((request.method, IDS.sub(r"\1ID", request.path), key, body))
    upstream.state.requests.clear()
    return found


@pytest.fixture(autouse=True)
def _polls(settings):
    settings.BATCH_FORWARD_POLL_SECONDS = 1


def test_the_gateways_requests_to_openais_batch_api_are_the_sdks(upstream, owner, queued):  # noqa: F811
    openai_cloud(upstream)
    done, stopped = openai_batch(owner, [chat(0), chat(1)]), openai_batch(owner, [chat(2)])
    tasks.validate_batch(done.pk)
    assert tasks.poll_forwarded_batch(done.pk) == "completed"
    tasks.validate_batch(stopped.pk)
    stopped.refresh_from_db()
    finish.cancel(stopped)
    ours = requests_of(upstream)

    client = openai.OpenAI(base_url=f"{upstream.url}/v1", api_key=KEY, max_retries=0)
    requests = [{"custom_id": f"req-{i}", "method": "POST", "url": "/v1/chat/completions", "body": chat(i)}
                for i in range(2)]
    content = b"".join(json.dumps(r).encode() + b"\n" for r in requests)
    uploaded = client.files.create(file=("input.jsonl", content, "application/jsonl"), purpose="batch")
    made = client.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions",
                                 completion_window="24h", metadata={"gateway_batch_id": done.pk})
    read = client.batches.retrieve(made.id)
    assert (read.status, read.request_counts.completed, read.error_file_id) == ("completed", 2, None)
    output = [json.loads(raw) for raw in client.files.content(read.output_file_id).text.splitlines()]
    assert [line["response"]["body"]["choices"][0]["message"]["content"] for line in output] == [
        "Echo: line 0", "Echo: line 1"]
    uploaded = client.files.create(file=("input.jsonl", content, "application/jsonl"), purpose="batch")
    made = client.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions",
                                 completion_window="24h", metadata={"gateway_batch_id": stopped.pk})
    assert client.batches.cancel(made.id).status == "cancelling"
    sdk = requests_of(upstream)

    assert ours == sdk
    assert [(method, path) for method, path, *_ in ours] == [
        ("POST", "/v1/files"), ("POST", "/v1/batches"), ("GET", "/v1/batches/batch_ID"),
        ("GET", "/v1/files/file-ID/content"), ("POST", "/v1/files"), ("POST", "/v1/batches"),
        ("POST", "/v1/batches/batch_ID/cancel")]
    assert ours[0][2:] == (KEY, ["file", "purpose"])


def test_the_gateways_requests_to_anthropics_message_batches_are_the_sdks(upstream, owner, queued):  # noqa: F811
    anthropic_cloud(upstream)
    bodies = [{"model": "claude/echo-1", "max_tokens": 32, "messages": [{"role": "user", "content": "hi"}]}]
    done, lines = anthropic_batch(owner, bodies)
    forward.launch(done, lines)
    assert tasks.poll_forwarded_batch(done.pk) == "completed"
    upstream.configure(batch_pending_polls=100)
    stopped, lines = anthropic_batch(owner, bodies)
    forward.launch(stopped, lines)
    stopped.refresh_from_db()
    finish.cancel(stopped)
    assert {(r.headers.get("anthropic-version"), r.headers.get("x-api-key")) for r in upstream.requests} == {
        ("2023-06-01", KEY)}  # as every call of the gateway's to an Anthropic server
    ours = requests_of(upstream)

    upstream.configure(batch_pending_polls=0)
    client = anthropic.Anthropic(base_url=upstream.url, api_key=KEY, max_retries=0)
    params = {**bodies[0], "model": "echo-1"}
    made = client.messages.batches.create(requests=[{"custom_id": "msg-0", "params": params}])
    results = list(client.messages.batches.results(made.id))
    assert [(r.custom_id, r.result.type, r.result.message.content[0].text) for r in results] == [
        ("msg-0", "succeeded", "Echo: hi")]
    upstream.configure(batch_pending_polls=100)
    made = client.messages.batches.create(requests=[{"custom_id": "msg-0", "params": params}])
    assert client.messages.batches.cancel(made.id).processing_status == "canceling"
    assert all(r.headers.get("anthropic-version") for r in upstream.requests)
    sdk = requests_of(upstream)

    assert ours == sdk
    assert [(method, path) for method, path, *_ in ours] == [
        ("POST", "/v1/messages/batches"), ("GET", "/v1/messages/batches/msgbatch_ID"),
        ("GET", "/v1/messages/batches/msgbatch_ID/results"), ("POST", "/v1/messages/batches"),
        ("POST", "/v1/messages/batches/msgbatch_ID/cancel")]
    assert ours[0][2:] == (KEY, {"requests": [{"custom_id": "str", "params": shape(params)}]})
