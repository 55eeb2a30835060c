"""`Idempotency-Key` on the /v1 surfaces (accounts/idempotency.py), through a running
gateway in front of the reference upstream: a retry with the key gets the first answer, byte for byte with
its identifying headers and `Idempotent-Replayed: true`, without a second model call or usage record;
another body is a 422 and a repeat while the first is answered a 409, in each surface's shape; failures a
retry could cure are not kept, nor streams; a client that left mid-answer gets the answer on its retry."""

import json
import threading
import time

import httpx
import openai
import pytest

from gateway.models import IdempotentRequest
from tests.factories import AccountFactory, ModelFactory, api_key_for
from tests.servers import wait_for_usage

CHAT = "/v1/chat/completions"
MESSAGES = "/v1/messages"
BODY = {"model": "oa/echo-1", "messages": [{"role": "user", "content": "one two three"}]}
ANTHROPIC_BODY = {"model": "an/claude-echo", "max_tokens": 50, "messages": [{"role": "user", "content": "hi there"}]}
REPLAYED_HEADERS = ("Content-Type", "X-Request-Id", "X-Inference-Request-Id")


def post(world, path, body, key="k-1", *, token=None, timeout=30, **headers) -> httpx.Response:
    if key is not None:
        headers["Idempotency-Key"] = key
    return httpx.post(f"{world.base}{path}", content=json.dumps(body), timeout=timeout,
                      headers={"Authorization": f"Bearer {token or world.key}", "Content-Type": "application/json",
                               **headers})


def upstream_calls(world, path="/v1/chat/completions"):
    return [r for r in world.upstream.requests if r.path == path]


def assert_replay_of(again: httpx.Response, first: httpx.Response) -> None:
    assert again.status_code == first.status_code
    assert again.content == first.content
    for name in REPLAYED_HEADERS:
        assert again.headers.get(name) == first.headers.get(name), name
    assert again.headers["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first.headers


def usage_once(world, first: httpx.Response) -> None:
    """The account's usage records are the first call's and then a later call's: none for the replay
    (the later call, without a key, is metered after any record the replay could have made)."""
    later = post(world, CHAT, {**BODY, "user": "later"}, key=None)
    ids = [first.headers["X-Request-Id"], later.headers["X-Request-Id"]]
    deadline = time.monotonic() + 5
    while (seen := [r.request_id for r in wait_for_usage(world.account, 2)])[-1] != ids[1]:
        assert time.monotonic() < deadline, seen
        time.sleep(0.02)
    assert seen == ids


def test_a_chat_completion_is_answered_once_for_a_key(world):
    first = post(world, CHAT, BODY)
    assert first.status_code == 200, first.text
    again = post(world, CHAT, BODY)
    assert_replay_of(again, first)
    assert len(upstream_calls(world)) == 1
    # the replay is counted against the /v1 ceiling and carries its headers
    assert (first.headers["X-RateLimit-Remaining"], again.headers["X-RateLimit-Remaining"]) == ("19", "18")
    usage_once(world, first)


def test_a_client_request_id_on_the_retry_wins(world):
    first = post(world, CHAT, BODY)
    again = post(world, CHAT, BODY, **{"X-Request-Id": "my-retry-7"})
    assert again.headers["X-Request-Id"] == "my-retry-7"
    assert again.headers["X-Inference-Request-Id"] == first.headers["X-Inference-Request-Id"]
    assert again.content == first.content and again.headers["Idempotent-Replayed"] == "true"


def test_another_body_is_a_422_in_the_openai_shape(world):
    post(world, CHAT, BODY)
    other = post(world, CHAT, {**BODY, "temperature": 0.5})
    assert other.status_code == 422
    assert other.json() == {"error": {
        "message": "This Idempotency-Key was sent before with another request (method, path or body); "
                   "a new request needs a new key.",
        "type": "invalid_request_error", "param": "Idempotency-Key", "code": "idempotency_key_reused"}}
    assert "Idempotent-Replayed" not in other.headers
    assert len(upstream_calls(world)) == 1


def test_another_accounts_same_key_is_its_own(world):
    first = post(world, CHAT, BODY)
    theirs = post(world, CHAT, BODY, token=api_key_for(AccountFactory(group=world.group)))
    assert theirs.status_code == 200 and "Idempotent-Replayed" not in theirs.headers
    assert theirs.headers["X-Inference-Request-Id"] != first.headers["X-Inference-Request-Id"]
    assert len(upstream_calls(world)) == 2


def in_flight(world, path, body, *, latency_ms=1500):
    """Send `body` with the key from a thread, the upstream answering slowly; return once the upstream has
    it (so the key is claimed) with the thread and where its response will be."""
    world.upstream.configure(latency_ms=latency_ms)
    answers = []
    thread = threading.Thread(target=lambda: answers.append(post(world, path, body)))
    thread.start()
    world.upstream.wait_for_requests(1)
    return thread, answers


def test_a_repeat_while_the_first_is_answered_is_a_409_with_retry_after(world):
    thread, answers = in_flight(world, CHAT, BODY)
    busy = post(world, CHAT, BODY)
    thread.join(timeout=10)
    assert busy.status_code == 409
    assert busy.json() == {"error": {
        "message": "A request with this Idempotency-Key is still being answered; retry in 1 second.",
        "type": "invalid_request_error", "param": "Idempotency-Key", "code": "idempotency_key_in_use"}}
    assert busy.headers["Retry-After"] == "1" and busy.headers["X-RateLimit-Limit"] == "20"
    [first] = answers
    assert first.status_code == 200
    assert_replay_of(post(world, CHAT, BODY), first)
    assert len(upstream_calls(world)) == 1


def test_a_client_that_left_mid_answer_gets_the_answer_on_its_retry_and_it_is_metered_once(world):
    """The first request's client gives up before the (slow) model answers; the call goes on to its end,
    its answer is kept, and the retry gets it: one model call, one usage record."""
    world.upstream.configure(latency_ms=1000)
    with pytest.raises(httpx.ReadTimeout):
        post(world, CHAT, BODY, timeout=httpx.Timeout(30, read=0.3))
    deadline = time.monotonic() + 10
    while (retry := post(world, CHAT, BODY)).status_code == 409:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert retry.status_code == 200 and retry.headers["Idempotent-Replayed"] == "true"
    assert retry.json()["choices"][0]["message"]["content"] == "Echo: one two three"
    assert len(upstream_calls(world)) == 1
    [record] = wait_for_usage(world.account, 1)
    assert record.request_id == retry.headers["X-Request-Id"]  # the first request's id, replayed
    world.upstream.configure(latency_ms=0)
    usage_once(world, retry)


@pytest.mark.parametrize("fail_status", [500, 429])
def test_a_failure_a_retry_could_cure_is_not_kept(world, fail_status):
    world.upstream.configure(fail_status=fail_status, fail_times=1)
    failed = post(world, CHAT, BODY)
    assert failed.status_code == 503, failed.text  # every model of the chain failed (spec 7.2)
    assert not IdempotentRequest.objects.exists()
    retried = post(world, CHAT, BODY)
    assert retried.status_code == 200 and "Idempotent-Replayed" not in retried.headers
    assert len(upstream_calls(world)) == 2
    assert_replay_of(post(world, CHAT, BODY), retried)


def test_a_refusal_is_kept(world):
    refused = post(world, CHAT, {**BODY, "n": 0})
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "n"
    assert_replay_of(post(world, CHAT, {**BODY, "n": 0}), refused)
    assert upstream_calls(world) == []


def test_a_stream_with_a_key_is_served_anew_and_nothing_is_kept(world):
    body = {**BODY, "stream": True}
    streams = [post(world, CHAT, body) for _ in range(2)]
    for stream in streams:
        assert stream.status_code == 200
        assert stream.headers["Content-Type"].startswith("text/event-stream")
        assert "Idempotent-Replayed" not in stream.headers
        assert stream.text.endswith("data: [DONE]\n\n")
    assert streams[0].headers["X-Inference-Request-Id"] != streams[1].headers["X-Inference-Request-Id"]
    assert len(upstream_calls(world)) == 2
    assert not IdempotentRequest.objects.exists()
    whole = post(world, CHAT, BODY)  # the key is free: not a 422 for the other body
    assert whole.status_code == 200 and "Idempotent-Replayed" not in whole.headers


@pytest.mark.parametrize("path, body", [(CHAT, BODY), (MESSAGES, ANTHROPIC_BODY)])
def test_a_malformed_key_is_a_400_naming_the_header(world, path, body):
    refused = post(world, path, body, key="k" * 256)
    assert refused.status_code == 400
    message = "The Idempotency-Key header must be 1 to 255 printable ASCII characters."
    if path == CHAT:
        assert refused.json() == {"error": {"message": message, "type": "invalid_request_error",
                                            "param": "Idempotency-Key", "code": "invalid_idempotency_key"}}
    else:
        assert refused.json() == {"type": "error", "error": {"type": "invalid_request_error", "message": message},
                                  "request_id": refused.headers["X-Request-Id"]}
    assert world.upstream.requests == []


def test_messages_are_answered_once_and_refused_in_the_anthropic_shape(world):
    first = post(world, MESSAGES, ANTHROPIC_BODY)
    assert first.status_code == 200, first.text
    assert_replay_of(post(world, MESSAGES, ANTHROPIC_BODY), first)
    assert len(upstream_calls(world, "/v1/messages")) == 1
    other = post(world, MESSAGES, {**ANTHROPIC_BODY, "max_tokens": 51})
    assert other.status_code == 422
    assert other.json() == {"type": "error", "error": {
        "type": "invalid_request_error",
        "message": "This Idempotency-Key was sent before with another request (method, path or body); "
                   "a new request needs a new key."}, "request_id": other.headers["X-Request-Id"]}


def test_a_repeat_of_messages_while_answered_is_a_409_in_the_anthropic_shape(world):
    thread, answers = in_flight(world, MESSAGES, ANTHROPIC_BODY)
    busy = post(world, MESSAGES, ANTHROPIC_BODY)
    thread.join(timeout=10)
    assert busy.status_code == 409
    assert busy.json() == {"type": "error", "error": {
        "type": "invalid_request_error",
        "message": "A request with this Idempotency-Key is still being answered; retry in 1 second."},
        "request_id": busy.headers["X-Request-Id"]}
    assert busy.headers["Retry-After"] == "1"
    assert answers[0].status_code == 200


def test_embeddings_are_answered_and_metered_once(world):
    ModelFactory(server=world.oa, name="embed-1", supports_chat=False, supports_embeddings=True)
    body = {"model": "oa/embed-1", "input": ["one two", "three"]}
    first = post(world, "/v1/embeddings", body)
    assert first.status_code == 200, first.text
    again = post(world, "/v1/embeddings", body)
    assert_replay_of(again, first)
    assert len(upstream_calls(world, "/v1/embeddings")) == 1
    usage_once(world, first)


def test_an_audio_upload_sent_again_with_its_key_is_answered_once(world):
    """The openai SDK draws a new multipart boundary for each request: the form is what is compared."""
    ModelFactory(server=world.oa, name="whisper-1", supports_chat=False, supports_audio=True)
    results = [world.openai.audio.transcriptions.with_raw_response.create(
        model="oa/whisper-1", file=("clip.wav", b"RIFF" + b"\0" * 96), extra_headers={"Idempotency-Key": "a-1"})
        for _ in range(2)]
    first, again = (r.http_response for r in results)
    assert first.request.headers["Content-Type"] != again.request.headers["Content-Type"]  # two boundaries
    assert_replay_of(again, first)
    assert json.loads(again.content) == {"text": "transcribed 100 bytes of clip.wav"}
    assert len(upstream_calls(world, "/v1/audio/transcriptions")) == 1
    with pytest.raises(openai.UnprocessableEntityError) as other:  # another file: another request
        world.openai.audio.transcriptions.create(model="oa/whisper-1", file=("clip.wav", b"RIFF" + b"\1" * 96),
                                                 extra_headers={"Idempotency-Key": "a-1"})
    assert (other.value.param, other.value.code) == ("Idempotency-Key", "idempotency_key_reused")
