"""`Idempotency-Key` on the native surface (accounts/idempotency.py), through a running
gateway and the reference upstream: POST /api/v1/chat with `stream: false`, POST /api/v1/agent/chat and
/agent/run answer once per key (one model call, one conversation turn, one metering); another body is a
422 `{message, errors}` naming the header, a repeat while the first is answered a 409 `{detail}`; a chat
stream is served anew each time and keeps nothing."""

import json
import threading
import time

import httpx

from gateway.models import IdempotentRequest
from native.models import Conversation, Message
from tests.native.chat_support import CHAT, chat_requests
from tests.native.conftest import sse_events
from tests.servers import wait_for_usage

AGENT_CHAT, AGENT_RUN = "/api/v1/agent/chat", "/api/v1/agent/run"
REUSED = ("This Idempotency-Key was sent before with another request (method, path or body); "
          "a new request needs a new key.")


def post(world, path, body, key="n-1", **headers) -> httpx.Response:
    if key is not None:
        headers["Idempotency-Key"] = key
    return world.api.client.post(path, content=json.dumps(body), headers={"Content-Type": "application/json",
                                                                          **headers})


def assert_replay_of(again: httpx.Response, first: httpx.Response) -> None:
    assert (again.status_code, again.content) == (first.status_code, first.content)
    for name in ("Content-Type", "X-Request-Id", "X-Inference-Request-Id"):
        assert again.headers.get(name) == first.headers.get(name), name
    assert again.headers["Idempotent-Replayed"] == "true" and "Idempotent-Replayed" not in first.headers


def metered_once(world, first: httpx.Response, rounds: int = 1) -> None:
    """The usage records are the first call's (one per model round), then a later call's (without a key):
    none for the replay."""
    later = post(world, CHAT, {"message": "later", "stream": False}, key=None)
    deadline = time.monotonic() + 5
    while (seen := [r.request_id for r in wait_for_usage(world.account, 2)])[-1] != later.headers["X-Request-Id"]:
        assert time.monotonic() < deadline, seen
        time.sleep(0.02)
    assert seen == [first.headers["X-Request-Id"]] * rounds + [later.headers["X-Request-Id"]]


def test_a_whole_chat_turn_is_answered_once_for_a_key(world):
    body = {"message": "hello there", "stream": False}
    first = post(world, CHAT, body)
    assert first.status_code == 200, first.text
    assert_replay_of(post(world, CHAT, body), first)
    assert len(chat_requests(world)) == 1
    assert Conversation.objects.filter(account=world.account).count() == 1
    assert Message.objects.filter(conversation__account=world.account).count() == 2  # one turn
    metered_once(world, first)


def test_another_chat_body_is_a_422_naming_the_header(world):
    post(world, CHAT, {"message": "hello there", "stream": False})
    other = post(world, CHAT, {"message": "hello again", "stream": False})
    assert other.status_code == 422
    assert other.json() == {"message": REUSED, "errors": {"Idempotency-Key": [REUSED]}}
    assert len(chat_requests(world)) == 1


def test_a_malformed_key_is_a_422_naming_the_header(world):
    refused = post(world, CHAT, {"message": "hi", "stream": False}, key="x" * 256)
    message = "The Idempotency-Key header must be 1 to 255 printable ASCII characters."
    assert refused.status_code == 422
    assert refused.json() == {"message": message, "errors": {"Idempotency-Key": [message]}}
    assert chat_requests(world) == []


def test_a_chat_stream_with_a_key_is_served_anew_and_nothing_is_kept(world):
    answers = [post(world, CHAT, {"message": "hello there"}) for _ in range(2)]
    for answer in answers:
        assert answer.status_code == 200 and answer.headers["Content-Type"] == "text/event-stream"
        assert [name for name, _ in sse_events(answer)][-1] == "done"
        assert "Idempotent-Replayed" not in answer.headers
    assert len(chat_requests(world)) == 2
    assert not IdempotentRequest.objects.exists()


def test_an_agent_turn_is_answered_once_for_a_key(world):
    first = post(world, AGENT_CHAT, {"message": "one two"})
    assert first.status_code == 200, first.text
    assert first.json()["request_id"] == first.headers["X-Request-Id"]
    calls = len(chat_requests(world))
    again = post(world, AGENT_CHAT, {"message": "one two"})
    assert_replay_of(again, first)
    assert again.json()["request_id"] == again.headers["X-Request-Id"]
    assert len(chat_requests(world)) == calls
    metered_once(world, first, rounds=calls)


def test_an_agent_run_is_answered_once_for_a_key(world):
    first = post(world, AGENT_RUN, {"task": "say one two"})
    assert first.status_code == 200, first.text
    calls = len(chat_requests(world))
    assert_replay_of(post(world, AGENT_RUN, {"task": "say one two"}), first)
    assert len(chat_requests(world)) == calls


def test_a_repeat_of_an_agent_turn_while_answered_is_a_409_detail(world):
    world.upstream.configure(latency_ms=1500)
    answers = []
    thread = threading.Thread(target=lambda: answers.append(post(world, AGENT_CHAT, {"message": "slow"})))
    thread.start()
    world.upstream.wait_for_requests(1)  # the first holds the key
    busy = post(world, AGENT_CHAT, {"message": "slow"})
    thread.join(timeout=10)
    assert busy.status_code == 409
    assert busy.json() == {"detail": "A request with this Idempotency-Key is still being answered; retry in 1 second."}
    assert busy.headers["Retry-After"] == "1" and busy.headers["X-RateLimit-Limit"] == "20"
    [first] = answers
    assert first.status_code == 200
    calls = len(chat_requests(world))
    assert_replay_of(post(world, AGENT_CHAT, {"message": "slow"}), first)
    assert len(chat_requests(world)) == calls


def test_another_accounts_same_key_is_its_own(world):
    first = post(world, CHAT, {"message": "hello there", "stream": False})
    theirs = world.outsider_api.client.post(CHAT, json={"message": "hello there", "stream": False},
                                            headers={"Idempotency-Key": "n-1"})
    assert theirs.status_code == 200 and "Idempotent-Replayed" not in theirs.headers
    assert theirs.json()["conversation_id"] != first.json()["conversation_id"]
    assert len(chat_requests(world)) == 2
