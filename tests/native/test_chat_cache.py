"""The response cache on POST /api/v1/chat: the key is the model request the turn builds
(profile prompt, retrieved excerpts, the history that fits, the new message), so the same message
in another conversation with the same history is a hit and a later turn of the same conversation is
not. A hit reaches no model server, comes as `meta`/`delta`/`done` (or whole), is saved in the
conversation and metered as cached."""

from native.models import Conversation
from tests.native.chat_support import CHAT, chat_requests
from tests.native.conftest import sse_events
from tests.servers import wait_for_usage

TEXT = "Echo: hello there"


def caching(group, seconds=60):
    group.response_cache_ttl = seconds
    group.save()


def streamed(api, body, headers=None):
    r = api.post(CHAT, body, headers=headers or {})
    assert r.status_code == 200, r.text
    events = sse_events(r)
    return r, events, "".join(p["text"] for name, p in events if name == "delta")


def test_a_hit_reaches_no_model_server_and_streams_the_same_reply(world):
    caching(world.group)
    first, first_events, first_text = streamed(world.api, {"message": "hello there"})
    second, events, text = streamed(world.api, {"message": "hello there"})
    assert (first.headers["X-Cache"], second.headers["X-Cache"]) == ("miss", "hit")
    assert len(chat_requests(world)) == 1
    assert text == first_text == TEXT
    names = [name for name, _ in events]
    assert names[0] == "meta" and names[-1] == "done" and set(names[1:-1]) == {"delta"}
    request_id = second.headers["X-Inference-Request-Id"]
    assert all(payload["request_id"] == request_id for _, payload in events)
    conversation = Conversation.objects.get(pk=events[0][1]["conversation_id"])
    assert conversation.pk != first_events[0][1]["conversation_id"]
    assert events[0][1]["model"] == "oa/echo-1"
    user, assistant = conversation.messages.order_by("id")
    assert (user.content, assistant.content, assistant.status, assistant.model) == (
        "hello there", TEXT, "complete", "oa/echo-1")
    assert events[-1][1] == {"request_id": request_id, "message_id": assistant.pk,
                             "usage": first_events[-1][1]["usage"], "citations": []}


def test_a_reply_kept_whole_is_given_streamed_and_the_other_way(world):
    caching(world.group)
    whole = world.api.post(CHAT, {"message": "hello there", "stream": False})
    r, _, text = streamed(world.api, {"message": "hello there"})
    assert (whole.headers["X-Cache"], r.headers["X-Cache"]) == ("miss", "hit")
    assert text == whole.json()["text"] == TEXT
    streamed(world.api, {"message": "kept from a stream"})
    again = world.api.post(CHAT, {"message": "kept from a stream", "stream": False})
    assert again.headers["X-Cache"] == "hit"
    assert again.json()["text"] == "Echo: kept from a stream"
    assert again.json()["usage"] == {"prompt_tokens": 4, "completion_tokens": 5, "total_tokens": 9}
    assert len(chat_requests(world)) == 2


def test_a_later_turn_of_a_conversation_is_not_the_first_turn(world):
    caching(world.group)
    _, events, _ = streamed(world.api, {"message": "hello there"})
    conversation_id = events[0][1]["conversation_id"]
    r, _, _ = streamed(world.api, {"message": "hello there", "conversation_id": conversation_id})
    assert r.headers["X-Cache"] == "miss"  # its history is in the request now
    assert len(chat_requests(world)) == 2
    assert chat_requests(world)[-1].json["messages"][:2] == [{"role": "user", "content": "hello there"},
                                                            {"role": "assistant", "content": TEXT}]


def test_a_hit_is_metered_as_cached(world):
    caching(world.group)
    world.api.post(CHAT, {"message": "count me", "stream": False})
    world.api.post(CHAT, {"message": "count me", "stream": False})
    made, given = wait_for_usage(world.account, 2)
    assert (made.cached, given.cached) == (False, True)
    assert (given.surface, given.model, given.input_tokens, given.output_tokens) == ("native_chat", "oa/echo-1", 2, 3)


def test_replies_never_cross_groups(world):
    caching(world.group)
    caching(world.others)
    world.api.post(CHAT, {"message": "hello there", "stream": False})
    r = world.outsider_api.post(CHAT, {"message": "hello there", "stream": False})
    assert r.headers["X-Cache"] == "miss"
    assert len(chat_requests(world)) == 2


def test_cache_control_steers_it(world):
    caching(world.group)

    def cache(headers=None):
        return streamed(world.api, {"message": "hello there"}, headers)[0].headers["X-Cache"]

    assert cache({"Cache-Control": "no-store"}) == "miss"
    assert cache() == "miss"
    assert cache({"Cache-Control": "no-cache"}) == "miss"
    assert cache() == "hit"
    assert len(chat_requests(world)) == 3


def test_at_ttl_0_there_is_no_cache(world):
    r1 = world.api.post(CHAT, {"message": "hello there", "stream": False})
    r2 = world.api.post(CHAT, {"message": "hello there", "stream": False})
    assert "X-Cache" not in r1.headers and "X-Cache" not in r2.headers
    assert len(chat_requests(world)) == 2


def test_a_failed_turn_is_not_kept(world):
    caching(world.group)
    world.upstream.configure(fail_status=503, fail_times=1)
    _, events, _ = streamed(world.api, {"message": "hello there"})
    assert [name for name, _ in events] == ["meta", "error", "done"]
    r, _, text = streamed(world.api, {"message": "hello there"})
    assert (r.headers["X-Cache"], text) == ("miss", TEXT)
    assert len(chat_requests(world)) == 2
