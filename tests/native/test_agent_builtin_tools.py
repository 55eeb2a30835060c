"""`POST /api/v1/agent/chat` with the built-in tools through a running gateway: the model calls
`search_collection` and `start_routine`, on the caller's own collections and routines only, with
the tool's JSON Schema checked before it runs."""

import json
import secrets

import pytest

from gateway.state.per_process import flush_all
from tests.factories import CollectionFactory, ModelFactory, RoutineFactory
from tests.native.agent_support import AGENT_CHAT, agent_fixture, mcp_server_fixture  # noqa: F401
from tests.servers import wait_for_usage


def _collection_with_a_document(account):
    import asyncio

    from gateway.calls.embeddings import embedding_model_for
    from native.collections import NewDocument, document_write

    collection = CollectionFactory(account=account, name="Handbook")
    text = "To reset your password open the settings page and choose reset password."
    asyncio.run(document_write(collection=collection, target=embedding_model_for(account=account),
                               document=NewDocument(name="faq.txt", content_type="text/plain", size=len(text),
                                                    text=text)))
    assert flush_all()  # the document's embedding, metered in this process
    return collection


def test_search_collection_searches_the_callers_collection(agent):
    ModelFactory(server=agent.world.oa, name="embed-1", supports_chat=False, supports_embeddings=True)
    mine = _collection_with_a_document(agent.world.account)
    agent.upstream.reset()
    agent.upstream.configure(tool_script=[{"name": "search_collection",
                                           "arguments": {"collection_id": mine.pk, "query": "reset password"}}])
    body = agent.api.post(AGENT_CHAT, {"message": "How do I reset my password?"}).json()
    [call] = body["tool_calls"]
    found = json.loads(call["result"])  # as the MCP endpoint's search_collection answers
    assert (found["collection_id"], found["query"]) == (mine.pk, "reset password")
    hits = found["results"]
    assert hits[0]["document_name"] == "faq.txt"
    assert "reset your password" in hits[0]["text"]
    assert "/v1/embeddings" in [q.path for q in agent.upstream.requests]
    *_indexed, searched = [u for u in wait_for_usage(agent.world.account, 4) if u.surface == "native_collections"]
    assert searched.request_id == body["request_id"]  # metered as part of the agent request


def test_search_collection_refuses_another_accounts_collection(agent):
    ModelFactory(server=agent.world.oa, name="embed-1", supports_chat=False, supports_embeddings=True)
    theirs = _collection_with_a_document(agent.world.outsider)
    agent.upstream.reset()
    agent.upstream.configure(tool_script=[{"name": "search_collection",
                                           "arguments": {"collection_id": theirs.pk, "query": "reset password"}}])
    body = agent.api.post(AGENT_CHAT, {"message": "Search theirs."}).json()
    assert body["tool_calls"] == [{"name": "search_collection",
                                   "arguments": {"collection_id": theirs.pk, "query": "reset password"},
                                   "error": "Collection not found."}]
    assert "/v1/embeddings" not in [q.path for q in agent.upstream.requests]
    assert "reset your password" not in json.dumps(body)


def _routine(account):
    return RoutineFactory(account=account, name="Digest", prompt="Summarise the news.",
                          delivery_targets=["inapp"], webhook_token=secrets.token_hex(24))


def test_start_routine_queues_a_run_of_the_callers_routine(agent):
    from routines.models import Run

    routine = _routine(agent.world.account)
    agent.upstream.configure(tool_script=[{"name": "start_routine", "arguments": {"routine_id": routine.pk}}])
    body = agent.api.post(AGENT_CHAT, {"message": "Run my digest."}).json()
    [call] = body["tool_calls"]
    [run] = Run.objects.filter(routine=routine)
    assert run.trigger == "manual"
    assert json.loads(call["result"]) == {"routine_id": routine.pk, "run_id": run.pk, "status": "queued",
                                          "trigger": "manual"}


def test_start_routine_refuses_another_accounts_routine(agent):
    from routines.models import Run

    theirs = _routine(agent.world.outsider)
    agent.upstream.configure(tool_script=[{"name": "start_routine", "arguments": {"routine_id": theirs.pk}}])
    body = agent.api.post(AGENT_CHAT, {"message": "Run their digest."}).json()
    assert body["tool_calls"] == [{"name": "start_routine", "arguments": {"routine_id": theirs.pk},
                                   "error": f"Routine {theirs.pk} not found."}]
    assert not Run.objects.exists()


def test_start_routine_refuses_a_paused_routine(agent):
    from routines.models import Run

    routine = _routine(agent.world.account)
    routine.is_enabled = False
    routine.save()
    agent.upstream.configure(tool_script=[{"name": "start_routine", "arguments": {"routine_id": routine.pk}}])
    body = agent.api.post(AGENT_CHAT, {"message": "Run my digest."}).json()
    assert body["tool_calls"] == [{"name": "start_routine", "arguments": {"routine_id": routine.pk},
                                   "error": f"Routine {routine.pk} is paused; enable it before starting it."}]
    assert not Run.objects.exists()


@pytest.mark.parametrize("arguments, problem", [
    ({}, "'routine_id' is a required property"),
    ({"routine_id": "abc"}, "routine_id: 'abc' is not of type 'integer'"),
    ({"routine_id": 0}, "routine_id: 0 is less than the minimum of 1"),
    ({"routine_id": True}, "routine_id: True is not of type 'integer'"),
    ({"routine_id": 1, "when": "now"}, "Additional properties are not allowed ('when' was unexpected)"),
])
def test_start_routine_needs_a_routine_id(agent, arguments, problem):
    """The tool's JSON Schema is checked before it runs, as on the MCP endpoint."""
    from routines.models import Run

    agent.upstream.configure(tool_script=[{"name": "start_routine", "arguments": arguments}])
    [call] = agent.api.post(AGENT_CHAT, {"message": "Run."}).json()["tool_calls"]
    assert call["error"] == f"Invalid arguments for start_routine: {problem}"
    assert not Run.objects.exists()
