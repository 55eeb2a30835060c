"""POST /api/v1/chat through a running gateway and the reference upstream, with retrieval: chunks
of a collection go to the model and are cited; a profile's collection searched for the caller,
with its own model, and metered to the caller; conversations removed while the turn is
prepared; another account's collection."""

import threading
import time

import pytest

from gateway.models import UsageRecord
from native.models import Conversation, Message
from tests.factories import ModelFactory, ProfileFactory
from tests.native.chat_support import CHAT, assert_detail, chat_requests
from tests.native.conftest import Api, sse_events
from tests.servers import wait_for_usage


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
