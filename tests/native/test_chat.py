"""POST /api/v1/chat through a running gateway and the reference upstream: the event stream,
the whole-object form, conversations continued with their history, trimming, profiles and
models, others' conversations, and the quota refusal inside the stream. Limits at their
boundaries: test_chat_limits.py; retrieval from collections: test_chat_retrieval.py."""

import time

from gateway.calls.tokens import count_chat_request
from gateway.models import UsageRecord
from native.models import Conversation, Message
from tests.factories import ConversationFactory, MessageFactory, ModelFactory, ProfileFactory
from tests.native.chat_support import CHAT, assert_detail, chat_requests
from tests.native.conftest import sse_events
from tests.servers import wait_for_usage

# ---- the stream --------------------------------------------------------------------------------

def test_it_streams_meta_deltas_and_done(world):
    r = world.api.post(CHAT, {"message": "hello there"})
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "text/event-stream"
    events = sse_events(r)
    names = [name for name, _ in events]
    assert names == ["meta", "delta", "delta", "delta", "done"]
    request_id = r.headers["X-Inference-Request-Id"]
    assert all(payload["request_id"] == request_id for _, payload in events)
    conversation = Conversation.objects.get(account=world.account)
    assert events[0][1] == {"request_id": request_id, "conversation_id": conversation.pk, "model": "oa/echo-1"}
    assert [p["text"] for n, p in events if n == "delta"] == ["Echo: ", "hello ", "there"]
    assert set(events[1][1]) == {"request_id", "text"}
    user, assistant = conversation.messages.order_by("id")
    assert (user.role, user.content) == ("user", "hello there")
    assert (assistant.role, assistant.content, assistant.status) == ("assistant", "Echo: hello there", "complete")
    assert assistant.model == "oa/echo-1" and assistant.request_id == request_id
    usage = {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5}  # the upstream counts words
    assert events[-1][1] == {"request_id": request_id, "message_id": assistant.pk, "usage": usage, "citations": []}
    assert assistant.usage == usage
    assert conversation.title == "hello there"


def test_it_is_metered_once_as_native_chat(world):
    world.api.post(CHAT, {"message": "count me", "stream": False})
    (record,) = wait_for_usage(world.account)
    assert (record.surface, record.model, record.input_tokens, record.output_tokens) == (
        "native_chat", "oa/echo-1", 2, 3)
    time.sleep(0.1)
    assert UsageRecord.objects.filter(account=world.account).count() == 1


def test_stream_false_answers_one_object(world):
    r = world.api.post(CHAT, {"message": "hello there", "stream": False})
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "application/json"
    body = r.json()
    conversation = Conversation.objects.get(account=world.account)
    assistant = conversation.messages.get(role="assistant")
    assert body == {
        "request_id": r.headers["X-Inference-Request-Id"], "conversation_id": conversation.pk, "model": "oa/echo-1",
        "message_id": assistant.pk, "text": "Echo: hello there", "citations": [],
        "usage": {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5},
    }


def test_a_continued_conversation_sends_its_history(world):
    first = world.api.post(CHAT, {"message": "my name is Ada", "stream": False}).json()
    second = world.api.post(CHAT, {"message": "what is my name", "conversation_id": first["conversation_id"],
                                   "stream": False}).json()
    assert second["conversation_id"] == first["conversation_id"]
    sent = chat_requests(world)[-1].json["messages"]
    assert sent == [
        {"role": "user", "content": "my name is Ada"},
        {"role": "assistant", "content": "Echo: my name is Ada"},
        {"role": "user", "content": "what is my name"},
    ]
    conversation = Conversation.objects.get(pk=first["conversation_id"])
    assert [m.content for m in conversation.messages.order_by("id")] == [
        "my name is Ada", "Echo: my name is Ada", "what is my name", "Echo: what is my name"]
    assert Conversation.objects.filter(account=world.account).count() == 1


def test_history_is_trimmed_oldest_first_to_the_models_context(world):
    world.default.context_window = 400  # 100 of them kept for the reply: 300 for the request
    world.default.save()
    conversation = ConversationFactory(account=world.account, title="long")
    for n in range(12):
        words = " ".join(f"w{n}x{i}" for i in range(12))
        MessageFactory(conversation=conversation, role="user", content=f"question {n} {words}")
        MessageFactory(conversation=conversation, role="assistant", content=f"answer {n} {words}")
    r = world.api.post(CHAT, {"message": "the newest question", "conversation_id": conversation.pk,
                              "stream": False})
    assert r.status_code == 200
    sent = chat_requests(world)[-1].json["messages"]
    assert sent[-1] == {"role": "user", "content": "the newest question"}
    assert sent[0]["role"] == "user"  # the kept part starts with a question
    assert sent[-2]["content"].startswith("answer 11 ")  # the newest history is kept
    assert 2 < len(sent) < 25  # the oldest are gone
    assert not any(m["content"].startswith(("question 0 ", "answer 0 ")) for m in sent)
    assert count_chat_request({"messages": sent}) <= 300
    oldest_kept = int(sent[0]["content"].split()[1])
    older = [{"role": role, "content": Message.objects.get(conversation=conversation,
                                                           content__startswith=f"{word} {oldest_kept - 1} ").content}
             for role, word in (("user", "question"), ("assistant", "answer"))]
    assert count_chat_request({"messages": [*older, *sent]}) > 300  # the turn before would not have fitted


# ---- profiles and models -----------------------------------------------------------------------

def test_a_profile_brings_its_model_system_prompt_and_temperature(world):
    other = ModelFactory(server=world.oa, name="echo-2")
    profile = ProfileFactory(name="pirate", model=other, system_prompt="Talk like a pirate.",
                             temperature=0.3)
    profile.groups.add(world.group)
    r = world.api.post(CHAT, {"message": "ahoy", "profile": "pirate", "stream": False})
    assert r.status_code == 200
    assert r.json()["model"] == "oa/echo-2"
    sent = chat_requests(world)[-1].json
    assert sent["model"] == "echo-2"
    assert sent["temperature"] == 0.3
    assert sent["messages"] == [{"role": "system", "content": "Talk like a pirate."},
                                {"role": "user", "content": "ahoy"}]
    conversation = Conversation.objects.get(pk=r.json()["conversation_id"])
    assert conversation.profile == profile
    # a continued conversation keeps its profile
    world.api.post(CHAT, {"message": "again", "conversation_id": conversation.pk, "stream": False})
    assert chat_requests(world)[-1].json["messages"][0] == {"role": "system", "content": "Talk like a pirate."}


def test_a_profile_not_granted_or_disabled_is_refused(world):
    ProfileFactory(name="secret", system_prompt="x").groups.add(world.others)
    disabled = ProfileFactory(name="off", enabled=False)
    disabled.groups.add(world.group)
    for name in ("secret", "off"):
        r = world.api.post(CHAT, {"message": "hi", "profile": name})
        assert "is not available to your account group" in assert_detail(r, 403)
    r = world.api.post(CHAT, {"message": "hi", "profile": "nope"})
    assert r.status_code == 422
    assert r.json() == {"message": "There is no profile named 'nope'.",
                        "errors": {"profile": ["There is no profile named 'nope'."]}}
    assert chat_requests(world) == []
    assert not Conversation.objects.exists()


def test_a_model_not_allowed_to_the_group_is_403(world):
    allowed = ModelFactory(server=world.oa, name="echo-2")
    world.group.all_models = False
    world.group.save()
    world.group.allowed_models.add(allowed)
    r = world.api.post(CHAT, {"message": "hi", "model": "oa/echo-1"})
    assert "not allowed for your account group" in assert_detail(r, 403)
    assert world.api.post(CHAT, {"message": "hi", "model": "oa/echo-2", "stream": False}).status_code == 200


# ---- conversations of others -------------------------------------------------------------------

def test_another_accounts_or_a_trashed_conversation_is_404(world):
    theirs = ConversationFactory(account=world.outsider, title="theirs")
    trashed = ConversationFactory(account=world.account, title="old")
    world.api.delete(f"/api/v1/conversations/{trashed.pk}")
    for conversation_id in (theirs.pk, trashed.pk, 999999):
        r = world.api.post(CHAT, {"message": "hi", "conversation_id": conversation_id})
        assert assert_detail(r, 404) == "Conversation not found."
    assert not theirs.messages.exists() and not trashed.messages.exists()
    assert chat_requests(world) == []


# ---- quota -------------------------------------------------------------------------------------

def test_a_used_up_quota_is_an_error_event_in_the_stream(world):
    world.group.daily_tokens = 5
    world.group.save()
    first = world.api.post(CHAT, {"message": "hello there", "stream": False})
    assert first.status_code == 200  # 5 tokens: the ceiling is now reached
    conversation_id = first.json()["conversation_id"]
    r = world.api.post(CHAT, {"message": "one more", "conversation_id": conversation_id})
    assert r.status_code == 200
    events = sse_events(r)
    request_id = r.headers["X-Inference-Request-Id"]
    assert [name for name, _ in events] == ["meta", "error", "done"]
    assert events[0][1] == {"request_id": request_id, "conversation_id": conversation_id, "model": "oa/echo-1"}
    error = events[1][1]
    assert set(error) == {"request_id", "codigo", "message"} and error["codigo"] == "limite_perfil"
    assert "daily ceiling of 5 tokens" in error["message"]
    assert events[2][1] == {"request_id": request_id, "message_id": None, "citations": [],
                            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}}
    assert len(chat_requests(world)) == 1  # the model was not called
    assert Message.objects.filter(conversation_id=conversation_id).count() == 2  # nothing saved
    whole = world.api.post(CHAT, {"message": "one more", "stream": False})
    assert whole.status_code == 403
    assert whole.json()["codigo"] == "limite_perfil"
    assert whole.json()["request_id"] == whole.headers["X-Inference-Request-Id"]
    assert "daily ceiling" in whole.json()["detail"]
