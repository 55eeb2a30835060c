"""Failures of POST /api/v1/chat (spec 6.2, 7.2): a reply cut or stalled midway sends `error`
then `done` and is saved as a partial message; a chain that fails before the first byte sends
`error` then `done` and keeps only the user's message. Without streaming the same failures
are HTTP errors, the partial reply in `partial`."""

import threading
import time
from types import SimpleNamespace

from gateway.models import UsageRecord
from native.models import Conversation, Message
from tests.factories import ModelFactory, ModelFallbackFactory
from tests.native.conftest import Api, sse_events
from tests.servers import wait_for_usage

CHAT = "/api/v1/chat"
HELLO = {"message": "one two three four five"}


def names(events):
    return [name for name, _ in events]


def test_a_reply_cut_midway_sends_error_then_done_and_is_saved_partial(world):
    world.upstream.configure(cut_after_tokens=2)
    r = world.api.post(CHAT, HELLO)
    assert r.status_code == 200
    events = sse_events(r)
    assert names(events) == ["meta", "delta", "delta", "error", "done"]
    request_id = r.headers["X-Inference-Request-Id"]
    assert all(p["request_id"] == request_id for _, p in events)
    assert "".join(p["text"] for n, p in events if n == "delta") == "Echo: one "
    error = events[3][1]
    assert set(error) == {"request_id", "codigo", "message"}
    assert error["codigo"] == "resposta_interrompida"
    done = events[4][1]
    assistant = Message.objects.get(role="assistant")
    assert done["message_id"] == assistant.pk
    assert (assistant.content, assistant.status, assistant.request_id) == ("Echo: one ", "partial", request_id)
    assert done["usage"] == assistant.usage
    assert done["usage"]["completion_tokens"] > 0  # what arrived is counted
    user = Message.objects.get(role="user")
    assert user.content == HELLO["message"]


def test_a_reply_that_stalls_is_cut_at_the_read_timeout(world):
    world.upstream.configure(stall_after_tokens=2, stall_seconds=5)
    r = world.api.post(CHAT, HELLO)
    events = sse_events(r)
    assert names(events) == ["meta", "delta", "delta", "error", "done"]
    assert events[3][1]["message"] == "The model stopped answering mid-reply."
    assert Message.objects.get(role="assistant").status == "partial"


def test_without_streaming_a_stall_is_504_with_the_partial_reply(world):
    world.upstream.configure(stall_after_tokens=2, stall_seconds=5)
    r = world.api.post(CHAT, {**HELLO, "stream": False})
    assert r.status_code == 504
    body = r.json()
    request_id = r.headers["X-Inference-Request-Id"]
    assistant = Message.objects.get(role="assistant")
    assert body == {
        "detail": "The model stopped answering mid-reply.", "codigo": "resposta_interrompida",
        "request_id": request_id, "conversation_id": assistant.conversation_id,
        "partial": {"request_id": request_id, "conversation_id": assistant.conversation_id, "model": "oa/echo-1",
                    "message_id": assistant.pk, "text": "Echo: one ", "citations": [], "usage": assistant.usage},
    }


def test_a_partial_reply_is_part_of_the_next_turns_history(world):
    world.upstream.configure(cut_after_tokens=2)
    first = sse_events(world.api.post(CHAT, HELLO))
    conversation_id = first[0][1]["conversation_id"]
    world.upstream.configure(cut_after_tokens=None)
    world.api.post(CHAT, {"message": "go on", "conversation_id": conversation_id, "stream": False})
    sent = world.upstream.requests[-1].json["messages"]
    assert sent == [{"role": "user", "content": HELLO["message"]}, {"role": "assistant", "content": "Echo: one "},
                    {"role": "user", "content": "go on"}]


def test_every_model_failing_before_the_first_byte_sends_error_then_done(world):
    world.upstream.configure(fail_status=503)
    r = world.api.post(CHAT, HELLO)
    assert r.status_code == 200
    events = sse_events(r)
    assert names(events) == ["meta", "error", "done"]
    conversation = Conversation.objects.get(account=world.account)
    request_id = r.headers["X-Inference-Request-Id"]
    assert events[0][1] == {"request_id": request_id, "conversation_id": conversation.pk, "model": "oa/echo-1"}
    assert events[1][1]["codigo"] == "modelo_indisponivel"
    assert events[1][1]["message"].startswith("Every model in the chain is unavailable right now")
    assert events[2][1] == {"request_id": request_id, "message_id": None, "citations": [],
                            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}}
    assert [(m.role, m.content) for m in conversation.messages.all()] == [("user", HELLO["message"])]
    time.sleep(0.1)
    assert not UsageRecord.objects.filter(account=world.account).exists()  # nothing answered, nothing metered


def test_without_streaming_an_exhausted_chain_is_503_with_retry_after(world):
    world.upstream.configure(fail_status=429)
    r = world.api.post(CHAT, {**HELLO, "stream": False})
    assert r.status_code == 503
    assert r.headers["Retry-After"] == "1"
    body = r.json()
    assert body["codigo"] == "modelo_indisponivel"
    assert body["retry_after"] == 1
    assert body["request_id"] == r.headers["X-Inference-Request-Id"]
    assert body["conversation_id"] == Conversation.objects.get(account=world.account).pk


def test_a_failing_model_falls_through_to_its_fallback(world):
    backup = ModelFactory(server=world.oa, name="echo-2")
    primary = ModelFactory(server=world.oa, name="echo-3")
    ModelFallbackFactory(model=primary, fallback=backup)
    world.upstream.configure(fail_status=503, fail_times=1)
    r = world.api.post(CHAT, {**HELLO, "model": "oa/echo-3"})
    events = sse_events(r)
    assert names(events)[0] == "meta" and names(events)[-1] == "done" and "error" not in names(events)
    assert events[0][1]["model"] == "oa/echo-2"  # the model that answered
    assert Message.objects.get(role="assistant").model == "oa/echo-2"


def test_a_request_the_model_server_refuses_is_an_error_event(world):
    world.upstream.configure(fail_status=400)
    events = sse_events(world.api.post(CHAT, HELLO))
    assert names(events) == ["meta", "error", "done"]
    assert events[1][1]["codigo"] == "requisicao_recusada"


def test_a_client_that_goes_away_mid_reply_leaves_the_partial_reply_saved(world):
    world.upstream.configure(tokens_per_second=20)
    words = " ".join(f"w{i}" for i in range(40))
    with world.api.client.stream("POST", CHAT, json={"message": words}) as r:
        assert r.status_code == 200
        seen = 0
        for line in r.iter_lines():
            if line.startswith("event: delta"):
                seen += 1
                if seen == 3:
                    break
    deadline = time.monotonic() + 5
    while not Message.objects.filter(role="assistant").exists():
        assert time.monotonic() < deadline, "the partial reply was not saved"
        time.sleep(0.05)
    assistant = Message.objects.get(role="assistant")
    assert assistant.status == "partial"
    assert assistant.content.startswith("Echo: w0 ")
    assert len(assistant.content.split()) < 41


# ---- the conversation deleted for good mid-reply ------------------------------------------------

def purge(world, conversation_id):
    api = Api(world.base, world.key)
    assert api.delete(f"/api/v1/conversations/{conversation_id}/permanent").status_code == 200
    api.close()


def test_a_conversation_deleted_for_good_mid_reply_still_ends_the_stream_and_is_metered(world):
    conversation_id = world.api.post(CHAT, {**HELLO, "stream": False}).json()["conversation_id"]
    world.upstream.configure(tokens_per_second=4)
    text = ""
    with world.api.client.stream("POST", CHAT, json={**HELLO, "conversation_id": conversation_id}) as r:
        assert r.status_code == 200
        for piece in r.iter_text():
            if "event: delta" in piece and not text.count("event: delta"):
                purge(world, conversation_id)
            text += piece
    events = sse_events(SimpleNamespace(text=text))
    assert names(events)[0] == "meta" and names(events)[-2:] == ["delta", "done"]
    assert "".join(p["text"] for n, p in events if n == "delta") == "Echo: one two three four five"
    done = events[-1][1]
    assert done["message_id"] is None and done["usage"]["completion_tokens"] == 6
    assert not Conversation.objects.filter(pk=conversation_id).exists()
    assert not Message.objects.filter(conversation_id=conversation_id).exists()
    records = wait_for_usage(world.account, count=2)  # the first turn and this one, each once
    assert records[-1].output_tokens == 6
    time.sleep(0.2)
    assert UsageRecord.objects.filter(account=world.account).count() == 2


def test_without_streaming_a_conversation_deleted_mid_reply_answers_200_without_a_message_id(world):
    conversation_id = world.api.post(CHAT, {**HELLO, "stream": False}).json()["conversation_id"]
    world.upstream.configure(tokens_per_second=4)
    answer = {}
    chat = threading.Thread(target=lambda: answer.update(r=Api(world.base, world.key).post(
        CHAT, {**HELLO, "conversation_id": conversation_id, "stream": False})))
    chat.start()
    deadline = time.monotonic() + 5
    while Message.objects.filter(conversation_id=conversation_id).count() < 3:  # the new user message
        assert time.monotonic() < deadline, "the user's message was not saved"
        time.sleep(0.02)
    purge(world, conversation_id)
    chat.join(10)
    r = answer["r"]
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["message_id"] is None and body["text"] == "Echo: one two three four five"
    assert body["conversation_id"] == conversation_id
    assert not Conversation.objects.filter(pk=conversation_id).exists()
    assert [u.surface for u in wait_for_usage(world.account, count=2)] == ["native_chat", "native_chat"]
    time.sleep(0.2)
    assert UsageRecord.objects.filter(account=world.account).count() == 2
