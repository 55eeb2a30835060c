"""A call's tags (OpenAI's `metadata`; on /v1/messages Anthropic's `metadata.user_id`) on its row of the calls
log and on its usage record, through a running gateway; and in the console's "Calls": under the surface, on the
call's page, and searched by `key=value`."""

import re

import httpx
import pytest

from tests.factories import AccountFactory, CallRecordFactory
from tests.gateway.calls_log.conftest import HELLO, call_of, facts, rid, usage_of

BILLING = {"app": "billing", "team": "<b>ops</b>"}
LIST = "/admin/gateway/callrecord/"


def test_a_chat_completion_to_an_anthropic_server_keeps_its_tags_and_is_answered_by_it(world):
    completion = world.openai.chat.completions.create(model="an/claude-echo", messages=HELLO, metadata=BILLING,
                                                      extra_headers=rid("tags-chat"))
    assert completion.model == "an/claude-echo"
    call = call_of("tags-chat")
    assert call.tags == BILLING
    assert facts(call)["chain"] == [("an/claude-echo", "an", "ok", 200)] and call.fall_throughs == 0
    assert "metadata" not in world.upstream.last.json


@pytest.mark.parametrize("stream", [False, True])
def test_a_responses_call_keeps_its_tags(world, stream):
    name = f"tags-responses-{stream}"
    response = world.openai.responses.create(model="oa/echo-1", input="hello", metadata=BILLING, stream=stream,
                                             extra_headers=rid(name))
    if stream:
        assert [e.type for e in response][-1] == "response.completed"
    assert call_of(name).tags == BILLING
    assert world.upstream.last.json["metadata"] == BILLING


@pytest.mark.parametrize("model", ["an/claude-echo", "oa/echo-1"])
def test_a_messages_call_keeps_its_user_id_as_a_tag(world, model):
    world.anthropic.messages.create(model=model, max_tokens=50, messages=HELLO, metadata={"user_id": "user-7"},
                                    extra_headers=rid(f"tags-{model.replace('/', '-')}"))
    call = call_of(f"tags-{model.replace('/', '-')}")
    assert (call.model, call.tags) == (model, {"user_id": "user-7"})
    sent = world.upstream.last.json
    assert sent.get("metadata", {}).get("user_id", sent.get("user")) == "user-7"  # as sent, or as `user`


def test_a_call_without_tags_has_none_and_a_refused_one_none_either(world):
    world.openai.chat.completions.create(model="oa/echo-1", messages=HELLO, extra_headers=rid("tags-none"))
    assert call_of("tags-none").tags == {}
    response = httpx.post(f"{world.base}/v1/chat/completions", timeout=30,
                          headers={"Authorization": f"Bearer {world.key}", **rid("tags-refused")},
                          json={"model": "oa/echo-1", "messages": HELLO, "metadata": {"n": 5}})
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "metadata.n: must be a string."
    call = call_of("tags-refused")
    assert (call.status, call.outcome, call.error_code, call.tags) == (400, "refused", "invalid_request_error", {})


@pytest.mark.parametrize("stream", [False, True])
def test_the_calls_usage_record_has_its_tags(world, stream):
    chunks = world.openai.chat.completions.create(model="an/claude-echo", messages=HELLO, metadata=BILLING,
                                                  stream=stream, extra_headers=rid(f"usage-tags-{stream}"))
    if stream:
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Echo: one two three four five"
    record = usage_of(f"usage-tags-{stream}")
    assert (record.model, record.tags) == ("an/claude-echo", BILLING)
    world.anthropic.messages.create(model="oa/echo-1", max_tokens=50, messages=HELLO, metadata={"user_id": "u-1"},
                                    extra_headers=rid(f"usage-user-{stream}"))
    assert usage_of(f"usage-user-{stream}").tags == {"user_id": "u-1"}
    world.openai.chat.completions.create(model="oa/echo-1", messages=HELLO, extra_headers=rid(f"usage-none-{stream}"))
    assert usage_of(f"usage-none-{stream}").tags == {}


# --- the console ----------------------------------------------------------------------------------


@pytest.fixture
def operator(client, db):
    client.force_login(AccountFactory(email="operator@example.test", is_staff=True, is_superuser=True))
    return client


@pytest.fixture
def tagged(db):
    return {"billing": CallRecordFactory(request_id="req-billing", tags=BILLING),
            "search": CallRecordFactory(request_id="req-search", tags={"app": "search", "x=y": "1"}),
            "none": CallRecordFactory(request_id="req-none")}


def listed(client, query: str = "") -> list[str]:
    response = client.get(LIST + query)
    assert response.status_code == 200, response.content[:500]
    return [call.request_id for call in response.context["cl"].result_list]


@pytest.mark.parametrize("query, expected", [
    ("?q=app%3Dbilling", ["req-billing"]),
    ("?q=app%3Dsearch", ["req-search"]),
    ("?q=team%3D%3Cb%3Eops%3C%2Fb%3E", ["req-billing"]),
    ("?q=x%3Dy%3D1", []),  # split at the first `=`: the key `x`, which no call has
    ("?q=app%3Dbill", []),  # exact, not a part
    ("?q=app%3D", []),
    ("?q=%3Dbilling", []),  # no key: matches nothing
])
def test_the_calls_are_searched_by_a_tag(operator, tagged, query, expected):
    assert listed(operator, query) == expected


def test_the_tags_are_shown_under_the_surface_and_on_the_calls_page_escaped(operator, tagged):
    html = operator.get(LIST).content.decode()
    assert "chat.completions<br><small class='call-tags'>app=billing · team=&lt;b&gt;ops&lt;/b&gt;</small>" in html
    assert "<b>ops</b>" not in html
    page = operator.get(f"{LIST}{tagged['billing'].pk}/change/").content.decode()
    shown = re.search(r"<span class='call-tags'[^>]*>(.*?)</span>", page, re.S).group(1)
    assert shown == "app=billing\nteam=&lt;b&gt;ops&lt;/b&gt;"
    assert "(none)" in operator.get(f"{LIST}{tagged['none'].pk}/change/").content.decode()
