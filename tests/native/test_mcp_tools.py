"""`/api/v1/mcp` tools called through the official `mcp` Python client against a running
gateway, with real effects: `chat` on the reference upstream (metered as `mcp`, refusals as tool
errors, replies cut midway or given up on), `search_collection` on a collection with chunks, and
`list_routines`/`start_routine`."""

from __future__ import annotations

import httpx
import pytest

from gateway.calls.embeddings import embedding_model_for
from native.collections import NewDocument, collection_create, document_write
from native.models import Collection
from routines.models import Routine, Run
from tests.factories import RoutineFactory, bearer
from tests.native.mcp_support import ACCEPT, PATH, mcp_session, rpc, run, world_fixture  # noqa: F401 — the fixture
from tests.servers import wait_for_usage


def _routine(account, name: str, **fields) -> Routine:
    return RoutineFactory(account=account, name=name, prompt=f"Say {name}.",
                          webhook_token=f"tok-{name}-{account.pk}", **fields)


def test_chat_answers_from_the_upstream_and_is_metered_as_mcp(world):
    async def scenario():
        async with mcp_session(world.base, world.key) as session:
            await session.initialize()
            return await session.call_tool("chat", {"prompt": "hello there", "system": "Be brief."})

    result = run(scenario())
    assert result.is_error is False, result.content
    assert result.content[0].text == "Echo: hello there"
    assert result.structured_content["model"] == "oa/echo-1"
    sent = world.upstream.last.json
    assert sent["model"] == "echo-1"
    assert sent["messages"] == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello there"}]
    record = wait_for_usage(world.account)[0]
    usage = result.structured_content["usage"]
    assert (record.surface, record.model) == ("mcp", "oa/echo-1")
    assert (record.input_tokens, record.output_tokens) == (usage["prompt_tokens"], usage["completion_tokens"])


def test_chat_takes_a_conversation_and_a_named_model(world):
    async def scenario():
        async with mcp_session(world.base, world.key) as session:
            await session.initialize()
            return await session.call_tool("chat", {"model": "oa/echo-1", "messages": [
                {"role": "user", "content": "one"}, {"role": "assistant", "content": "Echo: one"},
                {"role": "user", "content": "two"}]})

    result = run(scenario())
    assert result.content[0].text == "Echo: two"
    assert len(world.upstream.last.json["messages"]) == 3


def test_chat_refusals_are_tool_errors(world):
    """A model the group may not use, a used-up quota, a chain that fails: `isError` results
    saying why, and no upstream call for what the gateway refuses itself."""
    async def call(arguments):
        async with mcp_session(world.base, world.key) as session:
            await session.initialize()
            return await session.call_tool("chat", arguments)

    not_allowed = run(call({"model": "oa/secret-1", "prompt": "hi"}))
    assert not_allowed.is_error is True
    assert not_allowed.content[0].text == "The model 'oa/secret-1' is not allowed for your account group."
    both = run(call({"prompt": "hi", "messages": [{"role": "user", "content": "hi"}]}))
    assert both.is_error is True and "either 'prompt' or 'messages'" in both.content[0].text
    assert world.upstream.requests == []

    world.upstream.configure(fail_status=503)
    failed = run(call({"prompt": "hi"}))
    assert failed.is_error is True
    assert failed.content[0].text.startswith("Every model in the chain is unavailable right now; retry in ")

    world.upstream.configure(fail_status=None)
    world.group.daily_tokens = 0
    world.group.save()
    spent = run(call({"prompt": "hi"}))
    assert spent.is_error is True and spent.content[0].text.startswith("Token quota reached")


def test_chat_with_a_model_or_server_that_does_not_exist_is_a_tool_error_not_the_default(world):
    async def call(model):
        async with mcp_session(world.base, world.key) as session:
            await session.initialize()
            return await session.call_tool("chat", {"model": model, "prompt": "hi"})

    for model in ("no-such-model", "oa/no-such-model", "nosuchserver/echo-1"):
        result = run(call(model))
        assert result.is_error is True
        assert result.content[0].text.startswith(f"The model '{model}' does not exist")
    assert world.upstream.requests == []


def test_a_reply_cut_midway_is_a_tool_error_with_what_arrived_and_is_metered(world):
    world.upstream.configure(reply="alpha beta gamma delta epsilon zeta", cut_after_tokens=2)

    async def scenario():
        async with mcp_session(world.base, world.key) as session:
            await session.initialize()
            return await session.call_tool("chat", {"prompt": "go"})

    result = run(scenario())
    assert result.is_error is True
    text = result.content[0].text
    assert text.startswith("The model server closed the connection mid-reply. Partial reply: ")  # as on /v1
    partial = text.split("Partial reply: ", 1)[1]
    assert partial and "alpha beta gamma delta epsilon zeta".startswith(partial)
    record = wait_for_usage(world.account)[0]
    assert record.surface == "mcp" and record.output_tokens > 0


def test_search_collection_finds_passages_of_the_callers_collection_only(world):
    collection = collection_create(account=world.account, name="handbook")
    target = embedding_model_for(account=world.account)
    for name, text in (("pets.txt", "Cats purr and dogs bark at the mailman."),
                       ("space.txt", "Rockets need fuel to reach orbit around the planet.")):
        run(document_write(collection=collection, target=target,
                           document=NewDocument(name=name, content_type="text/plain", size=len(text), text=text)))
    theirs = collection_create(account=world.outsider, name="private")

    async def scenario():
        async with mcp_session(world.base, world.key) as session:
            await session.initialize()
            found = await session.call_tool("search_collection",
                                            {"collection_id": collection.pk, "query": "rockets orbit fuel", "k": 1})
            other = await session.call_tool("search_collection", {"collection_id": theirs.pk, "query": "rockets"})
            return found, other

    found, other = run(scenario())
    assert found.is_error is False, found.content
    hits = found.structured_content["results"]
    assert len(hits) == 1
    assert hits[0]["document_name"] == "space.txt"
    assert "Rockets need fuel" in hits[0]["text"]
    assert other.is_error is True
    assert other.content[0].text == "Collection not found."
    assert Collection.objects.count() == 2


def test_search_collection_takes_k_written_as_a_float(world):
    collection = collection_create(account=world.account, name="handbook")
    target = embedding_model_for(account=world.account)
    for name, text in (("pets.txt", "Cats purr and dogs bark."), ("space.txt", "Rockets need fuel."),
                       ("food.txt", "Bread needs flour.")):
        run(document_write(collection=collection, target=target,
                           document=NewDocument(name=name, content_type="text/plain", size=len(text), text=text)))

    async def scenario():
        async with mcp_session(world.base, world.key) as session:
            await session.initialize()
            return await session.call_tool("search_collection",
                                           {"collection_id": collection.pk, "query": "rockets", "k": 2.0})

    found = run(scenario())
    assert found.is_error is False, found.content
    assert len(found.structured_content["results"]) == 2


def test_list_and_start_routines_of_the_caller(world):
    daily = _routine(world.account, "daily")
    paused = _routine(world.account, "paused", is_enabled=False, disabled_reason="user")
    theirs = _routine(world.outsider, "theirs")

    async def scenario():
        async with mcp_session(world.base, world.key) as session:
            await session.initialize()
            listed = await session.call_tool("list_routines", {})
            started = await session.call_tool("start_routine", {"routine_id": daily.pk})
            refused = await session.call_tool("start_routine", {"routine_id": paused.pk})
            foreign = await session.call_tool("start_routine", {"routine_id": theirs.pk})
            return listed, started, refused, foreign

    listed, started, refused, foreign = run(scenario())
    routines = listed.structured_content["routines"]
    assert [(r["id"], r["name"], r["is_enabled"]) for r in routines] == [
        (daily.pk, "daily", True), (paused.pk, "paused", False)]
    assert [list(r) for r in routines] == [["id", "name", "trigger", "is_enabled", "disabled_reason", "schedule",
                                            "last_run_at", "next_run_at"]] * 2  # the API's fields, these only
    assert (routines[0]["disabled_reason"], routines[1]["disabled_reason"]) == (None, "user")
    assert all("webhook_token" not in r and "webhook_secret" not in r for r in routines)
    assert started.is_error is False
    run_row = Run.objects.get(routine=daily)
    assert run_row.trigger == "manual"
    assert started.structured_content == {"routine_id": daily.pk, "run_id": run_row.pk, "status": "queued",
                                          "trigger": "manual"}
    assert refused.is_error is True
    assert refused.content[0].text == f"Routine {paused.pk} is paused; enable it before starting it."
    assert foreign.is_error is True
    assert foreign.content[0].text == f"Routine {theirs.pk} not found."
    assert not Run.objects.filter(routine__in=[paused, theirs]).exists()


def test_a_chat_the_client_gives_up_on_is_metered_with_what_arrived(world):
    """Two tokens a second from the model; the client waits 1.5 seconds for the tools/call."""
    world.upstream.configure(reply="alpha beta gamma delta epsilon zeta eta theta", tokens_per_second=2)
    headers = {**bearer(world.key), "Accept": ACCEPT, "X-Request-Id": "mcp-went-away"}
    with httpx.Client(base_url=world.base, headers=headers) as http:
        started = http.post(PATH, json=rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                                          "clientInfo": {"name": "raw", "version": "1"}}, id=0))
        http.headers.update({"Mcp-Session-Id": started.headers["Mcp-Session-Id"],
                             "MCP-Protocol-Version": "2025-11-25"})
        with pytest.raises(httpx.TimeoutException):
            http.post(PATH, json=rpc("tools/call", {"name": "chat", "arguments": {"prompt": "go"}}), timeout=1.5)
    [record] = wait_for_usage(world.account)
    assert record.surface == "mcp" and record.request_id == "mcp-went-away"
    assert 0 < record.output_tokens < 8
