"""The playground under the staff account's group's guardrails, as the API: a blocked prompt refused with
the API's body and nothing sent to a model; a reply stopped by an output check ends in the page's
`error` event with the API's code."""

from __future__ import annotations

from tests.compat.guard_support import BLOCK, CARD, OUTPUT_BLOCK, PROMPT, guard
from tests.gateway.console.test_playground import REPLY, api_answer, events, signed_in, world  # noqa: F401
from tests.upstream.fixtures import upstream  # noqa: F401 — the fixture

ASK = [{"role": "user", "content": PROMPT}]


def test_a_blocked_prompt_is_the_apis_refusal(world):
    guard(world.group, BLOCK)
    with signed_in(world.base, world.staff) as client:
        refused = client.post(REPLY, json={"model": "oa/echo-1", "messages": ASK})
    api = api_answer(world, model="oa/echo-1", messages=ASK)
    assert refused.status_code == api.status_code == 400
    assert refused.json() == api.json()
    assert refused.json()["error"]["code"] == "content_policy_violation"
    assert world.upstream.requests == []


def test_a_reply_stopped_by_an_output_check_ends_in_an_error_event(world):
    guard(world.group, OUTPUT_BLOCK)
    world.upstream.configure(reply=f"the card is {CARD} and so on")
    with signed_in(world.base, world.staff) as client:
        answer = client.post(REPLY, json={"model": "oa/echo-1", "messages": [{"role": "user", "content": "card?"}]})
    found = events(answer)
    assert [name for name, _ in found][-2:] == ["error", "done"]
    error = found[-2][1]
    assert (error["status"], error["error"]["code"]) == (400, "content_policy_violation")
    assert "4111" not in answer.text
