"""POST /api/v1/chat through a running gateway and the reference upstream, every limit at its
boundary: the message length, bad input, attachments (count, kinds, sizes), and the request
ceilings of the route and the general counter."""

import base64
import time

import pytest

from native.models import Conversation, Message
from tests.native.chat_support import CHAT, assert_detail, chat_requests
from tests.servers import wait_for_usage


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
    assert world.api.post(CHAT, {}).status_code == 422  # refused input counts too
    window_opened_by = int(time.time()) + 1  # the first call opens the minute, however long it took
    for i in range(58):
        assert world.api.post(CHAT, {}).status_code == 422
    r = world.api.post(CHAT, {"message": "hi", "stream": False})
    assert r.status_code == 200
    assert (r.headers["X-RateLimit-Limit"], r.headers["X-RateLimit-Remaining"]) == ("60", "0")
    refused = world.api.post(CHAT, {"message": "hi"})
    assert refused.status_code == 429
    assert refused.json() == {"message": "Too Many Attempts."}
    assert (refused.headers["X-RateLimit-Limit"], refused.headers["X-RateLimit-Remaining"]) == ("60", "0")
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    assert now < int(refused.headers["X-RateLimit-Reset"]) <= window_opened_by + 60
    wait_for_usage(world.account)
    # the limit is the account's: another account still chats
    assert world.outsider_api.post(CHAT, {"message": "hi", "stream": False}).status_code == 200


def test_native_chat_also_counts_on_the_general_counter(world):
    """Spec 8.1 rule 3: the 300-per-minute counter is fed by native chat too."""
    for _ in range(3):
        assert world.api.post(CHAT, {}).status_code == 422
    listing = world.api.get("/api/v1/conversations")
    assert (listing.headers["X-RateLimit-Limit"], listing.headers["X-RateLimit-Remaining"]) == ("300", "296")
