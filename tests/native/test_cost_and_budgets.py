"""What a call costs and budgets in money on the native surface, through a running gateway and
the reference upstream: native chat (whole and streamed) and the agent cost their tokens at the model's
price; a spent budget is refused as a used-up token quota is: an `error` event with `codigo`
`limite_perfil` in the chat stream, 403 with `detail` on the agent (spec 8.4's table), also between
two rounds of one agent turn, naming the budget."""

import time
from decimal import Decimal

from accounts.models import AccountGroup
from gateway.registry.prices import money
from tests.native.agent_support import AGENT_CHAT, agent_fixture, mcp_server_fixture  # noqa: F401
from tests.native.chat_support import CHAT, chat_requests
from tests.native.conftest import sse_events
from tests.servers import wait_for_usage

ADD = {"name": "calc__add", "arguments": {"a": 2, "b": 3}}


def priced(world, input_price="2500", output_price="10000"):
    world.default.input_price, world.default.output_price = Decimal(input_price), Decimal(output_price)
    world.default.save()


def daily_budget(world, amount):
    group = AccountGroup.objects.get(pk=world.group.pk)
    group.daily_budget = Decimal(amount)
    group.save()


def wait_spent(world, amount: Decimal, timeout=5.0) -> None:
    deadline = time.monotonic() + timeout
    while Decimal(world.api.get("/api/v1/usage").json()["day"]["spend"]) < amount:
        assert time.monotonic() < deadline, "the spend did not reach its amount in time"
        time.sleep(0.05)


def test_native_chat_costs_its_tokens_whole_and_streamed(world):
    priced(world, input_price="1.25", output_price="5")
    whole = world.api.post(CHAT, {"message": "hello there", "stream": False})
    assert whole.json()["usage"] == {"prompt_tokens": 2, "completion_tokens": 3, "total_tokens": 5}
    streamed = world.api.post(CHAT, {"message": "hello there"})
    assert [name for name, _ in sse_events(streamed)][-1] == "done"
    records = wait_for_usage(world.account, 2)
    assert [r.surface for r in records] == ["native_chat", "native_chat"]
    assert [money(r.cost_units) for r in records] == [Decimal("0.0000175")] * 2  # 2 × 1.25 + 3 × 5 per million


def test_a_spent_budget_is_the_limite_perfil_event_in_the_stream_and_403_whole(world):
    priced(world)
    daily_budget(world, "0.0325")  # one call: 2 × 2,500 + 3 × 10,000 per million
    world.api.post(CHAT, {"message": "hello there", "stream": False})
    wait_spent(world, Decimal("0.0325"))
    r = world.api.post(CHAT, {"message": "one more"})
    assert r.status_code == 200
    events = sse_events(r)
    assert [name for name, _ in events] == ["meta", "error", "done"]
    error = events[1][1]
    assert set(error) == {"request_id", "codigo", "message"} and error["codigo"] == "limite_perfil"
    assert error["message"].startswith("Budget reached: the daily budget of 0.0325 USD is spent until ")
    whole = world.api.post(CHAT, {"message": "one more", "stream": False})
    assert whole.status_code == 403
    assert whole.json()["codigo"] == "limite_perfil" and "daily budget of 0.0325 USD" in whole.json()["detail"]
    assert len(chat_requests(world)) == 1  # the model was called once, before the budget was spent
    outsider = world.outsider_api.post(CHAT, {"message": "hello", "stream": False})
    assert outsider.status_code == 200  # another group's account spends its own


def test_an_agent_turn_costs_each_round_and_a_spent_budget_is_403_with_detail(agent):
    world = agent.world
    priced(world)
    daily_budget(world, "0.04")  # round 1 reads 4 and writes 3 tokens: 4 × 2,500 + 3 × 10,000 per million
    agent.upstream.configure(tool_script=[ADD] * 20)
    r = agent.api.post(AGENT_CHAT, {"message": "one two three four"})
    assert r.status_code == 403, r.text
    assert set(r.json()) == {"detail"} and "daily budget of 0.04 USD" in r.json()["detail"]
    assert len(agent.upstream.requests) == 1  # stopped between two rounds
    [record] = wait_for_usage(world.account, 1)
    assert (record.surface, money(record.cost_units)) == ("native_agent", Decimal("0.04"))
    again = agent.api.post(AGENT_CHAT, {"message": "hi"})
    assert again.status_code == 403 and set(again.json()) == {"detail"}
    assert len(agent.upstream.requests) == 1  # refused before any model call
