"""A group's guardrails on the agent's tool loop: what a tool brings back passes the input checks before
the next round's model reads it (a document's e-mail address found by `search_collection` reaches the
model redacted), and the collection's documents pass them before they are embedded."""

from __future__ import annotations

import asyncio

import pytest

from gateway.calls.embeddings import embedding_model_for
from gateway.state.per_process import flush_all
from gateway.web.errors import ApiError
from native.collections import NewDocument, document_write
from native.models import Chunk
from tests.compat.guard_support import AWS_KEY, BLOCK, EMAIL, REDACT, guard
from tests.factories import CollectionFactory, ModelFactory
from tests.native.agent_support import AGENT_CHAT, agent_fixture, mcp_server_fixture  # noqa: F401

TEXT = f"To reset your password write to {EMAIL} and wait for an answer."


def _collection(account, text=TEXT, group=None):
    collection = CollectionFactory(account=account, name="Handbook")
    asyncio.run(document_write(collection=collection, target=embedding_model_for(account=account), group=group,
                               document=NewDocument(name="faq.txt", content_type="text/plain", size=len(text),
                                                    text=text)))
    assert flush_all()
    return collection


def test_a_tools_result_reaches_the_next_round_redacted(agent):
    ModelFactory(server=agent.world.oa, name="embed-1", supports_chat=False, supports_embeddings=True)
    mine = _collection(agent.world.account)  # written before the group had guardrails
    guard(agent.world.group, REDACT)
    agent.upstream.reset()
    agent.upstream.configure(tool_script=[{"name": "search_collection",
                                           "arguments": {"collection_id": mine.pk, "query": "reset password"}}])
    body = agent.api.post(AGENT_CHAT, {"message": "How do I reset my password?"}).json()
    assert EMAIL in body["tool_calls"][0]["result"]  # the caller's own data, as the tool gave it
    rounds = [r for r in agent.upstream.requests if r.path == "/v1/chat/completions"]
    assert len(rounds) == 2
    assert EMAIL not in rounds[1].body.decode()
    assert '"role":"tool"' in rounds[1].body.decode().replace(" ", "")


def test_a_document_is_checked_before_it_is_embedded(agent):
    ModelFactory(server=agent.world.oa, name="embed-1", supports_chat=False, supports_embeddings=True)
    guard(agent.world.group, REDACT)
    agent.world.account.group.refresh_from_db()
    _collection(agent.world.account, group=agent.world.account.group)
    embedded = [r for r in agent.upstream.requests if r.path == "/v1/embeddings"]
    assert embedded and all(EMAIL not in r.body.decode() for r in embedded)
    assert EMAIL not in "".join(Chunk.objects.values_list("text", flat=True))
    guard(agent.world.group, BLOCK)
    agent.world.account.group.refresh_from_db()
    with pytest.raises(ApiError) as refused:
        _collection(agent.world.account, text=f"the deploy key is {AWS_KEY}", group=agent.world.account.group)
    assert (refused.value.status, refused.value.code) == (400, "content_policy_violation")
