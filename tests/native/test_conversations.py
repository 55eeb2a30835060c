"""Conversations of native chat: list (newest first, paginated, no trash), read with messages,
move to the trash, delete for good (20 per minute); only the owner's; errors
`{status: 'error', message}`."""

import time
from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from native.models import Conversation, Message
from tests.contract import assert_limit_headers, assert_native_unauthenticated, assert_too_many_attempts
from tests.factories import ConversationFactory, MessageFactory, api_key_for, bearer

LIST = "/api/v1/conversations"


def one(conversation_id):
    return f"/api/v1/conversations/{conversation_id}"


def permanent(conversation_id):
    return f"/api/v1/conversations/{conversation_id}/permanent"


def assert_status_error(response, status, message=None):
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"status", "message"}, body
    assert body["status"] == "error"
    if message is not None:
        assert body["message"] == message


@pytest.fixture
def key(owner):
    return api_key_for(owner)


@pytest.fixture
def conversations(owner):
    """Three of the owner's conversations, the last one the most recently active."""
    made = []
    base = timezone.now() - timedelta(hours=1)
    for n in range(3):
        c = ConversationFactory(account=owner, title=f"talk {n}")
        Conversation.objects.filter(pk=c.pk).update(updated_at=base + timedelta(minutes=n))
        made.append(c)
    return made


def test_it_lists_the_owners_conversations_newest_first(client, key, conversations, outsider):
    ConversationFactory(account=outsider, title="not yours")
    r = client.get(LIST, headers=bearer(key))
    assert r.status_code == 200
    body = r.json()
    assert body["status"] == "success"
    assert [c["title"] for c in body["data"]] == ["talk 2", "talk 1", "talk 0"]
    assert set(body["data"][0]) == {"id", "title", "profile", "model", "created_at", "updated_at"}
    assert body["pagination"] == {"page": 1, "per_page": 20, "total": 3, "pages": 1}


def test_it_pages(client, key, conversations):
    r = client.get(LIST, {"page": 2, "per_page": 2}, headers=bearer(key))
    assert [c["title"] for c in r.json()["data"]] == ["talk 0"]
    assert r.json()["pagination"] == {"page": 2, "per_page": 2, "total": 3, "pages": 2}
    assert client.get(LIST, {"page": 3, "per_page": 2}, headers=bearer(key)).json()["data"] == []


def test_per_page_at_its_maximum_is_taken_and_one_more_refused(client, key, conversations):
    assert client.get(LIST, {"per_page": 100}, headers=bearer(key)).status_code == 200
    r = client.get(LIST, {"per_page": 101}, headers=bearer(key))
    assert r.status_code == 422
    assert r.json() == {"message": "Ensure this value is less than or equal to 100.",
                        "errors": {"per_page": ["Ensure this value is less than or equal to 100."]}}
    for bad in ({"page": 0}, {"page": "x"}, {"per_page": 0}):
        assert client.get(LIST, bad, headers=bearer(key)).status_code == 422


def test_it_shows_one_conversation_with_its_messages(client, key, conversations):
    conversation = conversations[0]
    MessageFactory(conversation=conversation, role="user", content="hi", request_id="r1")
    MessageFactory(conversation=conversation, role="assistant", content="Echo: hi", model="oa/echo-1",
                   status="partial", usage={"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
                   citations=[{"index": 1}], request_id="r1")
    r = client.get(one(conversation.pk), headers=bearer(key))
    assert r.status_code == 200
    data = r.json()["data"]
    assert (data["id"], data["title"]) == (conversation.pk, "talk 0")
    assert [(m["role"], m["content"], m["status"]) for m in data["messages"]] == [
        ("user", "hi", "complete"), ("assistant", "Echo: hi", "partial")]
    assert set(data["messages"][1]) == {"id", "role", "content", "attachments", "citations", "model", "status",
                                        "usage", "request_id", "created_at"}
    assert data["messages"][1]["usage"] == {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}


def test_another_accounts_conversation_is_404_everywhere(client, conversations, outsider):
    other = bearer(api_key_for(outsider))
    target = conversations[0].pk
    assert_status_error(client.get(one(target), headers=other), 404, "Conversation not found.")
    assert_status_error(client.delete(one(target), headers=other), 404, "Conversation not found.")
    assert_status_error(client.delete(permanent(target), headers=other), 404, "Conversation not found.")
    assert Conversation.objects.filter(pk=target, trashed_at__isnull=True).exists()
    assert_status_error(client.get(one(999999), headers=other), 404)


def test_delete_moves_it_to_the_trash(client, key, conversations):
    target = conversations[1]
    r = client.delete(one(target.pk), headers=bearer(key))
    assert r.status_code == 200
    assert r.json() == {"status": "success", "message": "Conversation moved to the trash."}
    target.refresh_from_db()
    assert target.trashed_at is not None
    assert [c["title"] for c in client.get(LIST, headers=bearer(key)).json()["data"]] == ["talk 2", "talk 0"]
    assert_status_error(client.get(one(target.pk), headers=bearer(key)), 404)
    assert_status_error(client.delete(one(target.pk), headers=bearer(key)), 404)


def test_permanent_delete_removes_it_and_its_messages(client, key, conversations):
    target = conversations[0]
    MessageFactory(conversation=target, role="user", content="hi")
    client.delete(one(target.pk), headers=bearer(key))  # in the trash first: still deletable
    r = client.delete(permanent(target.pk), headers=bearer(key))
    assert r.status_code == 200
    assert r.json() == {"status": "success", "message": "Conversation deleted permanently."}
    assert not Conversation.objects.filter(pk=target.pk).exists()
    assert not Message.objects.filter(conversation_id=target.pk).exists()
    assert_status_error(client.delete(permanent(target.pk), headers=bearer(key)), 404)
    other = conversations[1]  # straight from the list, without the trash
    assert client.delete(permanent(other.pk), headers=bearer(key)).status_code == 200


def test_the_20th_purge_in_a_minute_is_answered_and_the_21st_refused(client, key, owner):
    ids = [ConversationFactory(account=owner).pk for _ in range(21)]
    with time_machine.travel(time.time(), tick=False):
        now = int(time.time())
        for n, conversation_id in enumerate(ids[:20]):
            r = client.delete(permanent(conversation_id), headers=bearer(key))
            assert r.status_code == 200
            assert_limit_headers(r, 20, 19 - n)
        refused = client.delete(permanent(ids[20]), headers=bearer(key))
        assert_too_many_attempts(refused, 20, now=now)
        assert Conversation.objects.filter(pk=ids[20]).exists()
        # the other conversation endpoints count on the general counter, untouched by purges
        assert client.get(LIST, headers=bearer(key)).status_code == 200


def test_the_wrong_method_and_no_credential(client, key, conversations):
    assert client.post(LIST, headers=bearer(key)).status_code == 405
    assert client.get(permanent(conversations[0].pk), headers=bearer(key)).status_code == 405
    assert_native_unauthenticated(client.get(LIST))
    assert_native_unauthenticated(client.delete(permanent(conversations[0].pk)))


def test_the_operator_reads_conversations_in_the_admin(client, conversations):
    from tests.factories import AccountFactory

    operator = AccountFactory(is_staff=True, is_superuser=True, email="operator@example.test")
    client.force_login(operator)
    target = conversations[0]
    MessageFactory(conversation=target, role="user", content="a question for the log")
    listing = client.get("/admin/native/conversation/")
    assert listing.status_code == 200
    assert b"talk 0" in listing.content
    page = client.get(f"/admin/native/conversation/{target.pk}/change/")
    assert page.status_code == 200
    assert b"a question for the log" in page.content
    assert b'name="_save"' not in page.content  # read-only
    assert client.get("/admin/native/conversation/add/").status_code == 403
