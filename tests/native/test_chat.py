"""POST /api/v1/chat through a running gateway and the reference upstream: the event stream,
the whole-object form, conversations continued with their history, trimming, profiles,
attachments, the quota refusal inside the stream, and every limit at its boundary."""

import base64
import threading
import time

import pytest

from gateway.models import UsageRecord
from gateway.tokens import count_chat_request
from native.models import Conversation, Message
from tests.factories import ConversationFactory, MessageFactory, ModelFactory, ProfileFactory
from tests.native.conftest import Api, sse_events
from tests.servers import wait_for_usage

CHAT = "/api/v1/chat"
UPSTREAM_CHAT = "/v1/chat/completions"


def chat_requests(world):
    return [r for r in world.upstream.requests if r.path == UPSTREAM_CHAT]


def assert_detail(response, status):
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"detail"}, body
    return body["detail"]


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


# ---- limits ------------------------------------------------------------------------------------

def test_a_message_of_32000_characters_is_taken_and_32001_refused(world):
    assert world.api.post(CHAT, {"message": "a" * 32000, "stream": False}).status_code == 200
    r = world.api.post(CHAT, {"message": "a" * 32001})
    assert r.status_code == 422
    assert r.json() == {"message": "Ensure this field has no more than 32000 characters.",
                        "errors": {"message": ["Ensure this field has no more than 32000 characters."]}}
    assert len(chat_requests(world)) == 1


@pytest.mark.parametrize("body, field", [
    ({}, "message"), ({"message": ""}, "message"), ({"message": 5}, "message"),
    ({"message": "hi", "stream": "sometimes"}, "stream"), ({"message": "hi", "attachments": "file"}, "attachments"),
    ({"message": "hi", "conversation_id": "x"}, "conversation_id"),
])
def test_bad_input_is_422(world, body, field):
    r = world.api.post(CHAT, body)
    assert r.status_code == 422
    assert set(r.json()) == {"message", "errors"} and field in r.json()["errors"]


def test_a_message_of_only_whitespace_is_422_and_others_are_kept_as_sent(world):
    r = world.api.post(CHAT, {"message": " \n\t  "})
    assert r.status_code == 422
    blank = "This field may not be blank."
    assert r.json() == {"message": blank, "errors": {"message": [blank]}}
    assert chat_requests(world) == [] and not Conversation.objects.exists()
    assert world.api.post(CHAT, {"message": "  hi there\n", "stream": False}).status_code == 200
    assert Message.objects.get(role="user").content == "  hi there\n"
    assert chat_requests(world)[-1].json["messages"][-1] == {"role": "user", "content": "  hi there\n"}


def test_attachments_up_to_the_groups_count_and_one_more_refused(world):
    world.group.attachments_per_message = 2
    world.group.save()
    note = {"name": "note.txt", "content_type": "text/plain", "text": "remember the milk"}
    r = world.api.post(CHAT, {"message": "read these", "attachments": [note, note], "stream": False})
    assert r.status_code == 200
    r = world.api.post(CHAT, {"message": "read these", "attachments": [note, note, note]})
    assert assert_detail(r, 403) == "Your account group allows at most 2 attachments per message; this one has 3."
    assert len(chat_requests(world)) == 1


def test_text_files_and_images_reach_the_model(world):
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 16).decode()
    csv = base64.b64encode("a,b\n1,2\n".encode()).decode()
    attachments = [
        {"name": "note.md", "content_type": "text/markdown", "text": "# Title"},
        {"name": "data.csv", "content_type": "text/csv; charset=utf-8", "data": csv},
        {"name": "pic.png", "content_type": "image/png", "data": png},
    ]
    r = world.api.post(CHAT, {"message": "look", "attachments": attachments, "stream": False})
    assert r.status_code == 200
    assert chat_requests(world)[-1].json["messages"] == [{"role": "user", "content": [
        {"type": "text", "text": "look"},
        {"type": "text", "text": "Attached file note.md:\n# Title"},
        {"type": "text", "text": "Attached file data.csv:\na,b\n1,2\n"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png}"}},
    ]}]
    user = Message.objects.get(role="user")
    assert user.attachments == [
        {"name": "note.md", "content_type": "text/markdown", "size": 7, "text": "# Title"},
        {"name": "data.csv", "content_type": "text/csv", "size": 8, "text": "a,b\n1,2\n"},
        {"name": "pic.png", "content_type": "image/png", "size": 24},
    ]
    # the next turn sends the text files again, not the image
    world.api.post(CHAT, {"message": "and now", "conversation_id": r.json()["conversation_id"], "stream": False})
    first = chat_requests(world)[-1].json["messages"][0]
    assert first["content"] == [{"type": "text", "text": "look"},
                                {"type": "text", "text": "Attached file note.md:\n# Title"},
                                {"type": "text", "text": "Attached file data.csv:\na,b\n1,2\n"}]


@pytest.mark.parametrize("attachment, problem", [
    ({"name": "a.pdf", "content_type": "application/pdf", "data": "JVBERi0="}, "are not accepted"),
    ({"name": "a.png", "content_type": "image/png", "data": "not base64!"}, "not valid base64"),
    ({"name": "a.png", "content_type": "image/png", "text": "words"}, "sent as base64"),
    ({"name": "a.bmp", "content_type": "image/bmp", "data": "AAAA"}, "Images must be one of"),
    ({"name": "a.txt", "content_type": "text/plain", "data": base64.b64encode(b"\xff\xfe").decode()}, "UTF-8"),
    ({"name": "a.txt", "content_type": "text/plain"}, "exactly one of"),
    ({"content_type": "text/plain", "text": "x"}, "'name'"),
    ("a string", "must be an object"),
])
def test_a_bad_attachment_is_422(world, attachment, problem):
    r = world.api.post(CHAT, {"message": "hi", "attachments": [attachment]})
    assert r.status_code == 422
    body = r.json()
    assert list(body["errors"]) == ["attachments.0"]
    assert problem in body["errors"]["attachments.0"][0]
    assert chat_requests(world) == []


def test_a_text_attachment_at_its_character_limit_is_taken_and_one_more_refused(world):
    limit = 100_000
    ok = {"name": "big.txt", "content_type": "text/plain", "text": "a" * limit}
    assert world.api.post(CHAT, {"message": "hi", "attachments": [ok], "stream": False}).status_code == 200
    over = {**ok, "text": "a" * (limit + 1)}
    r = world.api.post(CHAT, {"message": "hi", "attachments": [over]})
    assert r.status_code == 422
    assert r.json()["errors"] == {"attachments.0": [f"A text file may be at most {limit} characters."]}


def test_the_60th_call_in_a_minute_is_answered_and_the_61st_refused(world):
    now = int(time.time())
    for i in range(59):
        assert world.api.post(CHAT, {}).status_code == 422  # refused input counts too
    r = world.api.post(CHAT, {"message": "hi", "stream": False})
    assert r.status_code == 200
    assert (r.headers["X-RateLimit-Limit"], r.headers["X-RateLimit-Remaining"]) == ("60", "0")
    refused = world.api.post(CHAT, {"message": "hi"})
    assert refused.status_code == 429
    assert refused.json() == {"message": "Too Many Attempts."}
    assert (refused.headers["X-RateLimit-Limit"], refused.headers["X-RateLimit-Remaining"]) == ("60", "0")
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert now < int(refused.headers["X-RateLimit-Reset"]) <= now + 61
    wait_for_usage(world.account)
    # the limit is the account's: another account still chats
    assert world.outsider_api.post(CHAT, {"message": "hi", "stream": False}).status_code == 200


def test_native_chat_also_counts_on_the_general_counter(world):
    """Spec 8.1 rule 3: the 300-per-minute counter is fed by native chat too."""
    for _ in range(3):
        assert world.api.post(CHAT, {}).status_code == 422
    listing = world.api.get("/api/v1/conversations")
    assert (listing.headers["X-RateLimit-Limit"], listing.headers["X-RateLimit-Remaining"]) == ("300", "296")


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


# ---- retrieval ---------------------------------------------------------------------------------

def make_collection(api, documents):
    created = api.post("/api/v1/collections", {"name": "notes"})
    assert created.status_code == 201, created.text
    collection_id = created.json()["id"]
    for name, text in documents:
        r = api.post(f"/api/v1/collections/{collection_id}/documents",
                     {"name": name, "content_type": "text/plain", "text": text})
        assert r.status_code == 201, r.text
    return collection_id


def test_retrieved_chunks_go_to_the_model_and_are_cited(world):
    ModelFactory(server=world.oa, name="embed-1", supports_chat=False, supports_embeddings=True)
    collection_id = make_collection(world.api, [
        ("pets.txt", "The office cat is called Marmalade and sleeps on the printer."),
        ("travel.txt", "Trains to the coast leave every hour from platform nine."),
    ])
    r = world.api.post(CHAT, {"message": "what is the office cat called", "collection_id": collection_id})
    assert r.status_code == 200
    events = sse_events(r)
    done = events[-1][1]
    system = chat_requests(world)[-1].json["messages"][0]
    assert system["role"] == "system"
    assert "[1] pets.txt:\nThe office cat is called Marmalade" in system["content"]
    assistant = Message.objects.get(pk=done["message_id"])
    citations = assistant.citations
    assert citations[0]["index"] == 1 and citations[0]["document_name"] == "pets.txt"
    assert citations[0]["collection_id"] == collection_id
    assert set(citations[0]) == {"index", "collection_id", "document_id", "document_name", "chunk_id", "position",
                                 "score", "text"}
    assert citations[0]["score"] > citations[-1]["score"] or len(citations) == 1
    assert done == {"request_id": done["request_id"], "message_id": assistant.pk, "usage": done["usage"],
                    "citations": citations}
    whole = world.api.post(CHAT, {"message": "what is the office cat called", "collection_id": collection_id,
                                  "stream": False}).json()
    assert whole["citations"][0]["document_name"] == "pets.txt"


def test_a_profiles_collection_is_searched_for_the_caller_and_metered_to_the_caller(world):
    """A profile may lend its collection (here the outsider's) to a group: the query embedding is
    the caller's call, checked against the caller's group and metered to the caller."""
    ModelFactory(server=world.oa, name="embed-1", supports_chat=False, supports_embeddings=True)
    lent = make_collection(world.outsider_api, [("pets.txt", "The office cat is called Marmalade.")])
    profile = ProfileFactory(name="librarian")
    profile.groups.add(world.group)
    profile.collections.add(lent)
    owners_records = wait_for_usage(world.outsider)  # the document's embedding
    r = world.api.post(CHAT, {"message": "what is the office cat called", "profile": "librarian", "stream": False})
    assert r.status_code == 200, r.text
    assert r.json()["citations"][0]["document_name"] == "pets.txt"
    records = wait_for_usage(world.account, count=2)  # the query's embedding and the chat
    assert sorted(u.surface for u in records) == ["native_chat", "native_collections"]
    assert UsageRecord.objects.filter(account=world.outsider).count() == len(owners_records)


@pytest.mark.parametrize("removal", ["", "/permanent"])
def test_a_conversation_trashed_or_deleted_while_the_turn_is_prepared_is_404_and_stays_so(world, removal):
    """The conversation goes while the query is embedded: the turn is refused, and the trashed
    conversation stays in the trash, the deleted one stays deleted."""
    ModelFactory(server=world.oa, name="embed-1", supports_chat=False, supports_embeddings=True)
    collection_id = make_collection(world.api, [("lava.txt", "Volcanoes bring up magma.")])
    conversation_id = world.api.post(CHAT, {"message": "hello", "stream": False}).json()["conversation_id"]
    world.upstream.configure(latency_ms=1000)
    answer = {}
    chat = threading.Thread(target=lambda: answer.update(r=Api(world.base, world.key).post(
        CHAT, {"message": "volcano", "conversation_id": conversation_id, "collection_id": collection_id})))
    asked = len(world.upstream.requests)
    chat.start()
    deadline = time.monotonic() + 5
    while len(world.upstream.requests) == asked:  # the query's embedding is on its way
        assert time.monotonic() < deadline, "the query was not embedded"
        time.sleep(0.02)
    assert world.api.delete(f"/api/v1/conversations/{conversation_id}{removal}").status_code == 200
    chat.join(10)
    assert assert_detail(answer["r"], 404) == "Conversation not found."
    assert len(chat_requests(world)) == 1  # the first turn only
    if removal:
        assert not Conversation.objects.filter(pk=conversation_id).exists()
        assert not Message.objects.filter(conversation_id=conversation_id).exists()
    else:
        assert Conversation.objects.get(pk=conversation_id).trashed_at is not None
        assert Message.objects.filter(conversation_id=conversation_id).count() == 2


@pytest.mark.parametrize("group_may_use_it", [True, False])
def test_a_profiles_collection_is_searched_with_its_own_model_when_the_callers_group_may_use_it(
        world, group_may_use_it):
    """The caller's group's embedding model is now another one (`oa/embed-0`, first by name) than
    the lent collection's: the query is embedded with the collection's model while the caller's
    group may use it; otherwise the caller is told the collection needs a reindex, as before."""
    ModelFactory(server=world.oa, name="embed-1", supports_chat=False, supports_embeddings=True)
    lent = make_collection(world.outsider_api, [("pets.txt", "The office cat is called Marmalade.")])
    newer = ModelFactory(server=world.oa, name="embed-0", supports_chat=False, supports_embeddings=True)
    if not group_may_use_it:
        world.group.all_models = False
        world.group.save()
        world.group.allowed_models.add(world.default, newer)
    profile = ProfileFactory(name="librarian")
    profile.groups.add(world.group)
    profile.collections.add(lent)
    earlier = len(world.upstream.requests)
    r = world.api.post(CHAT, {"message": "what is the office cat called", "profile": "librarian", "stream": False})
    asked = [q.json["model"] for q in world.upstream.requests[earlier:] if q.path == "/v1/embeddings"]
    if group_may_use_it:
        assert r.status_code == 200, r.text
        assert r.json()["citations"][0]["document_name"] == "pets.txt"
        assert asked == ["embed-1"]
        records = wait_for_usage(world.account, count=2)
        assert ("native_collections", "oa/embed-1") in [(u.surface, u.model) for u in records]
    else:
        assert "but the embedding model is now 'oa/embed-0'" in assert_detail(r, 409)
        assert asked == [] and chat_requests(world) == []


def test_another_accounts_collection_is_404(world):
    ModelFactory(server=world.oa, name="embed-1", supports_chat=False, supports_embeddings=True)
    collection_id = make_collection(world.outsider_api, [("secret.txt", "The vault code is 1234.")])
    r = world.api.post(CHAT, {"message": "what is the vault code", "collection_id": collection_id})
    assert assert_detail(r, 404) == "Collection not found."
    assert chat_requests(world) == []
